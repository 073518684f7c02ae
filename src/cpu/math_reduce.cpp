// Reductions of the math family: SUM (all elements -> one value of a's type), SUM_ROWS (each row
// -> [1, ne1, ne2, ne3]), ARGMAX (each row of a matrix -> I32, the first index of the maximum;
// NaN never wins, a row without a value above -inf gives 0) and COUNT_EQUAL (I32 a, b -> I64).
// Float sums accumulate in double; SUM and COUNT_EQUAL give each task a partial in its own cache
// line of scratch and task 0 adds them after a barrier.

#include "ops.h"
#include "vec.h"

namespace wsp::cpu {

namespace {

constexpr size_t SLOT = 64; // bytes of scratch per task: one cache line

const char * row_of(const wsp_ggml_tensor * t, int64_t r) {
    const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

double row_sum(const wsp_ggml_tensor * a, const char * x) {
    double s = 0.0;
    if (a->type == WSP_GGML_TYPE_F32 && a->nb[0] == sizeof(float)) {
        const float * v = reinterpret_cast<const float *>(x);
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            s += v[i];
        }
        return s;
    }
    for (int64_t i = 0; i < a->ne[0]; ++i) {
        s += load_f(a->type, x + i * a->nb[0]);
    }
    return s;
}

template <typename T>
T & slot(const ComputeParams & p, int task) {
    return *reinterpret_cast<T *>(static_cast<char *>(p.wdata) + (size_t) task * SLOT);
}

void compute_sum(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    double s = 0.0;
    for (int64_t r = r0; r < r1; ++r) {
        s += row_sum(a, row_of(a, r));
    }
    slot<double>(p, p.ith) = s;
    p.barrier();
    if (p.ith == 0) {
        double total = 0.0;
        for (int t = 0; t < p.nth; ++t) {
            total += slot<double>(p, t);
        }
        store_f(dst->type, dst->data, (float) total);
    }
}

void compute_sum_rows(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        store_f(dst->type, const_cast<char *>(row_of(dst, r)), (float) row_sum(a, row_of(a, r)));
    }
}

void compute_argmax(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    int64_t                 r0, r1;
    split_range(a->ne[1], p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const char * x    = static_cast<const char *>(a->data) + r * a->nb[1];
        float        best = -INFINITY;
        int32_t      idx  = 0;
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            const float v = load_f(a->type, x + i * a->nb[0]);
            if (v > best) {
                best = v;
                idx  = (int32_t) i;
            }
        }
        *reinterpret_cast<int32_t *>(static_cast<char *>(dst->data) + r * dst->nb[0]) = idx;
    }
}

void compute_count_equal(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    const wsp_ggml_tensor * b = dst->src[1];
    int64_t                 r0, r1;
    split_range(wsp_ggml_nrows(a), p.ith, p.nth, r0, r1);
    int64_t n = 0;
    for (int64_t r = r0; r < r1; ++r) {
        const char * xa = row_of(a, r);
        const char * xb = row_of(b, r);
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            n += *reinterpret_cast<const int32_t *>(xa + i * a->nb[0]) ==
                 *reinterpret_cast<const int32_t *>(xb + i * b->nb[0]);
        }
    }
    slot<int64_t>(p, p.ith) = n;
    p.barrier();
    if (p.ith == 0) {
        int64_t total = 0;
        for (int t = 0; t < p.nth; ++t) {
            total += slot<int64_t>(p, t);
        }
        *static_cast<int64_t *>(dst->data) = total;
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    switch (dst->op) {
        case WSP_GGML_OP_SUM: compute_sum(p, dst); break;
        case WSP_GGML_OP_SUM_ROWS: compute_sum_rows(p, dst); break;
        case WSP_GGML_OP_ARGMAX: compute_argmax(p, dst); break;
        case WSP_GGML_OP_COUNT_EQUAL: compute_count_equal(p, dst); break;
        default: break;
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a = dst->src[0];
    switch (dst->op) {
        case WSP_GGML_OP_SUM: return is_float_type(a->type) && is_float_type(dst->type) && wsp_ggml_nelements(dst) == 1;
        case WSP_GGML_OP_SUM_ROWS:
            return is_float_type(a->type) && is_float_type(dst->type) && dst->ne[0] == 1 && dst->ne[1] == a->ne[1] &&
                   dst->ne[2] == a->ne[2] && dst->ne[3] == a->ne[3];
        case WSP_GGML_OP_ARGMAX:
            return is_float_type(a->type) && dst->type == WSP_GGML_TYPE_I32 && wsp_ggml_is_matrix(a) &&
                   dst->ne[0] == a->ne[1];
        case WSP_GGML_OP_COUNT_EQUAL:
            return a->type == WSP_GGML_TYPE_I32 && dst->src[1]->type == WSP_GGML_TYPE_I32 &&
                   wsp_ggml_are_same_shape(a, dst->src[1]) && dst->type == WSP_GGML_TYPE_I64;
        default: return false;
    }
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * a    = dst->src[0];
    const int64_t           rows = dst->op == WSP_GGML_OP_ARGMAX ? a->ne[1] : wsp_ggml_nrows(a);
    const int               n    = tasks_for_elements(wsp_ggml_nelements(a), n_threads);
    return (int) (rows < n ? (rows < 1 ? 1 : rows) : n);
}

size_t work_size(const wsp_ggml_tensor *, int n_tasks) {
    return (size_t) n_tasks * SLOT;
}

} // namespace

const OpKernel kernel_math_reduce = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
