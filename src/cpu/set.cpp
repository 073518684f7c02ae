// ACC and SET: dst = a, then b added to (ACC) or written over (SET) the view of dst whose
// element (i0, i1, i2, i3) lies at offset + i0 * elem + i1 * nb1 + i2 * nb2 + i3 * nb3 bytes
// (op_params { nb1, nb2, nb3, offset, inplace }). The copy of a is skipped when dst already is a's
// memory (in place); a barrier separates it from the writes of b, which may land in any task's
// rows. F32/F16/BF16 in any mix, or SET between equal non-float types as raw elements.

#include "ops.h"
#include "vec.h"

#include <cstring>

namespace wsp::cpu {

namespace {

char * row_of(const wsp_ggml_tensor * t, int64_t r) {
    const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// element by element: float types convert, equal types copy their bytes
void copy_row(const wsp_ggml_tensor * s, const char * ps, const wsp_ggml_tensor * d, char * pd, int64_t n,
              size_t dst_stride) {
    if (s->type == d->type) {
        const size_t es = wsp_ggml_type_size(s->type);
        for (int64_t i = 0; i < n; ++i) {
            std::memcpy(pd + i * dst_stride, ps + i * s->nb[0], es);
        }
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        store_f(d->type, pd + i * dst_stride, load_f(s->type, ps + i * s->nb[0]));
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const wsp_ggml_tensor * b = dst->src[1];
    int64_t                 r0, r1;
    if (dst->data != a->data) {
        split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            copy_row(a, row_of(a, r), dst, row_of(dst, r), a->ne[0], dst->nb[0]);
        }
        p.barrier();
    }
    const size_t nb1 = (size_t) get_op_param_i32(dst, 0), nb2 = (size_t) get_op_param_i32(dst, 1);
    const size_t nb3 = (size_t) get_op_param_i32(dst, 2), offset = (size_t) get_op_param_i32(dst, 3);
    const size_t es  = wsp_ggml_type_size(dst->type);
    const bool   acc = dst->op == WSP_GGML_OP_ACC;
    split_range(wsp_ggml_nrows(b), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % b->ne[1], i2 = (r / b->ne[1]) % b->ne[2], i3 = r / (b->ne[1] * b->ne[2]);
        char *        pd = static_cast<char *>(dst->data) + offset + i1 * nb1 + i2 * nb2 + i3 * nb3;
        const char *  pb = row_of(b, r);
        if (!acc) {
            copy_row(b, pb, dst, pd, b->ne[0], es);
            continue;
        }
        for (int64_t i = 0; i < b->ne[0]; ++i) {
            char * e = pd + i * es;
            store_f(dst->type, e, load_f(dst->type, e) + load_f(b->type, pb + i * b->nb[0]));
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const wsp_ggml_tensor * b = dst->src[1];
    if (dst->type != a->type || !wsp_ggml_are_same_shape(dst, a)) {
        return false;
    }
    if (is_float_type(a->type) && is_float_type(b->type)) {
        return true;
    }
    return dst->op == WSP_GGML_OP_SET && a->type == b->type && !wsp_ggml_is_quantized(a->type);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_for_elements(wsp_ggml_nelements(dst->src[0]), n_threads);
}

} // namespace

const OpKernel kernel_set = { supported, n_tasks, nullptr, compute };

} // namespace wsp::cpu
