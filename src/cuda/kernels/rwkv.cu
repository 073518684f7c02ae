// RWKV_WKV6, RWKV_WKV7 and GATED_LINEAR_ATTN (F32, contiguous, head size S <= 64). One block per
// (sequence, head) pair, one thread per state column (wkv6, gla: the value index j) or row
// (wkv7: the value index i), so each thread owns its slice of the S x S state in shared memory
// and only the token's vectors are shared (staged per token between two barriers). The
// recurrences are those of the CPU kernels (src/cpu/rwkv.cpp, Notes [wkv6 recurrence],
// [wkv7 recurrence], [gla recurrence]); dst = y [n_tokens][H][S] then the states [seq][H][S][S].

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

constexpr int64_t MAX_HEAD = 64;

// the pair's geometry: block b is (sequence b / H, head b % H); blockDim.x == S
struct Pair {
    int64_t S, H, per_seq, seq, head;
    int64_t state_off; // of the pair's S x S block, in the input state and in dst's state part
    int64_t y_states;  // where dst's state part begins (n_tokens * S * H)

    __device__ int64_t token(int64_t t) const { return ((seq * per_seq + t) * H + head) * S; }
};

struct RecArgs {
    const float * in[6]; // the per-token operands, in the builder's order (tf / nothing after them)
    const float * tf;    // wkv6's bonus [S, H]
    const float * state;
    float *       dst;
    int64_t       S, H, n_tokens, n_seqs;
    float         scale;
};

__device__ __forceinline__ Pair pair_of(const RecArgs & a) {
    Pair p;
    p.S         = a.S;
    p.H         = a.H;
    p.per_seq   = a.n_tokens / a.n_seqs;
    p.seq       = blockIdx.x / a.H;
    p.head      = blockIdx.x % a.H;
    p.state_off = (int64_t) blockIdx.x * a.S * a.S;
    p.y_states  = a.n_tokens * a.S * a.H;
    return p;
}

// k v r td (tf): thread j keeps column j of S (key i, value j), stride S: no bank conflicts
__global__ void wkv6_kernel(RecArgs a) {
    WSP_DYNAMIC_SHARED(float, sh);
    const Pair    p = pair_of(a);
    const int64_t S = p.S, j = threadIdx.x;
    float *       st = sh;         // S * S
    float *       ks = st + S * S; // S each: k, r, td of the token, tf of the head
    float *       rs = ks + S;
    float *       ws = rs + S;
    float *       us = ws + S;
    us[j]            = a.tf[p.head * S + j];
    for (int64_t i = 0; i < S; ++i) {
        st[i * S + j] = a.state[p.state_off + i * S + j];
    }
    for (int64_t t = 0; t < p.per_seq; ++t) {
        const int64_t o = p.token(t);
        __syncthreads(); // the previous token's reads of ks, rs, ws are done
        ks[j] = a.in[0][o + j];
        rs[j] = a.in[2][o + j];
        ws[j] = a.in[3][o + j];
        __syncthreads();
        const float vj = a.in[1][o + j];
        float       y  = 0.0f;
        for (int64_t i = 0; i < S; ++i) {
            const float kv = ks[i] * vj;
            const float e  = st[i * S + j];
            y += rs[i] * (us[i] * kv + e);
            st[i * S + j] = e * ws[i] + kv;
        }
        a.dst[o + j] = y;
    }
    for (int64_t i = 0; i < S; ++i) {
        a.dst[p.y_states + p.state_off + i * S + j] = st[i * S + j];
    }
}

// r w k v a b: thread i keeps row i of S (value i, key j), padded to S + 1 against bank conflicts
__global__ void wkv7_kernel(RecArgs a) {
    WSP_DYNAMIC_SHARED(float, sh);
    const Pair    p = pair_of(a);
    const int64_t S = p.S, i = threadIdx.x, P = S + 1;
    float *       row = sh + i * P;
    float *       vec = sh + S * P; // r w k a b of the token, S each
    float *       rs = vec, *ws = vec + S, *ks = vec + 2 * S, *as = vec + 3 * S, *bs = vec + 4 * S;
    for (int64_t j = 0; j < S; ++j) {
        row[j] = a.state[p.state_off + i * S + j];
    }
    for (int64_t t = 0; t < p.per_seq; ++t) {
        const int64_t o = p.token(t);
        __syncthreads();
        rs[i] = a.in[0][o + i];
        ws[i] = a.in[1][o + i];
        ks[i] = a.in[2][o + i];
        as[i] = a.in[4][o + i];
        bs[i] = a.in[5][o + i];
        __syncthreads();
        const float vi = a.in[3][o + i];
        float       sa = 0.0f;
        for (int64_t j = 0; j < S; ++j) {
            sa += row[j] * as[j];
        }
        float y = 0.0f;
        for (int64_t j = 0; j < S; ++j) {
            const float e = row[j] * ws[j] + vi * ks[j] + sa * bs[j];
            row[j]        = e;
            y += e * rs[j];
        }
        a.dst[o + i] = y;
    }
    for (int64_t j = 0; j < S; ++j) {
        a.dst[p.y_states + p.state_off + i * S + j] = row[j];
    }
}

// k v q g: thread j keeps column j of S (key i, value j)
__global__ void gla_kernel(RecArgs a) {
    WSP_DYNAMIC_SHARED(float, sh);
    const Pair    p = pair_of(a);
    const int64_t S = p.S, j = threadIdx.x;
    float *       st = sh;
    float *       ks = st + S * S, *qs = ks + S, *gs = qs + S;
    for (int64_t i = 0; i < S; ++i) {
        st[i * S + j] = a.state[p.state_off + i * S + j];
    }
    for (int64_t t = 0; t < p.per_seq; ++t) {
        const int64_t o = p.token(t);
        __syncthreads();
        ks[j] = a.in[0][o + j];
        qs[j] = a.in[2][o + j] * a.scale;
        gs[j] = a.in[3][o + j];
        __syncthreads();
        const float vj = a.in[1][o + j];
        float       y  = 0.0f;
        for (int64_t i = 0; i < S; ++i) {
            const float e = st[i * S + j] * gs[i] + ks[i] * vj;
            st[i * S + j] = e;
            y += qs[i] * e;
        }
        a.dst[o + j] = y;
    }
    for (int64_t i = 0; i < S; ++i) {
        a.dst[p.y_states + p.state_off + i * S + j] = st[i * S + j];
    }
}

// the per-token operands of the node and its state, by op
int n_token_operands(const wsp_ggml_tensor * t) {
    return t->op == WSP_GGML_OP_RWKV_WKV7 ? 6 : 4;
}

const wsp_ggml_tensor * state_of(const wsp_ggml_tensor * t) {
    return t->src[t->op == WSP_GGML_OP_RWKV_WKV7 ? 6 : t->op == WSP_GGML_OP_RWKV_WKV6 ? 5 : 4];
}

const wsp_ggml_tensor * key_of(const wsp_ggml_tensor * t) {
    return t->src[t->op == WSP_GGML_OP_RWKV_WKV7 ? 2 : 0];
}

bool supported(const wsp_ggml_tensor * t) {
    if (t->type != WSP_GGML_TYPE_F32 || !wsp_ggml_is_contiguous(t)) {
        return false;
    }
    for (const wsp_ggml_tensor * s : t->src) {
        if (s != nullptr && (s->type != WSP_GGML_TYPE_F32 || !wsp_ggml_is_contiguous(s))) {
            return false;
        }
    }
    const int64_t S = key_of(t)->ne[0];
    return S >= 1 && S <= MAX_HEAD && state_of(t)->ne[1] * key_of(t)->ne[1] <= INT32_MAX;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * k = key_of(t);
    RecArgs                 a{};
    // the per-token operands in the order the kernels index them: wkv6 k v r td (tf is src[3]),
    // wkv7 r w k v a b, gla k v q g
    const int n = n_token_operands(t);
    for (int i = 0, s = 0; i < n; ++i, ++s) {
        if (t->op == WSP_GGML_OP_RWKV_WKV6 && s == 3) {
            ++s; // skip tf
        }
        a.in[i] = static_cast<const float *>(t->src[s]->data);
    }
    a.tf       = t->op == WSP_GGML_OP_RWKV_WKV6 ? static_cast<const float *>(t->src[3]->data) : nullptr;
    a.state    = static_cast<const float *>(state_of(t)->data);
    a.dst      = static_cast<float *>(t->data);
    a.S        = k->ne[0];
    a.H        = k->ne[1];
    a.n_tokens = k->ne[2];
    a.n_seqs   = state_of(t)->ne[1];
    std::memcpy(&a.scale, &t->op_params[0], sizeof(float));
    const unsigned blocks = (unsigned) (a.n_seqs * a.H);
    if (blocks == 0) {
        return true;
    }
    const dim3 block((unsigned) a.S);
    switch (t->op) {
        case WSP_GGML_OP_RWKV_WKV6:
            gpu::launch(wkv6_kernel, blocks, block, (size_t) (a.S * a.S + 4 * a.S) * sizeof(float), ctx.stream, a);
            break;
        case WSP_GGML_OP_RWKV_WKV7:
            gpu::launch(wkv7_kernel, blocks, block, (size_t) (a.S * (a.S + 1) + 5 * a.S) * sizeof(float), ctx.stream,
                        a);
            break;
        default:
            gpu::launch(gla_kernel, blocks, block, (size_t) (a.S * a.S + 3 * a.S) * sizeof(float), ctx.stream, a);
            break;
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_rwkv() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
