// RWKV_WKV6, RWKV_WKV7 and GATED_LINEAR_ATTN (F32, contiguous as the builders require). Each
// (sequence, head) pair is one independent recurrence over its tokens; the pairs are split over
// the tasks. A pair's S x S state lives in its block of dst's state part: it is copied there from
// the input state, updated token by token in place, and is the final state when the pair ends.
// Layouts: per-token operands [S, H, n_tokens]; dst [S * H, n_tokens + S * n_seqs] = y then states.

#include "ops.h"

namespace wsp::cpu {

namespace {

// One (sequence, head) pair: its geometry and its state block in dst.
struct Pair {
    int64_t S, H, n_tokens, n_seqs, per_seq; // per_seq: tokens of each sequence
    int64_t seq, head;
    float * state; // S * S values in dst's state part
};

// the pair p = seq * H + head, its state block in dst set to the input state
Pair begin_pair(const wsp_ggml_tensor * dst, const wsp_ggml_tensor * k, const wsp_ggml_tensor * state_in, int64_t p) {
    Pair pr;
    pr.S                 = k->ne[0];
    pr.H                 = k->ne[1];
    pr.n_tokens          = k->ne[2];
    pr.n_seqs            = state_in->ne[1];
    pr.per_seq           = pr.n_tokens / pr.n_seqs;
    pr.seq               = p / pr.H;
    pr.head              = p % pr.H;
    float *       states = static_cast<float *>(dst->data) + pr.n_tokens * pr.S * pr.H;
    const int64_t off    = (pr.seq * pr.H + pr.head) * pr.S * pr.S;
    pr.state             = states + off;
    const float * src    = static_cast<const float *>(state_in->data) + off;
    for (int64_t i = 0; i < pr.S * pr.S; ++i) {
        pr.state[i] = src[i];
    }
    return pr;
}

// offset of (token t of the pair's sequence, the pair's head) in a [S, H, n_tokens] operand, and in y
inline int64_t token_offset(const Pair & pr, int64_t t) {
    return ((pr.seq * pr.per_seq + t) * pr.H + pr.head) * pr.S;
}

inline const float * f32(const wsp_ggml_tensor * t) {
    return static_cast<const float *>(t->data);
}

// Note [wkv6 recurrence]: with the key index i and the value index j, per token
//   y_j = sum_i r_i (tf_i k_i v_j + S_ij),   then   S_ij = S_ij td_i + k_i v_j
// (td is the decay itself, already exp(-exp(w)) in the model's graph).
void wkv6_pair(const wsp_ggml_tensor * dst, int64_t p) {
    const wsp_ggml_tensor *k = dst->src[0], *v = dst->src[1], *r = dst->src[2], *tf = dst->src[3], *td = dst->src[4];
    const Pair             pr = begin_pair(dst, k, dst->src[5], p);
    const int64_t          S  = pr.S;
    float *                y  = static_cast<float *>(dst->data);
    const float *          u  = f32(tf) + pr.head * S;
    for (int64_t t = 0; t < pr.per_seq; ++t) {
        const int64_t o  = token_offset(pr, t);
        const float * kt = f32(k) + o, *vt = f32(v) + o, *rt = f32(r) + o, *wt = f32(td) + o;
        float *       yt = y + o;
        for (int64_t j = 0; j < S; ++j) {
            yt[j] = 0.0f;
        }
        for (int64_t i = 0; i < S; ++i) {
            float *     row = pr.state + i * S;
            const float ki = kt[i], ri = rt[i], ui = u[i], wi = wt[i];
            for (int64_t j = 0; j < S; ++j) {
                const float kv = ki * vt[j];
                yt[j] += ri * (ui * kv + row[j]);
                row[j] = row[j] * wi + kv;
            }
        }
    }
}

// Note [wkv7 recurrence]: with the value index i (the state's row) and the key index j, per token
//   S_ij = S_ij w_j + v_i k_j + (sum_l S_il a_l) b_j,   then   y_i = sum_j S_ij r_j
// (the new state; w is the decay itself, a and b the in-context learning vectors).
void wkv7_pair(const wsp_ggml_tensor * dst, int64_t p) {
    const wsp_ggml_tensor *r = dst->src[0], *w = dst->src[1], *k = dst->src[2], *v = dst->src[3], *a = dst->src[4],
                          *b = dst->src[5];
    const Pair    pr         = begin_pair(dst, k, dst->src[6], p);
    const int64_t S          = pr.S;
    float *       y          = static_cast<float *>(dst->data);
    for (int64_t t = 0; t < pr.per_seq; ++t) {
        const int64_t o  = token_offset(pr, t);
        const float * rt = f32(r) + o, *wt = f32(w) + o, *kt = f32(k) + o, *vt = f32(v) + o, *at = f32(a) + o,
                    *bt = f32(b) + o;
        for (int64_t i = 0; i < S; ++i) {
            float * row = pr.state + i * S;
            float   sa  = 0.0f;
            for (int64_t j = 0; j < S; ++j) {
                sa += row[j] * at[j];
            }
            const float vi  = vt[i];
            float       out = 0.0f;
            for (int64_t j = 0; j < S; ++j) {
                row[j] = row[j] * wt[j] + vi * kt[j] + sa * bt[j];
                out += row[j] * rt[j];
            }
            y[o + i] = out;
        }
    }
}

// Note [gla recurrence]: with the key index i and the value index j, per token
//   S_ij = S_ij g_i + k_i v_j,   then   y_j = scale * sum_i q_i S_ij
// (g is the gate as given, already a multiplicative decay).
void gla_pair(const wsp_ggml_tensor * dst, int64_t p) {
    const wsp_ggml_tensor *k = dst->src[0], *v = dst->src[1], *q = dst->src[2], *g = dst->src[3];
    const Pair             pr    = begin_pair(dst, k, dst->src[4], p);
    const int64_t          S     = pr.S;
    const float            scale = get_op_param_f32(dst, 0);
    float *                y     = static_cast<float *>(dst->data);
    for (int64_t t = 0; t < pr.per_seq; ++t) {
        const int64_t o  = token_offset(pr, t);
        const float * kt = f32(k) + o, *vt = f32(v) + o, *qt = f32(q) + o, *gt = f32(g) + o;
        float *       yt = y + o;
        for (int64_t j = 0; j < S; ++j) {
            yt[j] = 0.0f;
        }
        for (int64_t i = 0; i < S; ++i) {
            float *     row = pr.state + i * S;
            const float ki = kt[i], qi = qt[i] * scale, gi = gt[i];
            for (int64_t j = 0; j < S; ++j) {
                row[j] = row[j] * gi + ki * vt[j];
                yt[j] += qi * row[j];
            }
        }
    }
}

// (sequence, head) pairs of the node: the state's sequences times k's heads
int64_t n_pairs(const wsp_ggml_tensor * dst) {
    const bool              wkv7  = dst->op == WSP_GGML_OP_RWKV_WKV7;
    const wsp_ggml_tensor * k     = wkv7 ? dst->src[2] : dst->src[0];
    const wsp_ggml_tensor * state = dst->src[wkv7 ? 6 : dst->op == WSP_GGML_OP_RWKV_WKV6 ? 5 : 4];
    return state->ne[1] * k->ne[1];
}

template <void (*PairFn)(const wsp_ggml_tensor *, int64_t)>
void compute_pairs(const ComputeParams & p, wsp_ggml_tensor * dst) {
    int64_t p0, p1;
    split_range(n_pairs(dst), p.ith, p.nth, p0, p1);
    for (int64_t pair = p0; pair < p1; ++pair) {
        PairFn(dst, pair);
    }
}

bool supported(const wsp_ggml_tensor * dst) {
    if (dst->type != WSP_GGML_TYPE_F32 || !wsp_ggml_is_contiguous(dst)) {
        return false;
    }
    for (const wsp_ggml_tensor * s : dst->src) {
        if (s != nullptr && (s->type != WSP_GGML_TYPE_F32 || !wsp_ggml_is_contiguous(s))) {
            return false;
        }
    }
    return true;
}

int pair_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const int64_t pairs   = n_pairs(dst);
    const int64_t S       = dst->src[dst->op == WSP_GGML_OP_RWKV_WKV7 ? 2 : 0]->ne[0];
    const int64_t work    = wsp_ggml_nelements(dst) * S; // multiply-adds, about
    const int     by_size = tasks_for_elements(work, n_threads, 8192);
    return (int) (pairs < by_size ? (pairs < 1 ? 1 : pairs) : by_size);
}

} // namespace

const OpKernel kernel_rwkv_wkv6         = { supported, pair_tasks, nullptr, compute_pairs<wkv6_pair> };
const OpKernel kernel_rwkv_wkv7         = { supported, pair_tasks, nullptr, compute_pairs<wkv7_pair> };
const OpKernel kernel_gated_linear_attn = { supported, pair_tasks, nullptr, compute_pairs<gla_pair> };

} // namespace wsp::cpu
