// MUL_MAT: dst[i0, i1, i2, i3] = sum_k a[k, i0, i2 / r2, i3 / r3] * b[k, i1, i2, i3] with
// r2 = ne12 / ne02, r3 = ne13 / ne03 (a broadcast over b's dims 2-3). The node takes one of three
// paths (mul_mat_path.h), chosen from its shape alone so that the thread count never changes
// the numerics; each path sizes its own share of the work buffer.

#include "mul_mat_dot.h"
#include "mul_mat_gemm.h"
#include "mul_mat_path.h"
#include "ops.h"
#include "repack.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

mm::Path path_of(const mm::Geometry & g) {
    return mm::choose_path(g.a->type, g.N, g.M);
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    const mm::Geometry g(dst);
    if (stored_repacked(g.a)) {
        return mm::repack_work_size(g, n_tasks);
    }
    switch (path_of(g)) {
        case mm::Path::gemm: return mm::gemm_work_size(g, n_tasks);
        case mm::Path::dot_q8: return mm::dot_q8_work_size(g, n_tasks);
        default: return mm::dot_float_work_size(g, n_tasks);
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const mm::Geometry g(dst);
    if (stored_repacked(g.a)) {
        mm::repack_compute(p, g); // every M: the weight exists only in the 8-row layout
        return;
    }
    switch (path_of(g)) {
        case mm::Path::gemm: mm::gemm_compute(p, g); return;
        case mm::Path::dot_q8: mm::dot_q8_compute(p, g); return;
        default: mm::dot_float_compute(p, g); return;
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const wsp_ggml_tensor * b = dst->src[1];
    if (dst->type != WSP_GGML_TYPE_F32 || !is_float_type(b->type)) {
        return false;
    }
    if (stored_repacked(a)) {
        return repack_allows(dst);
    }
    if (is_float_type(a->type)) {
        return true; // any element stride
    }
    // quantized rows: whole blocks back to back, decoded by the type's converter (or our own)
    const wsp_ggml_type_traits * tr = wsp_ggml_get_type_traits(a->type);
    return wsp_ggml_is_quantized(a->type) && tr->to_float != nullptr && wsp_ggml_is_contiguous_rows(a) &&
           a->ne[0] % tr->blck_size == 0;
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * a     = dst->src[0];
    const int64_t           flops = a->ne[0] * wsp_ggml_nelements(dst);
    return tasks_for_elements(flops, n_threads, 65536);
}

} // namespace

const OpKernel kernel_mul_mat = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
