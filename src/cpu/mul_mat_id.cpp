// MUL_MAT_ID: dst[:, e, t] = as[:, :, ids[e, t]] x b[:, e % n_b, t], the experts' weights F32,
// F16, BF16 or a quantized type with a converter, b F32/F16/BF16, any strides (quantized rows
// packed). Phase 1: b's rows to F32 (split over the tasks) while task 0 groups the (e, t) pairs
// by expert (a counting sort); barrier. Phase 2: items of ROWS weight rows of one expert, taken
// with next_chunk(); each row is converted to F32 once and dotted with every b row routed to its
// expert. Numerics are exact-weight F32 dots whatever the thread count. An id outside the experts
// gives a zero column and one logged error.

#include "ops.h"
#include "vec.h"

#include "mul_mat_common.h"

#include <cstring>

namespace wsp::cpu {

namespace {

constexpr int64_t ROWS = 16; // weight rows per item

struct Dims {
    int64_t K, N, n_as, n_used, n_tok, n_b;
    explicit Dims(const wsp_ggml_tensor * dst)
        : K(dst->src[0]->ne[0]), N(dst->src[0]->ne[1]), n_as(dst->src[0]->ne[2]), n_used(dst->src[2]->ne[0]),
          n_tok(dst->src[2]->ne[1]), n_b(dst->src[1]->ne[1]) {}
    int64_t n_pairs() const { return n_used * n_tok; }
};

// work buffer: b as F32 [K, n_b, n_tok], expert offsets [n_as + 1], pairs sorted by expert, one
// converted weight row per task
struct Work {
    float *   bf;
    int64_t * offs;
    int64_t * pairs;
    float *   rows;
};

Work carve(const Dims & d, void * base, int nth) {
    mm::WorkCarver c(base);
    Work           w;
    w.bf    = c.take<float>((size_t) (d.K * d.n_b * d.n_tok));
    w.offs  = c.take<int64_t>((size_t) d.n_as + 1);
    w.pairs = c.take<int64_t>((size_t) d.n_pairs());
    w.rows  = c.take<float>((size_t) nth * mm::align_up((size_t) d.K * sizeof(float)) / sizeof(float));
    return w;
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    const Dims d(dst);
    return mm::ALIGN + mm::align_up((size_t) (d.K * d.n_b * d.n_tok) * sizeof(float)) +
           mm::align_up(((size_t) d.n_as + 1) * sizeof(int64_t)) +
           mm::align_up((size_t) d.n_pairs() * sizeof(int64_t)) +
           (size_t) n_tasks * mm::align_up((size_t) d.K * sizeof(float));
}

int32_t id_at(const wsp_ggml_tensor * ids, int64_t e, int64_t t) {
    return *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) + e * ids->nb[0] + t * ids->nb[1]);
}

float * dst_col(wsp_ggml_tensor * dst, int64_t e, int64_t t) {
    return reinterpret_cast<float *>(static_cast<char *>(dst->data) + e * dst->nb[1] + t * dst->nb[2]);
}

// task 0: pairs (flat index e + n_used * t) grouped by expert; invalid ids get zero columns
void group_pairs(const Dims & d, wsp_ggml_tensor * dst, const Work & w) {
    const wsp_ggml_tensor * ids = dst->src[2];
    std::memset(w.offs, 0, (size_t) (d.n_as + 1) * sizeof(int64_t));
    bool reported = false;
    for (int64_t i = 0; i < d.n_pairs(); ++i) {
        const int32_t ex = id_at(ids, i % d.n_used, i / d.n_used);
        if (ex >= 0 && ex < d.n_as) {
            ++w.offs[ex + 1];
            continue;
        }
        if (!reported) {
            WSP_LOG_ERROR("mul_mat_id: expert id %d is outside the %lld experts of %s; its result is zero\n", ex,
                          (long long) d.n_as, describe(dst->src[0]).c_str());
            reported = true;
        }
        float * col = dst_col(dst, i % d.n_used, i / d.n_used);
        for (int64_t r = 0; r < d.N; ++r) {
            *reinterpret_cast<float *>(reinterpret_cast<char *>(col) + r * dst->nb[0]) = 0.0f;
        }
    }
    for (int64_t ex = 0; ex < d.n_as; ++ex) {
        w.offs[ex + 1] += w.offs[ex];
    }
    // offs[ex] is now where expert ex starts; fill with a moving cursor, then shift back
    for (int64_t i = 0; i < d.n_pairs(); ++i) {
        const int32_t ex = id_at(ids, i % d.n_used, i / d.n_used);
        if (ex >= 0 && ex < d.n_as) {
            w.pairs[w.offs[ex]++] = i;
        }
    }
    for (int64_t ex = d.n_as; ex > 0; --ex) {
        w.offs[ex] = w.offs[ex - 1];
    }
    w.offs[0] = 0;
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * as = dst->src[0];
    const wsp_ggml_tensor * b  = dst->src[1];
    const Dims              d(dst);
    const Work              w = carve(d, p.wdata, p.nth);

    int64_t r0, r1;
    split_range(d.n_b * d.n_tok, p.ith, p.nth, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const char * src = static_cast<const char *>(b->data) + (r % d.n_b) * b->nb[1] + (r / d.n_b) * b->nb[2];
        strided_row_to_f32(b->type, src, b->nb[0], w.bf + r * d.K, d.K);
    }
    if (p.ith == 0) {
        group_pairs(d, dst, w);
    }
    p.barrier();

    float *       wrow    = w.rows + (size_t) p.ith * (mm::align_up((size_t) d.K * sizeof(float)) / sizeof(float));
    const bool    direct  = as->type == WSP_GGML_TYPE_F32 && as->nb[0] == sizeof(float);
    const int64_t n_block = (d.N + ROWS - 1) / ROWS;
    for (int64_t item = p.next_chunk(); item < d.n_as * n_block; item = p.next_chunk()) {
        const int64_t ex = item / n_block, blk = item % n_block;
        const int64_t p0 = w.offs[ex], p1 = w.offs[ex + 1];
        if (p0 == p1) {
            continue;
        }
        const int64_t i0 = blk * ROWS, i1 = i0 + ROWS < d.N ? i0 + ROWS : d.N;
        for (int64_t i = i0; i < i1; ++i) {
            const char *  src = static_cast<const char *>(as->data) + i * as->nb[1] + ex * as->nb[2];
            const float * x   = reinterpret_cast<const float *>(src);
            if (!direct) {
                strided_row_to_f32(as->type, src, as->nb[0], wrow, d.K);
                x = wrow;
            }
            for (int64_t q = p0; q < p1; ++q) {
                const int64_t e = w.pairs[q] % d.n_used, t = w.pairs[q] / d.n_used;
                const float * y = w.bf + ((e % d.n_b) + d.n_b * t) * d.K;
                *reinterpret_cast<float *>(reinterpret_cast<char *>(dst_col(dst, e, t)) + i * dst->nb[0]) =
                    vec_dot_f32(x, y, d.K);
            }
        }
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * as = dst->src[0];
    if (dst->type != WSP_GGML_TYPE_F32 || !is_float_type(dst->src[1]->type) || dst->src[2]->type != WSP_GGML_TYPE_I32) {
        return false;
    }
    if (is_float_type(as->type)) {
        return true;
    }
    const wsp_ggml_type_traits * tr = wsp_ggml_get_type_traits(as->type);
    return wsp_ggml_is_quantized(as->type) && tr->to_float != nullptr && as->nb[0] == wsp_ggml_type_size(as->type) &&
           as->ne[0] % tr->blck_size == 0;
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const int64_t flops = dst->src[0]->ne[0] * wsp_ggml_nelements(dst);
    return tasks_for_elements(flops, n_threads, 65536);
}

} // namespace

const OpKernel kernel_mul_mat_id = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
