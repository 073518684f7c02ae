// FLASH_ATTN_EXT: out = softmax(scale * q.k (softcapped) + slope * mask) . v, tiled. A task takes a
// chunk (batch, head, block of BLOCK_Q queries) and walks the keys in blocks of BLOCK_K with an
// online softmax (running max m and sum l per query, accumulator rescaled when m grows), so no
// n_kv-sized score row exists. Result [Dv, n_head, n_q, ne3] (permuted); a query whose keys are
// all masked gets zeros. Blocks whose mask is -inf for every query of the chunk are skipped.

#include "flash_attn_tile.h"
#include "ops.h"

#include <algorithm>
#include <cmath>

namespace wsp::cpu {

namespace {

using fa::BLOCK_K;
using fa::BLOCK_Q;

// per-task scratch, in floats; every buffer starts on a vector boundary
struct Scratch {
    float * q;     // BLOCK_Q x D, pre-scaled queries
    float * kt;    // D x BLOCK_K, transposed keys
    float * s;     // BLOCK_Q x BLOCK_K, scores then probabilities
    float * vb;    // BLOCK_K x Dvp, values
    float * o;     // BLOCK_Q x Dvp, unnormalised outputs
    float * m;     // BLOCK_Q running maxima
    float * l;     // BLOCK_Q running sums
    float * alpha; // BLOCK_Q rescale factors of the current block
    float * tmp;   // D, one key row on the strided path
};

int64_t scratch_floats(int64_t D, int64_t Dv, Scratch * sc, float * base) {
    const int64_t Dvp     = fa::pad_lanes(Dv);
    const int64_t sizes[] = { BLOCK_Q * D,   D * BLOCK_K,   BLOCK_Q * BLOCK_K,
                              BLOCK_K * Dvp, BLOCK_Q * Dvp, BLOCK_Q,
                              BLOCK_Q,       BLOCK_Q,       D };
    float **      slots[] = { &sc->q, &sc->kt, &sc->s, &sc->vb, &sc->o, &sc->m, &sc->l, &sc->alpha, &sc->tmp };
    int64_t       off     = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
        if (base != nullptr) {
            *slots[i] = base + off;
        }
        off += (sizes[i] + 15) / 16 * 16; // 64-byte steps
    }
    return off + 16; // room to align the task's base
}

size_t task_bytes(const wsp_ggml_tensor * dst) {
    Scratch unused;
    return (size_t) scratch_floats(dst->src[0]->ne[0], dst->src[2]->ne[0], &unused, nullptr) * sizeof(float);
}

size_t work_size(const wsp_ggml_tensor * dst, int n_tasks) {
    return (size_t) n_tasks * task_bytes(dst);
}

struct Attn {
    const wsp_ggml_tensor *q, *k, *v, *mask;
    wsp_ggml_tensor *      dst;
    int64_t                D, Dv, n_q, n_kv, n_head;
    float                  qscale, softcap, max_bias;
    bool                   kv_float; // K and V both of a float type
};

// scores of one query row for keys kb..kb+nk: softcap, mask, -inf past the last key
void finish_scores(const Attn & a, float * s, const char * mask_row, float slope, int64_t kb, int64_t nk) {
    if (a.softcap != 0.0f) {
        // q was pre-scaled by scale / softcap
        vec_tanh(s, s, nk);
        vec_scale(s, nk, a.softcap);
    }
    if (mask_row != nullptr) {
        fa::add_mask_row(a.mask->type, mask_row + kb * a.mask->nb[0], slope, s, nk);
    }
    std::fill(s + nk, s + BLOCK_K, -INFINITY);
}

void attend_chunk(const Attn & a, const Scratch & sc, int64_t b, int64_t h, int64_t q0, int64_t nq) {
    const wsp_ggml_tensor *q = a.q, *k = a.k, *v = a.v, *mask = a.mask;
    const int64_t          Dvp = fa::pad_lanes(a.Dv);
    const int64_t          hk = h / (a.n_head / k->ne[2]), bk = b / (q->ne[3] / k->ne[3]);
    const char *           kbase = static_cast<const char *>(k->data) + hk * k->nb[2] + bk * k->nb[3];
    const char *           vbase = static_cast<const char *>(v->data) + hk * v->nb[2] + bk * v->nb[3];
    const char *           mask0 = mask ? static_cast<const char *>(mask->data) + q0 * mask->nb[1] +
                                    (h % mask->ne[2]) * mask->nb[2] + (b % mask->ne[3]) * mask->nb[3]
                                        : nullptr;
    const float            slope = alibi_slope(a.max_bias, h, a.n_head);

    for (int64_t i = 0; i < nq; ++i) {
        const char * row = static_cast<const char *>(q->data) + (q0 + i) * q->nb[1] + h * q->nb[2] + b * q->nb[3];
        strided_row_to_f32(q->type, row, q->nb[0], sc.q + i * a.D, a.D);
        vec_scale(sc.q + i * a.D, a.D, a.qscale);
        sc.m[i] = -INFINITY;
        sc.l[i] = 0.0f;
    }
    std::fill(sc.o, sc.o + nq * Dvp, 0.0f);

    // the few-query path reads float K and V rows in place, so it needs them contiguous along D; a
    // quantized K or V (Note [quantized K/V]) takes the tiles, which dequantize a block of rows
    const bool direct = nq <= fa::DIRECT_MAX_Q && a.kv_float && k->nb[0] == wsp_ggml_type_size(k->type) &&
                        v->nb[0] == wsp_ggml_type_size(v->type);
    for (int64_t kb = 0; kb < a.n_kv; kb += BLOCK_K) {
        const int64_t nk = std::min(BLOCK_K, a.n_kv - kb);
        if (mask0 != nullptr && fa::mask_block_all_inf(mask->type, mask0, mask->nb[1], nq, kb, nk)) {
            continue;
        }
        const char * k0 = kbase + kb * k->nb[1];
        const char * v0 = vbase + kb * v->nb[1];
        if (direct) {
            fa::qk_direct(k->type, sc.q, a.D, nq, k0, k->nb[1], nk, a.D, sc.s);
        } else {
            fa::load_k_transposed(k->type, k0, k->nb[0], k->nb[1], nk, a.D, sc.kt, sc.tmp);
            fa::qk_block(sc.q, a.D, nq, sc.kt, a.D, sc.s);
        }
        for (int64_t i = 0; i < nq; ++i) {
            float * s = sc.s + i * BLOCK_K;
            finish_scores(a, s, mask0 ? mask0 + i * mask->nb[1] : nullptr, slope, kb, nk);
            sc.alpha[i] = fa::online_softmax_row(s, sc.m[i], sc.l[i]);
        }
        if (direct) {
            fa::pv_direct(v->type, sc.s, nq, v0, v->nb[1], nk, a.Dv, sc.alpha, sc.o, Dvp);
        } else {
            fa::load_v_rows(v->type, v0, v->nb[0], v->nb[1], nk, a.Dv, Dvp, sc.vb);
            fa::pv_block(sc.s, nq, sc.vb, Dvp, nk, sc.alpha, sc.o);
        }
    }

    for (int64_t i = 0; i < nq; ++i) {
        float *     out = reinterpret_cast<float *>(static_cast<char *>(a.dst->data) + (q0 + i) * a.dst->nb[2] +
                                                h * a.dst->nb[1] + b * a.dst->nb[3]);
        const float inv = sc.l[i] > 0.0f ? 1.0f / sc.l[i] : 0.0f;
        vec_scale_bias(sc.o + i * Dvp, out, a.Dv, inv, 0.0f);
    }
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    Attn a;
    a.q = dst->src[0], a.k = dst->src[1], a.v = dst->src[2], a.mask = dst->src[3], a.dst = dst;
    a.D = a.q->ne[0], a.Dv = a.v->ne[0], a.n_q = a.q->ne[1], a.n_kv = a.k->ne[1], a.n_head = a.q->ne[2];
    const float scale = get_op_param_f32(dst, 0);
    a.max_bias        = get_op_param_f32(dst, 1);
    a.softcap         = get_op_param_f32(dst, 2);
    a.qscale          = a.softcap != 0.0f ? scale / a.softcap : scale;
    a.kv_float        = is_float_type(a.k->type) && is_float_type(a.v->type);

    char * base = static_cast<char *>(p.wdata) + (size_t) p.ith * task_bytes(dst);
    base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
    Scratch sc;
    scratch_floats(a.D, a.Dv, &sc, reinterpret_cast<float *>(base));

    const int64_t n_qb     = (a.n_q + BLOCK_Q - 1) / BLOCK_Q;
    const int64_t n_chunks = n_qb * a.n_head * a.q->ne[3];
    // chunks handed out dynamically: masked (causal) chunks finish early and cores rebalance
    for (int64_t c = p.next_chunk(); c < n_chunks; c = p.next_chunk()) {
        const int64_t qb = c % n_qb, h = (c / n_qb) % a.n_head, b = c / (n_qb * a.n_head);
        const int64_t q0 = qb * BLOCK_Q;
        attend_chunk(a, sc, b, h, q0, std::min(BLOCK_Q, a.n_q - q0));
    }
}

// Note [quantized K/V]: a K or V cache of Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 (the types the client's
// CPU attends over: a half or a quarter of an F16 cache's bytes) is read a block of BLOCK_K rows at
// a time through the type's dequantizer into the tiles' F32 buffers, so the queries stay F32 and
// the scores are those of the dequantized cache (the client quantizes the queries to K's vec_dot
// type first). The rows must hold whole blocks, contiguous.
bool kv_type_ok(const wsp_ggml_tensor * t) {
    if (is_float_type(t->type)) {
        return true;
    }
    switch (t->type) {
        case WSP_GGML_TYPE_Q8_0:
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q4_1:
        case WSP_GGML_TYPE_Q5_0:
        case WSP_GGML_TYPE_Q5_1:
            return t->nb[0] == wsp_ggml_type_size(t->type) && t->ne[0] % wsp_ggml_blck_size(t->type) == 0;
        default: return false;
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * q    = dst->src[0];
    const wsp_ggml_tensor * k    = dst->src[1];
    const wsp_ggml_tensor * v    = dst->src[2];
    const wsp_ggml_tensor * mask = dst->src[3];
    return dst->type == WSP_GGML_TYPE_F32 && dst->nb[0] == sizeof(float) && is_float_type(q->type) && kv_type_ok(k) &&
           kv_type_ok(v) && (mask == nullptr || is_float_type(mask->type));
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const wsp_ggml_tensor * q        = dst->src[0];
    const wsp_ggml_tensor * k        = dst->src[1];
    const int64_t           n_chunks = (q->ne[1] + BLOCK_Q - 1) / BLOCK_Q * q->ne[2] * q->ne[3];
    const int by_work = tasks_for_elements(q->ne[1] * q->ne[2] * q->ne[3] * k->ne[1] * q->ne[0], n_threads, 65536);
    return (int) std::min<int64_t>(by_work, n_chunks);
}

} // namespace

const OpKernel kernel_flash_attn = { supported, n_tasks, work_size, compute };

} // namespace wsp::cpu
