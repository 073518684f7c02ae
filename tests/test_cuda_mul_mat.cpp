// MUL_MAT with quantized weights on every CUDA device against double-precision references built
// from the values the kernels read: every block type, activation types and layouts, row counts on
// both sides of the dot/GEMM threshold, tails, broadcast over dims 2-3, strided weight rows, and
// the GEMM path cut into several slabs. Without a GPU every case is skipped with the reason.

#include "cuda_util.h"
#include "test_util.h"

#include "../src/cpu/mul_mat_path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

namespace wsp::test {
namespace {

// Note [mmq tolerances]. The CUDA paths (src/cuda/kernels/mul_mat_q.cuh, Note [mmq paths]):
// - dot (M <= 8): activations quantized to 8 bits exactly as the reference below does
//   (bit-identical integers and scales), then F32 sums of per-quarter-block terms. Against the
//   reference on those 8-bit values only F32 rounding remains: at most 4 roundings per quarter
//   block plus 32 in the warp's reduction, each within 2^-24 of a partial sum bounded by
//   S8 = 2 sum_blocks max|w| sum|xq| (a block's offset term is at most its largest |w|); NMSE
//   ~1e-13 expected, bound 1e-10. Against the exact product the 8-bit rounding adds at most
//   amax_block / 254 per activation (per element: sum |w| amax / 254) and NMSE ~1/(4 127^2) =
//   1.6e-5 for uniform data: bound 5e-5.
// - GEMM (M > 8): weights dequantized then rounded to F16, activations rounded to F16 (exact for
//   F16/BF16 inputs in range), F32 accumulation: per element |err| <= (2^-10 + K 2^-23) sum|w x|
//   (plus K 2^-23 for values in F16's subnormal range).
//   Each F16 rounding is a relative error of rms 2^-11 / sqrt(3) = 2.8e-4, so a product is off by
//   ~4e-4 rms and NMSE ~1.6e-7: bound 1e-6.
// The per-element bounds hold for every output; the NMSE bounds are statistical and apply from
// 64 outputs on (with fewer, one small reference value can dominate the ratio).
constexpr double DOT_VS_Q8_NMSE       = 1e-10;
constexpr double DOT_VS_EXACT_NMSE    = 5e-5;
constexpr double GEMM_NMSE            = 1e-6;
constexpr size_t MIN_OUTPUTS_FOR_NMSE = 64;

// the CUDA backend's dot/GEMM threshold, with its environment override (mul_mat_q.cu)
int64_t cuda_dot_max_rows() {
    const char *    env = std::getenv("WSP_GGML_CUDA_MMQ_DOT_MAX_ROWS");
    const long long v   = env != nullptr ? std::atoll(env) : 0;
    return v > 0 ? (int64_t) v : 8;
}

struct MmCase {
    wsp_ggml_type w_type, x_type;
    int64_t       K, N, M;
    int64_t       a2 = 1, a3 = 1, b2 = 1, b3 = 1;
    Layout        x_layout  = Layout::Contiguous;
    bool          strided_w = false; // weight rows inside longer rows, one block in
};

std::string describe(const MmCase & c) {
    char buf[200];
    snprintf(buf, sizeof(buf), "w %s x %s K %lld N %lld M %lld a %lldx%lld b %lldx%lld x-layout %s%s",
             wsp_ggml_type_name(c.w_type), wsp_ggml_type_name(c.x_type), (long long) c.K, (long long) c.N,
             (long long) c.M, (long long) c.a2, (long long) c.a3, (long long) c.b2, (long long) c.b3,
             layout_name(c.x_layout), c.strided_w ? " strided-w" : "");
    return buf;
}

// an activation row as the dot kernel sees it: per block of 32, d = amax / 127 and q =
// round-to-even(x / d) in float arithmetic (the CPU's and the kernel's), kept as the exact d * q,
// with each block's amax
void q8_row(const float * x, int64_t K, double * xq, float * amax) {
    for (int64_t b = 0; b < K / 32; ++b) {
        float a = 0.0f;
        for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
            a = std::fmax(a, std::fabs(x[j]));
        }
        const float d  = a / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
            xq[j] = (double) d * (double) std::nearbyint(x[j] * id);
        }
        amax[b] = a;
    }
}

// per output: the exact product, the product with 8-bit activations, and the scales of the
// per-element bounds (Note [mmq tolerances])
struct Ref {
    std::vector<double> exact, q8;
    std::vector<double> abs_exact; // sum |w x|
    std::vector<double> q8_gap;    // sum |w| amax / 254: how far 8-bit activations can move it
    std::vector<double> s8;        // 2 sum_blocks max|w| sum|xq|
};

struct Dot {
    double exact = 0, q8 = 0, abs_exact = 0, q8_gap = 0, s8 = 0;
};

Dot dot_row(const float * w, const float * x, const double * xq, const float * amax, int64_t K) {
    Dot r;
    for (int64_t b = 0; b < K / 32; ++b) {
        double wmax = 0.0, xq_abs = 0.0, w_abs = 0.0;
        for (int64_t j = 32 * b; j < 32 * b + 32; ++j) {
            r.exact += (double) w[j] * x[j];
            r.q8 += (double) w[j] * xq[j];
            r.abs_exact += std::fabs((double) w[j] * x[j]);
            wmax = std::max(wmax, (double) std::fabs(w[j]));
            w_abs += std::fabs(w[j]);
            xq_abs += std::fabs(xq[j]);
        }
        r.q8_gap += w_abs * amax[b] / 254.0 * 1.001; // 1.001: x / d itself rounds before the integer
        r.s8 += 2.0 * wmax * xq_abs;
    }
    return r;
}

// dst[N, M, b2, b3] = sum_k w[k, n, i2 / r2, i3 / r3] * x[k, i1, i2, i3]
Ref reference(const MmCase & c, const std::vector<float> & w, const std::vector<float> & x) {
    const size_t n_out = (size_t) (c.N * c.M * c.b2 * c.b3);
    Ref          ref;
    for (std::vector<double> * v : { &ref.exact, &ref.q8, &ref.abs_exact, &ref.q8_gap, &ref.s8 }) {
        v->resize(n_out);
    }
    std::vector<double> xq(x.size());
    std::vector<float>  amax(x.size() / 32);
    for (size_t r = 0; r < x.size() / (size_t) c.K; ++r) {
        q8_row(&x[r * (size_t) c.K], c.K, &xq[r * (size_t) c.K], &amax[r * (size_t) (c.K / 32)]);
    }
    const int64_t r2 = c.b2 / c.a2, r3 = c.b3 / c.a3;
    for (int64_t i3 = 0; i3 < c.b3; ++i3) {
        for (int64_t i2 = 0; i2 < c.b2; ++i2) {
            for (int64_t i1 = 0; i1 < c.M; ++i1) {
                const size_t xr = (size_t) ((i3 * c.b2 + i2) * c.M + i1);
                for (int64_t n = 0; n < c.N; ++n) {
                    const float * wr = &w[(size_t) ((((i3 / r3) * c.a2 + i2 / r2) * c.N + n) * c.K)];
                    const Dot     d  = dot_row(wr, &x[xr * c.K], &xq[xr * c.K], &amax[xr * (c.K / 32)], c.K);
                    const size_t  o  = xr * (size_t) c.N + (size_t) n;
                    ref.exact[o] = d.exact, ref.q8[o] = d.q8, ref.abs_exact[o] = d.abs_exact;
                    ref.q8_gap[o] = d.q8_gap, ref.s8[o] = d.s8;
                }
            }
        }
    }
    return ref;
}

// |got - ref| <= bound for every element; the first mismatches are printed
void expect_within(const std::vector<float> & got, const std::vector<double> & ref, const std::vector<double> & bound,
                   const char * what) {
    int                n_bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!(std::fabs((double) got[i] - ref[i]) <= bound[i])) {
            if (n_bad < 8) {
                first << "\n  [" << i << "] got " << got[i] << ", expected " << ref[i] << " +- " << bound[i];
            }
            ++n_bad;
        }
    }
    EXPECT_EQ(n_bad, 0) << what << ": " << n_bad << " of " << got.size() << " outputs out of bounds" << first.str();
}

wsp_ggml_tensor * make_weight(Graph & g, const MmCase & c) {
    if (!c.strided_w) {
        return g.input(c.w_type, { c.K, c.N, c.a2, c.a3 });
    }
    wsp_ggml_tensor * base = g.input(c.w_type, { c.K + 64, c.N, c.a2, c.a3 });
    return wsp_ggml_view_4d(g.ctx(), base, c.K, c.N, c.a2, c.a3, base->nb[1], base->nb[2], base->nb[3],
                            wsp_ggml_row_size(c.w_type, 32));
}

void check(const MmCase & c, uint32_t seed) {
    SCOPED_TRACE(describe(c));
    Graph             g;
    wsp_ggml_tensor * w = make_weight(g, c);
    wsp_ggml_tensor * x = make_operand(g, c.x_type, { c.K, c.M, c.b2, c.b3 }, c.x_layout);
    wsp_ggml_tensor * y = wsp_ggml_mul_mat(g.ctx(), w, x);
    g.build(y);
    ASSERT_GT(fill_inputs(g, seed), 0);
    const Ref ref = reference(c, get_values(w), get_values(x));
    // the types read element by element (mul_mat_q.cu): the K-quants, IQ4_NL/XS, TQ1_0/TQ2_0
    const bool          kq   = wsp_ggml_blck_size(c.w_type) == 256 || c.w_type == WSP_GGML_TYPE_IQ4_NL;
    const bool          dot  = kq ? c.M <= 8 : c.M <= cuda_dot_max_rows();
    const bool          many = ref.exact.size() >= MIN_OUTPUTS_FOR_NMSE;
    const double        u    = std::ldexp(1.0, -24);
    const int64_t       nblk = c.K / 32;
    std::vector<double> bound(ref.exact.size());
    for (int d = 0; d < wsp_ggml_backend_cuda_get_device_count(); ++d) {
        SCOPED_TRACE(WSP_GGML_CUDA_NAME + std::to_string(d));
        const std::vector<float> got = cuda_output(g, y, d);
        ASSERT_EQ(got.size(), ref.exact.size());
        if (dot && kq) {
            // Note [K-quant dot]: exact weights and activations, F32 sums (K / 32 terms a lane, then
            // the 32 lanes' reduction)
            const double rounding = (double) (c.K / 32 + 32) * u;
            for (size_t i = 0; i < bound.size(); ++i) {
                bound[i] = rounding * ref.abs_exact[i];
            }
            expect_within(got, ref.exact, bound, "K-quant dot path vs exact");
            if (many) {
                EXPECT_LT(nmse(got, ref.exact), DOT_VS_Q8_NMSE);
            }
        } else if (dot) {
            const double rounding = (double) (4 * 4 * nblk + 32) * u;
            for (size_t i = 0; i < bound.size(); ++i) {
                bound[i] = rounding * ref.s8[i];
            }
            expect_within(got, ref.q8, bound, "dot path vs 8-bit activations");
            for (size_t i = 0; i < bound.size(); ++i) {
                bound[i] += ref.q8_gap[i];
            }
            expect_within(got, ref.exact, bound, "dot path vs exact");
            if (many) {
                EXPECT_LT(nmse(got, ref.q8), DOT_VS_Q8_NMSE);
                EXPECT_LT(nmse(got, ref.exact), DOT_VS_EXACT_NMSE);
            }
        } else {
            // F16 subnormals round absolutely (2^-25): K 2^-23 covers them for |w|, |x| <= ~1
            const double rel = std::ldexp(1.0, -10) + (double) c.K * std::ldexp(1.0, -23);
            for (size_t i = 0; i < bound.size(); ++i) {
                bound[i] = rel * ref.abs_exact[i] + (double) c.K * std::ldexp(1.0, -23);
            }
            expect_within(got, ref.exact, bound, "GEMM path vs exact");
            if (many) {
                EXPECT_LT(nmse(got, ref.exact), GEMM_NMSE);
            }
        }
    }
}

TEST(CudaMulMatQ, SweepTypesRowsAndDepths) {
    REQUIRE_GPU();
    uint32_t seed = 1;
    for (wsp_ggml_type t : quant_types()) {
        for (int64_t M : { 1, 2, 5, 8, 9, 64, 300 }) {
            for (int64_t K : { 32, 96, 1280 }) {
                check({ t, WSP_GGML_TYPE_F32, K, 37, M }, seed++);
            }
        }
    }
}

TEST(CudaMulMatQ, OddRowCountsAndActivationTypes) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : quant_types()) {
        for (wsp_ggml_type xt : float_types()) {
            for (int64_t N : { 1, 2, 7, 129 }) {
                for (int64_t M : { 3, 8, 17 }) {
                    check({ t, xt, 96, N, M }, (uint32_t) (N * 100 + M));
                }
            }
        }
    }
}

// a broadcast over dims 2-3 (r2 = 2, r3 = 3), strided weight rows, permuted and padded activations
TEST(CudaMulMatQ, BroadcastAndLayouts) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : quant_types()) {
        for (int64_t M : { 1, 6, 8, 9, 40 }) {
            for (Layout l : { Layout::Contiguous, Layout::Permuted, Layout::Strided }) {
                MmCase c{ t, l == Layout::Permuted ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32, 64, 19, M };
                c.a2 = 2, c.a3 = 1, c.b2 = 4, c.b3 = 3;
                c.x_layout  = l;
                c.strided_w = l == Layout::Strided;
                check(c, (uint32_t) (M * 7 + (int) l));
            }
        }
    }
}

// K-quant weights (and IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, read the same way): the dot kernel of exact
// values up to 8 rows, the F16 GEMM past them; depths of one and five super-blocks, a broadcast
// with F16 permuted activations, strided weight rows
TEST(CudaMulMatQ, KQuantWeights) {
    REQUIRE_GPU();
    uint32_t seed = 71;
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q5_K, WSP_GGML_TYPE_Q6_K }) {
        for (int64_t M : { 1, 3, 8, 9, 70 }) {
            for (int64_t K : { 256, 1280 }) {
                check({ t, WSP_GGML_TYPE_F32, K, 37, M }, seed++);
            }
        }
        for (int64_t M : { 5, 20 }) {
            MmCase c{ t, WSP_GGML_TYPE_F16, 256, 19, M };
            c.a2 = 2, c.b2 = 4, c.b3 = 3;
            c.x_layout = Layout::Permuted;
            check(c, seed++);
        }
    }
    // the same kernels read them element by element: each path once (the grid i-quants from random
    // blocks, where the build read the client's codebooks)
    for (wsp_ggml_type t : { WSP_GGML_TYPE_IQ4_NL, WSP_GGML_TYPE_IQ4_XS, WSP_GGML_TYPE_TQ1_0, WSP_GGML_TYPE_TQ2_0,
                             WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ2_S, WSP_GGML_TYPE_IQ3_XXS,
                             WSP_GGML_TYPE_IQ3_S, WSP_GGML_TYPE_IQ1_S, WSP_GGML_TYPE_IQ1_M }) {
        if (wsp_ggml_get_type_traits(t)->to_float == nullptr) {
            continue; // CudaMulMatQ.SupportsQuantizedWeights checks the refusal
        }
        for (int64_t M : { 1, 9 }) {
            check({ t, WSP_GGML_TYPE_F32, 512, 37, M }, seed++);
        }
    }
}

// a scratch budget of 64 weight rows: the GEMM path runs 4 slabs, the last one short
TEST(CudaMulMatQ, GemmInSlabs) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : { WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q8_0 }) {
        MmCase c{ t, WSP_GGML_TYPE_F32, 128, 200, 33 };
        c.a2 = 2, c.b2 = 2;
        const std::string budget = std::to_string(64 * c.K * c.a2 * 2);
        setenv("WSP_GGML_CUDA_DEQUANT_BUDGET", budget.c_str(), 1);
        check(c, 5);
        unsetenv("WSP_GGML_CUDA_DEQUANT_BUDGET");
    }
}

// a whisper-like step (quantized projection + bias) against the CPU backend: where both sides
// quantize the activations to 8 bits they agree to F32 rounding; elsewhere the CPU is exact or
// 8-bit and CUDA is F16 (Note [mmq tolerances])
TEST(CudaMulMatQ, MatchesCpuBackend) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : quant_types()) {
        for (int64_t M : { 1, 4, 9, 300 }) {
            const bool   cpu_q8  = cpu::mm::choose_path(t, 96, M) == cpu::mm::Path::dot_q8;
            const bool   cuda_q8 = M <= cuda_dot_max_rows();
            const double tol = cpu_q8 && cuda_q8 ? DOT_VS_Q8_NMSE : cpu_q8 || cuda_q8 ? DOT_VS_EXACT_NMSE : GEMM_NMSE;
            SCOPED_TRACE(std::string(wsp_ggml_type_name(t)) + " M " + std::to_string(M));
            compare_with_cpu(
                [t, M](wsp_ggml_context * ctx) {
                    wsp_ggml_tensor * w    = wsp_ggml_new_tensor_2d(ctx, t, 256, 96);
                    wsp_ggml_tensor * x    = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 256, M, 2);
                    wsp_ggml_tensor * bias = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 96);
                    wsp_ggml_set_input(w);
                    wsp_ggml_set_input(x);
                    wsp_ggml_set_input(bias);
                    return wsp_ggml_add(ctx, wsp_ggml_mul_mat(ctx, w, x), bias);
                },
                tol);
        }
    }
}

TEST(CudaMulMatQ, SupportsQuantizedWeights) {
    REQUIRE_GPU();
    wsp_ggml_backend_t   cuda = wsp_ggml_backend_cuda_init(0);
    wsp_ggml_init_params p    = { 64 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *   ctx  = wsp_ggml_init(p);
    for (wsp_ggml_type t : quant_types()) {
        wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(ctx, t, 64, 5);
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 64, 3);
        EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, wsp_ggml_mul_mat(ctx, w, x))) << wsp_ggml_type_name(t);
    }
    // the grid i-quants have a kernel exactly where the build read the client's codebooks (as the
    // CPU's to_float); elsewhere they are refused, not miscomputed
    for (wsp_ggml_type t : { WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ2_S, WSP_GGML_TYPE_IQ3_XXS,
                             WSP_GGML_TYPE_IQ3_S, WSP_GGML_TYPE_IQ1_S, WSP_GGML_TYPE_IQ1_M }) {
        wsp_ggml_tensor * k = wsp_ggml_new_tensor_2d(ctx, t, 256, 5);
        wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 256, 3);
        EXPECT_EQ(wsp_ggml_backend_supports_op(cuda, wsp_ggml_mul_mat(ctx, k, x)),
                  wsp_ggml_get_type_traits(t)->to_float != nullptr)
            << wsp_ggml_type_name(t);
    }
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cuda);
}

} // namespace
} // namespace wsp::test
