// FLASH_ATTN_EXT: out[Dv, n_head, n_q, ne3] = softmax(scale q.k (softcapped) + slope * mask) . v,
// per (query, head), K/V broadcast over heads (GQA) and batches. Long F16 runs with heads up to 128
// take the tensor-core kernel (flash_attn_mma.cu), the rest the FMA kernel (flash_attn_vec.cu).
// When the query blocks cannot fill the device the keys are split into chunks and a combine kernel
// merges them.

#include "flash_attn.cuh"
#include "kernels.cuh"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace wsp::cuda {

namespace {

using fa::Params;

// up to this many queries the FMA kernel (a whole CTA on at most 8 queries) beats 64-row tiles
constexpr int64_t VEC_MAX_Q = 8;

float op_param_f32(const wsp_ggml_tensor * t, int i) {
    float v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}

bool aligned16(const wsp_ggml_tensor * t) {
    return reinterpret_cast<uintptr_t>(t->data) % 16 == 0 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 &&
           t->nb[3] % 16 == 0;
}

Params make_params(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
    Params                 p{};
    p.q    = static_cast<const char *>(q->data);
    p.k    = static_cast<const char *>(k->data);
    p.v    = static_cast<const char *>(v->data);
    p.mask = mask != nullptr ? static_cast<const char *>(mask->data) : nullptr;
    p.dst  = static_cast<char *>(t->data);
    for (int i = 0; i < 4; ++i) {
        p.q_nb[i]    = (int64_t) q->nb[i];
        p.k_nb[i]    = (int64_t) k->nb[i];
        p.v_nb[i]    = (int64_t) v->nb[i];
        p.mask_nb[i] = mask != nullptr ? (int64_t) mask->nb[i] : 0;
        p.dst_nb[i]  = (int64_t) t->nb[i];
    }
    p.q_type      = (int) q->type;
    p.kv_type     = (int) k->type;
    p.mask_type   = mask != nullptr ? (int) mask->type : (int) WSP_GGML_TYPE_F32;
    p.n_q         = (int) q->ne[1];
    p.n_kv        = (int) k->ne[1];
    p.n_head      = (int) q->ne[2];
    p.ne3         = (int) q->ne[3];
    p.mask_ne2    = mask != nullptr ? (int) mask->ne[2] : 1;
    p.mask_ne3    = mask != nullptr ? (int) mask->ne[3] : 1;
    p.head_ratio  = (int) (q->ne[2] / k->ne[2]);
    p.batch_ratio = (int) (q->ne[3] / k->ne[3]);

    const float scale = op_param_f32(t, 0), max_bias = op_param_f32(t, 1);
    p.softcap = op_param_f32(t, 2);
    p.qscale  = p.softcap != 0.0f ? scale / p.softcap : scale;
    // ALiBi: the CPU's bases m0 = 2^(-max_bias / n_head_log2), m1 = 2^(-max_bias / 2 / n_head_log2)
    p.alibi       = max_bias > 0.0f;
    p.n_head_log2 = 1 << (int) std::floor(std::log2((double) q->ne[2]));
    p.log2_m0     = -max_bias / (float) p.n_head_log2;
    p.log2_m1     = -(max_bias / 2.0f) / (float) p.n_head_log2;
    p.kv_vec      = k->type == WSP_GGML_TYPE_F16 && k->nb[0] == 2 && v->nb[0] == 2 && aligned16(k) && aligned16(v);
    p.kv_quant    = is_block_quant(k->type);
    return p;
}

// Split-KV: enough chunks that CTAs cover every SM twice, each chunk at least min_tiles tiles
void plan_chunks(Params & p, int64_t ctas, int tile, int min_tiles, int sm_count) {
    const int64_t n_tiles = std::max<int64_t>(1, ((int64_t) p.n_kv + tile - 1) / tile);
    const int64_t want    = (2 * (int64_t) sm_count + ctas - 1) / ctas;
    const int64_t chunks  = std::max<int64_t>(1, std::min({ want, n_tiles / min_tiles, (int64_t) 65535 }));
    const int64_t tiles   = (n_tiles + chunks - 1) / chunks;
    p.chunk_keys          = (int) (tiles * tile);
    p.n_chunks            = (int) ((n_tiles + tiles - 1) / tiles);
}

__global__ void combine_kernel(const Params p, const int dv, const int64_t n_rows) {
    for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
        float m = -INFINITY;
        for (int c = 0; c < p.n_chunks; ++c) {
            m = fmaxf(m, p.part_ml[c * n_rows + r].x);
        }
        const int iq = (int) (r % p.n_q), h = (int) ((r / p.n_q) % p.n_head),
                  b = (int) (r / ((int64_t) p.n_q * p.n_head));
        float * out = fa::dst_row(p, iq, h, b);
        for (int i = threadIdx.x; i < dv; i += blockDim.x) {
            if (m == -INFINITY) {
                out[i] = 0.0f; // every key of every chunk masked
                continue;
            }
            float o = 0.0f, l = 0.0f;
            for (int c = 0; c < p.n_chunks; ++c) {
                const float2 ml = p.part_ml[c * n_rows + r];
                const float  w  = expf(ml.x - m); // 0 for chunks with no attended key
                o += w * p.part_o[(c * n_rows + r) * dv + i];
                l += w * ml.y;
            }
            out[i] = __fdividef(o, l); // l >= 1: the max chunk adds its own l >= 1 with weight 1
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor *q = t->src[0], *k = t->src[1], *v = t->src[2], *mask = t->src[3];
    // K and V of one float type, or of one block type with rows of whole blocks (the vector kernel
    // dequantizes their elements: the CPU's Note [quantized K/V])
    const bool kv_ok =
        k->type == v->type && (is_float_type(k->type) ||
                               (is_block_quant(k->type) && k->nb[0] == wsp_ggml_type_size(k->type) &&
                                v->nb[0] == wsp_ggml_type_size(v->type) && k->ne[0] % QK == 0 && v->ne[0] % QK == 0));
    return t->type == WSP_GGML_TYPE_F32 && t->nb[0] == sizeof(float) && is_float_type(q->type) && kv_ok &&
           (mask == nullptr || is_float_type(mask->type)) && fa::head_sizes_supported(q->ne[0], v->ne[0]) &&
           q->ne[2] <= 65535 && q->ne[1] <= INT32_MAX && k->ne[1] <= INT32_MAX &&
           q->ne[1] * q->ne[2] * q->ne[3] <= INT32_MAX;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    Params       p  = make_params(t);
    const int    dk = (int) t->src[0]->ne[0], dv = (int) t->src[2]->ne[0];
    const auto & dev = devices()[(size_t) ctx.index];
    const bool   mma = t->src[1]->type == WSP_GGML_TYPE_F16 && p.n_q > VEC_MAX_Q && dev.cc_major >= 8 &&
                     fa::MMA_AVAILABLE && fa::mma_head_sizes(dk, dv);
    int nq = (int) fa::MMA_BLOCK_Q;
    if (!mma) {
        nq = p.n_q <= 1 ? 1 : p.n_q <= 2 ? 2 : p.n_q <= 4 ? 4 : 8;
    }
    const int64_t n_qblocks = (p.n_q + nq - 1) / nq;
    const int64_t n_rows    = (int64_t) p.n_q * p.n_head * p.ne3;
    if (n_qblocks * p.ne3 > INT32_MAX) {
        WSP_LOG_ERROR("flash_attn_ext: %lld query blocks exceed the grid\n", (long long) (n_qblocks * p.ne3));
        return false;
    }
    plan_chunks(p, n_qblocks * p.n_head * p.ne3, mma ? fa::MMA_BLOCK_K : fa::VEC_BLOCK_K, mma ? 2 : 1, dev.sm_count);

    Scratch parts(ctx.scratch(), ctx.stream,
                  p.n_chunks > 1 ? (size_t) p.n_chunks * (size_t) n_rows * (size_t) (dv + 2) * sizeof(float) : 0);
    if (!parts) {
        return false;
    }
    if (p.n_chunks > 1) {
        p.part_o  = static_cast<float *>(parts.get());
        p.part_ml = reinterpret_cast<float2 *>(p.part_o + (size_t) p.n_chunks * n_rows * dv); // dv even: 8-aligned
    }
    const bool ok = mma ? fa::launch_mma(p, dk, (int) n_qblocks, ctx.stream, ctx.physical)
                        : fa::launch_vec(p, dk, dv, nq, (int) n_qblocks, ctx.stream, ctx.physical);
    if (!ok || p.n_chunks == 1) {
        return ok;
    }
    const int64_t blocks = std::min<int64_t>(n_rows, 65535);
    gpu::launch(combine_kernel, (unsigned) blocks, 128, 0, ctx.stream, p, dv, n_rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_flash_attn_ext() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
