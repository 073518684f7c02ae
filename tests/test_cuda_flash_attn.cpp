// FLASH_ATTN_EXT on every CUDA device against a double-precision reference of softmax(scale q.k
// (softcapped) + slope * mask) . v and against the CPU backend: head sizes 64 to 256 and 576/512
// (V a view of K), query and key counts around the tiles and chunks, GQA, masks with -inf (fully
// masked queries, broadcast, F16/F32), ALiBi, softcap, K/V types, permuted and strided layouts,
// whisper's encoder and decoder shapes. Without a GPU every case is skipped with the reason.

#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace wsp::test {
namespace {

// Note [flash-attn tolerances]. The FMA kernel (K/V of any type, or n_q <= 8) computes in F32 from
// the stored values, like the CPU: F32 sums (relative ~1e-7) and __expf (a few ulp for the
// probabilities that matter), NMSE ~1e-13; bound 1e-10 as on the CPU. The tensor-core kernel (F16
// K/V, n_q > 8) rounds the pre-scaled queries and the probabilities to F16 (relative rms
// 2^-11 / sqrt(3) = 2.8e-4 each); scores move by ~1e-4 absolute at unit scale, and each output,
// a p-weighted mean of values, is off by ~3e-4 of its size: NMSE ~1e-7; bound 1e-6.
// Per element (|v| < 1): the FMA kernel within 2e-5 as on the CPU; the tensor-core kernel within
// 5e-3, the typical 3e-4 with room for F16 score errors (up to scale sum|q k| 2^-11 ~ 4e-3 at D 64)
// that happen to align.
constexpr double VEC_NMSE = 1e-10, VEC_MAX_ABS = 2e-5;
constexpr double MMA_NMSE = 1e-6, MMA_MAX_ABS = 5e-3;

enum class Mask { none, random, causal_blocks };
enum class Lay { contiguous, permuted, strided_d };

struct FaCase {
    int64_t       D, n_q, n_kv;
    int64_t       Dv     = 0;     // V's head size; 0: D
    bool          v_in_k = false; // V the first Dv columns of K's rows (DeepSeek's MLA cache)
    int64_t       n_head = 4, n_head_kv = 2, ne3 = 2, ne3k = 1;
    Mask          mask     = Mask::random;
    int64_t       mask_ne2 = 1, mask_ne3 = 1;
    wsp_ggml_type kv_type = WSP_GGML_TYPE_F16, mask_type = WSP_GGML_TYPE_F16;
    float         max_bias = 0.0f, softcap = 0.0f;
    Lay           layout = Lay::contiguous;
};

int64_t dv_of(const FaCase & c) {
    return c.Dv != 0 ? c.Dv : c.D;
}

std::string describe(const FaCase & c) {
    char buf[256];
    snprintf(buf, sizeof(buf),
             "D %lld/%lld%s n_q %lld n_kv %lld heads %lld/%lld ne3 %lld/%lld mask %d (%lldx%lld %s) kv %s "
             "bias %g cap %g layout %d",
             (long long) c.D, (long long) dv_of(c), c.v_in_k ? " (V in K)" : "", (long long) c.n_q, (long long) c.n_kv,
             (long long) c.n_head, (long long) c.n_head_kv, (long long) c.ne3, (long long) c.ne3k, (int) c.mask,
             (long long) c.mask_ne2, (long long) c.mask_ne3, wsp_ggml_type_name(c.mask_type),
             wsp_ggml_type_name(c.kv_type), c.max_bias, c.softcap, (int) c.layout);
    return buf;
}

// [ne0, ne1, ne2, ne3] in the case's layout: a view over an input ordered otherwise
wsp_ggml_tensor * make_qkv(Graph & g, wsp_ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, Lay l) {
    switch (l) {
        case Lay::permuted: return wsp_ggml_permute(g.ctx(), g.input(type, { ne0, ne2, ne1, ne3 }), 0, 2, 1, 3);
        case Lay::strided_d: return wsp_ggml_permute(g.ctx(), g.input(type, { ne1, ne0, ne2, ne3 }), 1, 0, 2, 3);
        default: return g.input(type, { ne0, ne1, ne2, ne3 });
    }
}

// mask rows: random (a quarter -inf, query 1 fully masked, finite biases in (-2, 0]) or causal
// with keys 64..191 masked for all (whole key tiles with nothing to attend)
std::vector<float> mask_values(const FaCase & c, int64_t n_q_pad, uint32_t seed) {
    const int64_t      rows = n_q_pad * c.mask_ne2 * c.mask_ne3;
    std::vector<float> u    = random_values((size_t) (rows * c.n_kv), seed, 0.0f, 1.0f);
    const float        inf  = std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = r % n_q_pad;
        for (int64_t j = 0; j < c.n_kv; ++j) {
            float & m = u[(size_t) (r * c.n_kv + j)];
            if (c.mask == Mask::random) {
                m = (m < 0.25f || i == 1) ? -inf : -2.0f * m;
            } else {
                m = (j > i + c.n_kv - c.n_q || (j >= 64 && j < 192)) ? -inf : 0.0f;
            }
        }
    }
    return u;
}

double slope_ref(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) {
        return 1.0;
    }
    const int64_t n2 = (int64_t) 1 << (int64_t) std::floor(std::log2((double) n_head));
    const double  m0 = std::pow(2.0, -(double) max_bias / n2), m1 = std::pow(2.0, -(double) max_bias / 2.0 / n2);
    return h < n2 ? std::pow(m0, (double) (h + 1)) : std::pow(m1, (double) (2 * (h - n2) + 1));
}

struct FaValues {
    std::vector<float> q, k, v, mask; // logical order, as the kernels read them
    int64_t            n_q_pad;
};

// out[Dv, n_head, n_q, ne3]; a query with every key masked gives zeros
std::vector<double> reference(const FaCase & c, const FaValues & x, float scale) {
    const int64_t       Dv = dv_of(c);
    std::vector<double> out((size_t) (Dv * c.n_head * c.n_q * c.ne3), 0.0);
    std::vector<double> s((size_t) c.n_kv);
    for (int64_t b = 0; b < c.ne3; ++b) {
        for (int64_t h = 0; h < c.n_head; ++h) {
            const int64_t hk = h / (c.n_head / c.n_head_kv), bk = b / (c.ne3 / c.ne3k);
            const double  slope = slope_ref(c.max_bias, h, c.n_head);
            const float * k0    = &x.k[(size_t) ((bk * c.n_head_kv + hk) * c.n_kv * c.D)];
            const float * v0    = &x.v[(size_t) ((bk * c.n_head_kv + hk) * c.n_kv * Dv)];
            for (int64_t i = 0; i < c.n_q; ++i) {
                const float * q  = &x.q[(size_t) (((b * c.n_head + h) * c.n_q + i) * c.D)];
                double        mx = -std::numeric_limits<double>::infinity();
                for (int64_t j = 0; j < c.n_kv; ++j) {
                    double dot = 0.0;
                    for (int64_t e = 0; e < c.D; ++e) {
                        dot += (double) q[e] * k0[j * c.D + e];
                    }
                    double y = scale * dot;
                    if (c.softcap != 0.0f) {
                        y = c.softcap * std::tanh(y / c.softcap);
                    }
                    if (c.mask != Mask::none) {
                        const int64_t row = ((b % c.mask_ne3) * c.mask_ne2 + h % c.mask_ne2) * x.n_q_pad + i;
                        y += slope * x.mask[(size_t) (row * c.n_kv + j)];
                    }
                    s[(size_t) j] = y;
                    mx            = std::max(mx, y);
                }
                if (mx == -std::numeric_limits<double>::infinity()) {
                    continue;
                }
                double * o   = &out[(size_t) (((b * c.n_q + i) * c.n_head + h) * Dv)];
                double   sum = 0.0;
                for (int64_t j = 0; j < c.n_kv; ++j) {
                    const double p = std::exp(s[(size_t) j] - mx);
                    sum += p;
                    for (int64_t e = 0; e < Dv; ++e) {
                        o[e] += p * v0[j * Dv + e];
                    }
                }
                for (int64_t e = 0; e < Dv; ++e) {
                    o[e] /= sum;
                }
            }
        }
    }
    return out;
}

void check(const FaCase & c, uint32_t seed) {
    SCOPED_TRACE(describe(c));
    const float       scale = 1.0f / std::sqrt((float) c.D);
    Graph             g;
    wsp_ggml_tensor * q = make_qkv(g, WSP_GGML_TYPE_F32, c.D, c.n_q, c.n_head, c.ne3, c.layout);
    wsp_ggml_tensor * k = make_qkv(g, c.kv_type, c.D, c.n_kv, c.n_head_kv, c.ne3k, c.layout);
    wsp_ggml_tensor * v =
        c.v_in_k ? wsp_ggml_view_4d(g.ctx(), k, dv_of(c), c.n_kv, c.n_head_kv, c.ne3k, k->nb[1], k->nb[2], k->nb[3], 0)
                 : make_qkv(g, c.kv_type, dv_of(c), c.n_kv, c.n_head_kv, c.ne3k, c.layout);
    FaValues x;
    x.n_q_pad              = (c.n_q + WSP_GGML_KQ_MASK_PAD - 1) / WSP_GGML_KQ_MASK_PAD * WSP_GGML_KQ_MASK_PAD;
    wsp_ggml_tensor * mask = nullptr;
    if (c.mask != Mask::none) {
        mask = g.input(c.mask_type, { c.n_kv, x.n_q_pad, c.mask_ne2, c.mask_ne3 });
    }
    wsp_ggml_tensor * out = wsp_ggml_flash_attn_ext(g.ctx(), q, k, v, mask, scale, c.max_bias, c.softcap);
    g.build(out);
    set_values(q, random_values((size_t) wsp_ggml_nelements(q), seed));
    set_values(k, random_values((size_t) wsp_ggml_nelements(k), seed + 1));
    if (!c.v_in_k) {
        set_values(v, random_values((size_t) wsp_ggml_nelements(v), seed + 2));
    }
    if (mask != nullptr) {
        set_values(mask, mask_values(c, x.n_q_pad, seed + 3));
        x.mask = get_values(mask);
    }
    x.q = get_values(q), x.k = get_values(k), x.v = get_values(v);
    const std::vector<double> ref = reference(c, x, scale);
    // the tensor-core kernel's cases (flash_attn.cu; Note [big heads])
    const bool mma = c.kv_type == WSP_GGML_TYPE_F16 && c.n_q > 8 && c.D <= 128 && dv_of(c) == c.D;
    for (int d = 0; d < wsp_ggml_backend_cuda_get_device_count(); ++d) {
        SCOPED_TRACE(WSP_GGML_CUDA_NAME + std::to_string(d));
        const std::vector<float> got = cuda_output(g, out, d);
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_LT(nmse(got, ref), mma ? MMA_NMSE : VEC_NMSE);
        // cuda_output ran the graph on the CPU backend too: out holds the CPU's result
        EXPECT_LT(nmse(got, get_values(out)), mma ? MMA_NMSE : VEC_NMSE) << "against the CPU backend";
        EXPECT_LT(max_abs_diff(got, ref), mma ? MMA_MAX_ABS : VEC_MAX_ABS);
        for (size_t i = 0; i < got.size(); ++i) {
            if (ref[i] == 0.0 && got[i] != 0.0f) {
                ADD_FAILURE() << "element " << i << " of a fully masked query is " << got[i];
                break;
            }
        }
    }
}

TEST(CudaFlashAttn, SweepShapes) {
    REQUIRE_GPU();
    for (int64_t D : { 64, 80, 128 }) {
        for (int64_t n_q : { 1, 3, 17, 64 }) {
            for (int64_t n_kv : { 1, 7, 33, 256, 300 }) {
                FaCase c{ D, n_q, n_kv };
                c.mask = n_kv > 1 ? Mask::random : Mask::none;
                check(c, (uint32_t) (D * 1000 + n_q * 10 + n_kv));
            }
        }
    }
}

TEST(CudaFlashAttn, GqaWithoutMask) {
    REQUIRE_GPU();
    for (int64_t n_q : { 2, 70 }) {
        FaCase c{ 64, n_q, 130 };
        c.mask      = Mask::none;
        c.n_head    = 8;
        c.n_head_kv = 2;
        c.ne3k      = 2;
        check(c, 3);
    }
}

TEST(CudaFlashAttn, MaskVariants) {
    REQUIRE_GPU();
    for (int64_t n_q : { 5, 17 }) {
        FaCase base{ 64, n_q, 300 };
        base.n_head = 8;
        for (int64_t ne2 : { 1, 2, 8 }) {
            FaCase c   = base;
            c.mask_ne2 = ne2;
            check(c, (uint32_t) ne2);
        }
        FaCase f32    = base;
        f32.mask_type = WSP_GGML_TYPE_F32;
        f32.mask_ne3  = 2;
        check(f32, 11);
    }
    FaCase causal{ 64, 64, 300 };
    causal.mask = Mask::causal_blocks;
    check(causal, 12);
}

TEST(CudaFlashAttn, AlibiAndSoftcap) {
    REQUIRE_GPU();
    for (int64_t n_q : { 5, 40 }) {
        for (int64_t n_head : { 8, 6 }) { // 6 heads: heads past n_head_log2 take the m1 slopes
            FaCase c{ 64, n_q, 100 };
            c.n_head   = n_head;
            c.mask_ne2 = n_head;
            c.max_bias = 8.0f;
            check(c, (uint32_t) n_head);
        }
        FaCase cap{ 80, n_q, 256 };
        cap.softcap = 1.5f; // most scores on tanh's curved part
        check(cap, 21);
        cap.max_bias = 4.0f;
        cap.softcap  = 30.0f;
        check(cap, 22);
    }
}

TEST(CudaFlashAttn, KvTypesAndLayouts) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : float_types()) {
        for (int64_t n_q : { 3, 17 }) {
            FaCase c{ 64, n_q, 77 };
            c.kv_type = t;
            check(c, 31);
        }
    }
    for (Lay l : { Lay::permuted, Lay::strided_d }) {
        for (wsp_ggml_type t : { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F32 }) {
            for (int64_t n_q : { 3, 17 }) {
                FaCase c{ 80, n_q, 100 };
                c.layout  = l;
                c.kv_type = t;
                check(c, 41);
            }
        }
    }
}

// a block-quantized K/V cache (the FMA kernel dequantizes its elements; the CPU's Note [quantized
// K/V]) at the head sizes of whole blocks the kernels have: the dequantized cache's attention, to F32
// rounding
TEST(CudaFlashAttn, QuantizedKv) {
    REQUIRE_GPU();
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1 }) {
        for (int64_t D : { 64, 128 }) {
            for (int64_t n_q : { 1, 17 }) {
                FaCase c{ D, n_q, 77 };
                c.kv_type = t;
                check(c, 61);
            }
        }
    }
    FaCase p{ 64, 3, 100 };
    p.kv_type = WSP_GGML_TYPE_Q8_0;
    p.layout  = Lay::permuted;
    check(p, 62);
}

// whisper: decoder self/cross attention steps (keys split over many CTAs and combined) and an
// encoder-sized block (two heads keep the double reference quick)
TEST(CudaFlashAttn, WhisperShapes) {
    REQUIRE_GPU();
    for (int64_t n_q : { 1, 4 }) {
        FaCase dec{ 64, n_q, 1500 };
        dec.n_head = 20, dec.n_head_kv = 20, dec.ne3 = 1;
        check(dec, 51);
    }
    FaCase enc{ 64, 1500, 1500 };
    enc.mask   = Mask::none;
    enc.n_head = 2, enc.n_head_kv = 2, enc.ne3 = 1;
    check(enc, 52);
}

// Heads above 128 take the FMA kernel at any query count (Note [big heads]) with several output
// columns a thread (Note [vec column layout]); DeepSeek's 576 / 512 reads V as the first 512
// columns of K's rows, as its MLA cache is laid out. F16 at one query (keys split into chunks and
// combined: one batch of 4 heads is 4 CTAs, fewer than the 8 that fill the host target's 4 SMs
// twice), a few (a block of 8, partly empty) and 70 (nine blocks); the other float types at 2
// queries, the block types at 3. 133 keys: a whole step of 128 and a partial one. GQA 2:1 and a
// random mask (with a fully masked query) throughout.
TEST(CudaFlashAttn, BigHeads) {
    REQUIRE_GPU();
    for (auto [D, Dv] : { std::pair<int64_t, int64_t>{ 192, 192 }, { 256, 256 }, { 576, 512 } }) {
        for (int64_t n_q : { 1, 5, 70 }) {
            FaCase c{ D, n_q, 133 };
            c.Dv  = Dv;
            c.ne3 = n_q == 1 ? 1 : 2;
            check(c, (uint32_t) (D + n_q));
        }
        for (wsp_ggml_type t : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_0,
                                 WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1 }) {
            FaCase c{ D, wsp_ggml_is_quantized(t) ? 3 : 2, 133 };
            c.Dv      = Dv;
            c.v_in_k  = Dv != D;
            c.kv_type = t;
            check(c, (uint32_t) (D + t));
        }
    }
}

// every (K, V) head size supported() accepts (flash_attn.cuh)
const std::pair<int64_t, int64_t> HEAD_SIZES[] = { { 64, 64 },   { 80, 80 },   { 96, 96 },   { 112, 112 },
                                                   { 128, 128 }, { 192, 192 }, { 256, 256 }, { 576, 512 } };

// supported() claims exactly what runs: every head size it accepts through the FMA kernel (2
// queries) and, at 9 queries, the tensor-core kernel where the head size has it (Note [big heads])
TEST(CudaFlashAttn, EveryHeadSizeRuns) {
    REQUIRE_GPU();
    for (auto [D, Dv] : HEAD_SIZES) {
        for (int64_t n_q : { 2, 9 }) {
            if (n_q == 2 && D > 128) {
                continue; // BigHeads runs these
            }
            FaCase c{ D, n_q, 19 };
            c.Dv = Dv, c.n_head = 2, c.n_head_kv = 1, c.ne3 = 1;
            check(c, (uint32_t) (D + n_q));
        }
    }
}

TEST(CudaFlashAttn, SupportedHeadSizes) {
    REQUIRE_GPU();
    wsp_ggml_backend_t   cuda = wsp_ggml_backend_cuda_init(0);
    wsp_ggml_init_params p    = { 64 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *   ctx  = wsp_ggml_init(p);
    auto                 op   = [&](int64_t D, int64_t Dv) {
        wsp_ggml_tensor * q = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, D, 5, 4);
        wsp_ggml_tensor * k = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F16, D, 9, 4);
        wsp_ggml_tensor * v = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F16, Dv, 9, 4);
        return wsp_ggml_flash_attn_ext(ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
    };
    for (auto [D, Dv] : HEAD_SIZES) {
        EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, op(D, Dv))) << D << "/" << Dv;
    }
    // no kernel for these: refused, so the scheduler keeps them on the CPU
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, op(72, 72)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, op(72, 40)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, op(512, 512)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, op(576, 576)));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, op(256, 128)));
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cuda);
}

} // namespace
} // namespace wsp::test
