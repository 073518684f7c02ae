// OUT_PROD: dst[i, j, i2, i3] = sum_l a[i, l, i2 / r2, i3 / r3] * b[j, l, i2, i3] (a broadcast
// over b's dims 2-3). a F32/F16/BF16 (any strides) or a quantized type with packed rows, b
// F32/F16/BF16 any strides, dst F32. a is converted to F32 once unless it already is with packed
// rows (shared, then a barrier); an item is JB dst rows of one batch, accumulated as axpys over
// a's rows (each row read once per item) in the task's scratch.

#include "ops.h"
#include "vec.h"

#include "mul_mat_common.h"

#include <cstring>

namespace wsp::cpu {

namespace {

constexpr int64_t JB = 4; // dst rows per item

bool a_direct(const wsp_ggml_tensor * a) {
    return a->type == WSP_GGML_TYPE_F32 && a->nb[0] == sizeof(float);
}

size_t a_floats(const wsp_ggml_tensor * a) {
    return a_direct(a) ? 0 : (size_t) wsp_ggml_nelements(a);
}

size_t task_bytes(const wsp_ggml_tensor * dst) {
    return mm::align_up((size_t) (JB * dst->ne[0]) * sizeof(float));
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return mm::ALIGN + mm::align_up(a_floats(dst->src[0]) * sizeof(float)) + (size_t) n_tasks * task_bytes(dst);
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const wsp_ggml_tensor * b = dst->src[1];
    const int64_t           m = a->ne[0], k = a->ne[1], n = b->ne[0];
    const int64_t           ne2 = dst->ne[2], ne3 = dst->ne[3];
    const int64_t           r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];
    mm::WorkCarver          carve(p.wdata);
    float *                 af     = carve.take<float>(a_floats(a));
    float *                 acc    = reinterpret_cast<float *>(carve.take<char>((size_t) p.nth * task_bytes(dst)) +
                                            (size_t) p.ith * task_bytes(dst));
    const bool              direct = a_direct(a);
    if (!direct) {
        int64_t r0, r1;
        split_range(k * a->ne[2] * a->ne[3], p.ith, p.nth, r0, r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t l = r % k, i2 = (r / k) % a->ne[2], i3 = r / (k * a->ne[2]);
            strided_row_to_f32(a->type,
                               static_cast<const char *>(a->data) + l * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3],
                               a->nb[0], af + r * m, m);
        }
        p.barrier();
    }
    const auto a_row = [&](int64_t l, int64_t i2, int64_t i3) -> const float * {
        if (!direct) {
            return af + ((i3 * a->ne[2] + i2) * k + l) * m;
        }
        return reinterpret_cast<const float *>(static_cast<const char *>(a->data) + l * a->nb[1] + i2 * a->nb[2] +
                                               i3 * a->nb[3]);
    };

    const int64_t n_jb = (n + JB - 1) / JB;
    for (int64_t item = p.next_chunk(); item < n_jb * ne2 * ne3; item = p.next_chunk()) {
        const int64_t jb = item % n_jb, i2 = (item / n_jb) % ne2, i3 = item / (n_jb * ne2);
        const int64_t j0 = jb * JB, nj = j0 + JB < n ? JB : n - j0;
        std::memset(acc, 0, (size_t) (nj * m) * sizeof(float));
        const char * bb = static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
        for (int64_t l = 0; l < k; ++l) {
            const float * x = a_row(l, i2 / r2, i3 / r3);
            for (int64_t j = 0; j < nj; ++j) {
                const float v = load_f(b->type, bb + (j0 + j) * b->nb[0] + l * b->nb[1]);
                vec_axpy(acc + j * m, x, m, v);
            }
        }
        for (int64_t j = 0; j < nj; ++j) {
            char * drow = static_cast<char *>(dst->data) + (j0 + j) * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
            for (int64_t i = 0; i < m; ++i) {
                *reinterpret_cast<float *>(drow + i * dst->nb[0]) = acc[j * m + i];
            }
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    if (dst->type != WSP_GGML_TYPE_F32 || !is_float_type(dst->src[1]->type)) {
        return false;
    }
    if (is_float_type(a->type)) {
        return true;
    }
    const wsp_ggml_type_traits * tr = wsp_ggml_get_type_traits(a->type);
    return wsp_ggml_is_quantized(a->type) && tr->to_float != nullptr && a->ne[0] % tr->blck_size == 0;
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    return tasks_for_elements(dst->src[0]->ne[1] * wsp_ggml_nelements(dst), n_threads, 65536);
}

} // namespace

const OpKernel kernel_out_prod = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
