// MUL_MAT on the CPU against a double-precision reference computed from the values the kernel
// reads (get_values of a and b), for every weight type x activation type, shapes with tails,
// broadcast over dims 2-3, non-contiguous operands, both paths, and 1 vs 2 threads. Each node is
// computed with 1 and then 2 threads and the two results must be bit-identical: every output's
// arithmetic is fixed by the shape (mul_mat_path.h), never by how the work is split.

#include "test_util.h"

#include "../src/cpu/mul_mat_path.h"
#include "../src/cpu/q8_act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace wsp::test {

namespace {

using wsp::cpu::mm::Path;

// Note [float bound]: a float-path output is an F32 sum of K products of exact values. Whatever
// the summation order, |error| <= (K + 2) u sum_k |a_k b_k| with u = 2^-24 (products and sums
// each round once; +2 for the final adds of blocked sums): checked per element. Statistically,
// for terms of random sign each rounding is relative to a partial sum that grows like sqrt(k),
// giving NMSE ~ K u^2 / 6 < 1e-12 for K <= 1280; we require NMSE <= 1e-10 over cases with at least
// 64 outputs (with fewer, one small reference value can dominate the ratio).
constexpr double FLOAT_NMSE           = 1e-10;
constexpr double U                    = 1.0 / (1 << 24);
constexpr size_t MIN_OUTPUTS_FOR_NMSE = 64;

enum class ALayout { contiguous, permuted, strided };
enum class BLayout { contiguous, padded_rows, permuted, transposed };

struct Case {
    wsp_ggml_type a_type, b_type;
    int64_t       K, N, M;
    int64_t       ne02 = 1, ne03 = 1, ne12 = 1, ne13 = 1;
    ALayout       a_layout = ALayout::contiguous;
    BLayout       b_layout = BLayout::contiguous;
};

std::string case_str(const Case & c) {
    char buf[200];
    snprintf(buf, sizeof(buf),
             "a %s b %s K %lld N %lld M %lld a-batch %lldx%lld b-batch %lldx%lld a-layout %d b-layout %d",
             wsp_ggml_type_name(c.a_type), wsp_ggml_type_name(c.b_type), (long long) c.K, (long long) c.N,
             (long long) c.M, (long long) c.ne02, (long long) c.ne03, (long long) c.ne12, (long long) c.ne13,
             (int) c.a_layout, (int) c.b_layout);
    return buf;
}

// the weight [K, N, ne02, ne03], stored as laid out by the case
wsp_ggml_tensor * make_a(Graph & g, const Case & c) {
    wsp_ggml_context * ctx = g.ctx();
    switch (c.a_layout) {
        case ALayout::permuted: // rows of K contiguous, N and ne02 swapped in memory (as attention's K)
            return wsp_ggml_permute(ctx, g.input(c.a_type, { c.K, c.ne02, c.N, c.ne03 }), 0, 2, 1, 3);
        case ALayout::strided: // elements ne02 apart: [ne02, K, N] seen as [K, N, ne02]
            return wsp_ggml_permute(ctx, g.input(c.a_type, { c.ne02, c.K, c.N, c.ne03 }), 2, 0, 1, 3);
        default: return g.input(c.a_type, { c.K, c.N, c.ne02, c.ne03 });
    }
}

// the activations [K, M, ne12, ne13]; *storage is the tensor that owns the memory
wsp_ggml_tensor * make_b(Graph & g, const Case & c, wsp_ggml_tensor ** storage) {
    wsp_ggml_context * ctx = g.ctx();
    switch (c.b_layout) {
        case BLayout::padded_rows: { // rows 3 elements longer than K, starting one element in
            wsp_ggml_tensor * t = g.input(c.b_type, { c.K + 3, c.M, c.ne12, c.ne13 });
            *storage            = t;
            return wsp_ggml_view_4d(ctx, t, c.K, c.M, c.ne12, c.ne13, t->nb[1], t->nb[2], t->nb[3], t->nb[0]);
        }
        case BLayout::permuted:
            *storage = g.input(c.b_type, { c.K, c.ne12, c.M, c.ne13 });
            return wsp_ggml_permute(ctx, *storage, 0, 2, 1, 3);
        case BLayout::transposed: // element stride M
            *storage = g.input(c.b_type, { c.M, c.K, c.ne12, c.ne13 });
            return wsp_ggml_transpose(ctx, *storage);
        default: *storage = g.input(c.b_type, { c.K, c.M, c.ne12, c.ne13 }); return *storage;
    }
}

// ref[i0, i1, i2, i3] in dst's logical order, and sum_k |a_k b_k| of each output
struct Reference {
    std::vector<double> value, magnitude;
};

Reference reference(const Case & c, const std::vector<float> & av, const std::vector<float> & bv) {
    const int64_t r2 = c.ne12 / c.ne02, r3 = c.ne13 / c.ne03;
    const size_t  n = (size_t) (c.N * c.M * c.ne12 * c.ne13);
    Reference     ref{ std::vector<double>(n), std::vector<double>(n) };
    for (int64_t i3 = 0; i3 < c.ne13; ++i3) {
        for (int64_t i2 = 0; i2 < c.ne12; ++i2) {
            const float * ab = av.data() + ((i3 / r3) * c.ne02 + i2 / r2) * c.N * c.K;
            const float * bb = bv.data() + (i3 * c.ne12 + i2) * c.M * c.K;
            for (int64_t i1 = 0; i1 < c.M; ++i1) {
                for (int64_t i0 = 0; i0 < c.N; ++i0) {
                    double s = 0.0, mag = 0.0;
                    for (int64_t k = 0; k < c.K; ++k) {
                        const double p = (double) ab[i0 * c.K + k] * (double) bb[i1 * c.K + k];
                        s += p;
                        mag += std::fabs(p);
                    }
                    const size_t i   = (size_t) (((i3 * c.ne12 + i2) * c.M + i1) * c.N + i0);
                    ref.value[i]     = s;
                    ref.magnitude[i] = mag;
                }
            }
        }
    }
    return ref;
}

// Note [q8 bound]: the q8 path rounds each activation x to q * d with d = amax / 127 over its
// block of 32, an error e uniform in [-d/2, d/2] (variance d^2 / 12) and never more than d/2.
// An output's error is then sum_k a_k e_k (weights are exact): at most sum_k |a_k| d_k / 2, and
// sum_k a_k^2 d_k^2 / 12 in expectation. We check the hard bound per element (plus F32 rounding
// of the accumulation, Note [float bound]) and the total error energy against twice its
// expectation (8 times when fewer than 64 outputs make the energy a noisy estimate). For values uniform in [-1, 1] this
// comes to NMSE ~ 1.6e-5 expected.
struct Q8Bound {
    std::vector<double> max_err; // per output
    double              expected_energy = 0.0;
};

Q8Bound q8_bound(const Case & c, const std::vector<float> & av, const std::vector<float> & bv) {
    const int64_t       r2 = c.ne12 / c.ne02, r3 = c.ne13 / c.ne03;
    std::vector<double> d(bv.size()); // activation step of each element's block
    for (size_t blk = 0; blk < bv.size() / 32; ++blk) {
        double amax = 0.0;
        for (size_t j = 0; j < 32; ++j) {
            amax = std::max(amax, std::fabs((double) bv[blk * 32 + j]));
        }
        for (size_t j = 0; j < 32; ++j) {
            d[blk * 32 + j] = amax / 127.0;
        }
    }
    Q8Bound q;
    q.max_err.resize((size_t) (c.N * c.M * c.ne12 * c.ne13));
    for (int64_t b = 0; b < c.ne12 * c.ne13; ++b) {
        const int64_t i2 = b % c.ne12, i3 = b / c.ne12;
        const float * ab = av.data() + ((i3 / r3) * c.ne02 + i2 / r2) * c.N * c.K;
        for (int64_t i1 = 0; i1 < c.M; ++i1) {
            const double * db = d.data() + (b * c.M + i1) * c.K;
            for (int64_t i0 = 0; i0 < c.N; ++i0) {
                double hard = 0.0, var = 0.0;
                for (int64_t k = 0; k < c.K; ++k) {
                    const double w = ab[i0 * c.K + k];
                    hard += std::fabs(w) * db[k] / 2;
                    var += w * w * db[k] * db[k] / 12;
                }
                q.max_err[(size_t) ((b * c.M + i1) * c.N + i0)] = hard;
                q.expected_energy += var;
            }
        }
    }
    return q;
}

bool is_float(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
}

std::vector<float> nan_values(const wsp_ggml_tensor * t) {
    return std::vector<float>((size_t) wsp_ggml_nelements(t), std::numeric_limits<float>::quiet_NaN());
}

// computes the case with 1 and 2 threads and checks both against the reference
void run_case(const Case & c, uint32_t seed) {
    SCOPED_TRACE(case_str(c));
    Graph             g;
    wsp_ggml_tensor * a = make_a(g, c);
    wsp_ggml_tensor * b_storage;
    wsp_ggml_tensor * b   = make_b(g, c, &b_storage);
    wsp_ggml_tensor * out = wsp_ggml_mul_mat(g.ctx(), a, b);
    g.build(out);
    if (b_storage != b && is_float(b_storage->type)) {
        set_values(b_storage, nan_values(b_storage)); // a read outside the view poisons the result
    }
    set_values(a, random_values((size_t) wsp_ggml_nelements(a), seed));
    set_values(b, random_values((size_t) wsp_ggml_nelements(b), seed + 1));
    const std::vector<float> av = get_values(a), bv = get_values(b);

    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> out1 = get_values(out);
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> out2 = get_values(out);
    ASSERT_EQ(out1.size(), out2.size());
    for (size_t i = 0; i < out1.size(); ++i) {
        ASSERT_EQ(std::memcmp(&out1[i], &out2[i], sizeof(float)), 0)
            << "1 and 2 threads differ at " << i << ": " << out1[i] << " vs " << out2[i];
    }

    const Reference ref  = reference(c, av, bv);
    const double    err  = nmse(out2, ref.value);
    const Path      path = wsp::cpu::mm::choose_path(c.a_type, c.N, c.M);
    const Q8Bound   q    = path == Path::dot_q8 ? q8_bound(c, av, bv) : Q8Bound{};
    int             bad  = 0;
    for (size_t i = 0; i < ref.value.size() && bad < 5; ++i) {
        const double bound =
            (double) (c.K + 2) * U * ref.magnitude[i] * 1.01 + (q.max_err.empty() ? 0.0 : q.max_err[i]);
        if (!(std::fabs((double) out2[i] - ref.value[i]) <= bound)) {
            ADD_FAILURE() << "output " << i << ": " << out2[i] << " vs " << ref.value[i] << " (bound " << bound << ")";
            ++bad;
        }
    }
    if (path != Path::dot_q8) {
        if (ref.value.size() >= MIN_OUTPUTS_FOR_NMSE) {
            EXPECT_LE(err, FLOAT_NMSE) << "max abs diff " << max_abs_diff(out2, ref.value);
        }
        return;
    }
    double ref_energy = 0.0;
    for (double r : ref.value) {
        ref_energy += r * r;
    }
    const double factor = ref.value.size() >= MIN_OUTPUTS_FOR_NMSE ? 2.0 : 8.0;
    EXPECT_LE(err, factor * q.expected_energy / ref_energy + FLOAT_NMSE)
        << "expected NMSE " << q.expected_energy / ref_energy;
}

// the weight types whisper uses, and Q8_1, which the CPU also accepts (through its converter)
std::vector<wsp_ggml_type> weight_types() {
    std::vector<wsp_ggml_type> t = float_types();
    for (wsp_ggml_type q : quant_types()) {
        t.push_back(q);
    }
    t.push_back(WSP_GGML_TYPE_Q8_1);
    return t;
}

uint32_t seed_of(const Case & c) {
    return (uint32_t) (c.a_type * 1000003 + c.b_type * 10007 + c.K * 101 + c.N * 13 + c.M);
}

} // namespace

// every weight type x activation type over K x N x M; the M values straddle the path thresholds
class MulMatTypes : public ::testing::TestWithParam<std::tuple<wsp_ggml_type, wsp_ggml_type>> {};

TEST_P(MulMatTypes, Shapes) {
    const auto [a_type, b_type]          = GetParam();
    const bool                 quantized = !is_float(a_type);
    const std::vector<int64_t> Ks =
        quantized ? std::vector<int64_t>{ 32, 96, 1280 } : std::vector<int64_t>{ 1, 7, 32, 33, 67, 256, 1280 };
    const std::vector<int64_t> Ns = { 1, 3, 17, 64, 130 };
    const std::vector<int64_t> Ms = { 1, 2, 5, 8, 16, 17, 100, 300 };
    std::set<Path>             paths;
    for (int64_t K : Ks) {
        for (int64_t N : Ns) {
            for (int64_t M : Ms) {
                // the large corner is covered once per type pair, at K = 256 (float) / 96 (quantized)
                if (K == 1280 && N * M > 64 * 17) {
                    continue;
                }
                const Case c = { a_type, b_type, K, N, M };
                paths.insert(wsp::cpu::mm::choose_path(a_type, N, M));
                run_case(c, seed_of(c));
                if (HasFatalFailure()) {
                    return;
                }
            }
        }
    }
    EXPECT_TRUE(paths.count(Path::gemm)) << "no shape took the GEMM path";
    const Path dot = wsp::cpu::mm::uses_q8_activations(a_type) ? Path::dot_q8 : Path::dot_float;
    EXPECT_TRUE(paths.count(dot)) << "no shape took the dot path";
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MulMatTypes,
                         ::testing::Combine(::testing::ValuesIn(weight_types()), ::testing::ValuesIn(float_types())),
                         [](const auto & info) {
                             return std::string(wsp_ggml_type_name(std::get<0>(info.param))) + "_" +
                                    wsp_ggml_type_name(std::get<1>(info.param));
                         });

// broadcast over dims 2-3 and non-contiguous operands, on both paths, for every weight type
TEST(MulMat, BroadcastAndLayouts) {
    const std::vector<BLayout> b_layouts = { BLayout::contiguous, BLayout::padded_rows, BLayout::permuted,
                                             BLayout::transposed };
    for (wsp_ggml_type a_type : weight_types()) {
        const bool           quantized = !is_float(a_type);
        const int64_t        K         = quantized ? 96 : 67;
        std::vector<ALayout> a_layouts = { ALayout::contiguous, ALayout::permuted };
        if (!quantized) {
            a_layouts.push_back(ALayout::strided);
        }
        for (ALayout al : a_layouts) {
            for (BLayout bl : b_layouts) {
                for (int64_t M : { 5, 80 }) { // dot path, GEMM path (above every type's threshold)
                    const wsp_ggml_type b_type = bl == BLayout::permuted ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32;
                    Case                c      = { a_type, b_type, K, 67, M, 2, 1, 6, 2, al, bl };
                    run_case(c, seed_of(c) + (uint32_t) al * 7 + (uint32_t) bl);
                    if (HasFatalFailure()) {
                        return;
                    }
                }
            }
        }
    }
}

// the encoder-like corner where every level of the GEMM blocking is used: two K blocks of
// several slices, several weight blocks, edge panels in both directions, F16 activations
TEST(MulMat, LargeBlocked) {
    for (wsp_ggml_type a_type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_Q4_0 }) {
        const Case c = { a_type, WSP_GGML_TYPE_F16, 1312, 300, 131 };
        run_case(c, seed_of(c));
    }
}

// the two paths of a quantized weight: 8-bit activations below the threshold, exact above
TEST(MulMat, QuantizedPaths) {
    for (wsp_ggml_type a_type : quant_types()) {
        double        errs[2];
        int           i         = 0;
        const int64_t threshold = wsp::cpu::mm::gemm_min_rows(a_type);
        for (int64_t M : { threshold - 1, threshold }) {
            const Case c = { a_type, WSP_GGML_TYPE_F32, 256, 64, M };
            SCOPED_TRACE(case_str(c));
            Graph             g;
            wsp_ggml_tensor * a   = g.input(a_type, { c.K, c.N });
            wsp_ggml_tensor * b   = g.input(c.b_type, { c.K, c.M });
            wsp_ggml_tensor * out = wsp_ggml_mul_mat(g.ctx(), a, b);
            g.build(out);
            set_values(a, random_values((size_t) (c.K * c.N), 11));
            set_values(b, random_values((size_t) (c.K * c.M), 12));
            ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
            errs[i++] = nmse(get_values(out), reference(c, get_values(a), get_values(b)).value);
        }
        // 8-bit activations cost ~1e-5 (Note [q8 bound]); the GEMM is exact to F32 rounding
        EXPECT_GT(errs[0], 1e-7) << wsp_ggml_type_name(a_type);
        EXPECT_LT(errs[0], 1e-4) << wsp_ggml_type_name(a_type);
        EXPECT_LT(errs[1], FLOAT_NMSE) << wsp_ggml_type_name(a_type);
    }
}

// Note [numerics by M] (mul_mat_path.h): a slice of the weight's rows, as a split buffer gives
// each device, is computed as the whole computes those rows. Below the GEMM threshold both take
// the same dot kernel, bit for bit; above it the slice may take the other exact F32 path. The
// slice starts mid-tile (n0 = 10), and a K with a scalar tail (67) checks Note [tail rounding].
TEST(MulMat, RowSliceKeepsNumerics) {
    struct Form {
        wsp_ggml_type type;
        int64_t       K;
    };
    for (Form f : { Form{ WSP_GGML_TYPE_F16, 256 }, Form{ WSP_GGML_TYPE_F16, 67 }, Form{ WSP_GGML_TYPE_F32, 67 },
                    Form{ WSP_GGML_TYPE_Q4_0, 256 }, Form{ WSP_GGML_TYPE_Q8_0, 256 } }) {
        const wsp_ggml_type a_type = f.type;
        const int64_t       K = f.K, N = 100, n0 = 10, n1 = 40;
        for (int64_t M : { (int64_t) 1, (int64_t) 3, wsp::cpu::mm::gemm_min_rows(a_type) }) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(a_type)) + " K " + std::to_string(K) + " M " +
                         std::to_string(M));
            Graph             g;
            wsp_ggml_tensor * a     = g.input(a_type, { K, N });
            wsp_ggml_tensor * slice = wsp_ggml_view_2d(g.ctx(), a, K, n1 - n0, a->nb[1], (size_t) n0 * a->nb[1]);
            wsp_ggml_tensor * b     = g.input(WSP_GGML_TYPE_F32, { K, M });
            wsp_ggml_tensor * whole = wsp_ggml_mul_mat(g.ctx(), a, b);
            wsp_ggml_tensor * part  = wsp_ggml_mul_mat(g.ctx(), slice, b);
            g.build(whole, { part });
            set_values(a, random_values((size_t) (K * N), 21));
            set_values(b, random_values((size_t) (K * M), 22));
            ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
            const std::vector<float> w = get_values(whole), p = get_values(part);
            std::vector<float>       rows; // the slice's rows out of the whole result
            for (int64_t i1 = 0; i1 < M; ++i1) {
                rows.insert(rows.end(), w.begin() + i1 * N + n0, w.begin() + i1 * N + n1);
            }
            const bool same_path =
                wsp::cpu::mm::choose_path(a_type, N, M) == wsp::cpu::mm::choose_path(a_type, n1 - n0, M);
            if (same_path) {
                EXPECT_EQ(std::memcmp(rows.data(), p.data(), p.size() * sizeof(float)), 0);
            } else {
                EXPECT_LE(nmse(p, rows), FLOAT_NMSE);
            }
        }
    }
}

// Note [heads in one row] (mul_mat_dot.cpp): attention's K as a view whose heads lie within one row of
// the cache is read row-major over all heads; each output must be exactly what the same weight made
// contiguous (read head after head) gives, and within the float bound of the reference
TEST(MulMat, HeadsInOneRowEqualHeadAfterHeadBitForBit) {
    for (wsp_ggml_type a_type : float_types()) {
        for (int64_t K : { (int64_t) 64, (int64_t) 67,
                           (int64_t) 600 }) { // whisper's head; a tail; rows the contiguous side reads as two streams
            const Case c = { a_type, WSP_GGML_TYPE_F32, K, 150, 1, 6, 1, 6, 1, ALayout::permuted };
            run_case(c, seed_of(c));
            SCOPED_TRACE(case_str(c));
            Graph             g;
            wsp_ggml_tensor * a    = make_a(g, c);
            wsp_ggml_tensor * cont = wsp_ggml_cont(g.ctx(), a);
            wsp_ggml_tensor * b    = g.input(WSP_GGML_TYPE_F32, { K, 1, 6 });
            wsp_ggml_tensor * rows = wsp_ggml_mul_mat(g.ctx(), a, b);
            wsp_ggml_tensor * head = wsp_ggml_mul_mat(g.ctx(), cont, b);
            g.build(rows, { head });
            set_values(a, random_values((size_t) wsp_ggml_nelements(a), 41));
            set_values(b, random_values((size_t) (K * 6), 42));
            ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
            const std::vector<float> r = get_values(rows), h = get_values(head);
            ASSERT_EQ(r.size(), (size_t) (150 * 6));
            EXPECT_EQ(std::memcmp(r.data(), h.data(), r.size() * sizeof(float)), 0);
        }
    }
}

// Note [Q8_0 pairs] (mul_mat_q8_pairs.cpp): one b row takes the paired AVX-512 kernel where there is
// one, which must give exactly what the general tile gives that row in a batch of two
TEST(MulMat, OneRowQ8_0EqualsTheTileBitForBit) {
    for (int64_t K : { (int64_t) 64, (int64_t) 96, (int64_t) 1280 }) { // 2, 3 (odd) and 40 blocks
        SCOPED_TRACE("K " + std::to_string(K));
        const int64_t     N = 37;
        Graph             g;
        wsp_ggml_tensor * a   = g.input(WSP_GGML_TYPE_Q8_0, { K, N });
        wsp_ggml_tensor * b2  = g.input(WSP_GGML_TYPE_F32, { K, 2 });
        wsp_ggml_tensor * b1  = wsp_ggml_view_2d(g.ctx(), b2, K, 1, b2->nb[1], 0);
        wsp_ggml_tensor * two = wsp_ggml_mul_mat(g.ctx(), a, b2);
        wsp_ggml_tensor * one = wsp_ggml_mul_mat(g.ctx(), a, b1);
        g.build(two, { one });
        set_values(a, random_values((size_t) (K * N), 31));
        set_values(b2, random_values((size_t) (K * 2), 32));
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        const std::vector<float> t = get_values(two), o = get_values(one);
        ASSERT_EQ(o.size(), (size_t) N);
        EXPECT_EQ(std::memcmp(t.data(), o.data(), (size_t) N * sizeof(float)), 0);
    }
}

// Note [activation quantization] (mul_mat_q8.cpp): the vector loop gives every block exactly what
// the definition in q8_act.h gives: d = amax / 127, q = x / d rounded to nearest even, s = d * sum(q);
// random blocks, an all-zero block, and blocks whose x / d fall on halves (the ties)
TEST(MulMat, ActivationBlocksFollowTheDefinitionBitForBit) {
    constexpr int      QK = wsp::cpu::mm::QK8;
    std::vector<float> x  = random_values(64 * QK, 41);
    for (int j = 0; j < QK; ++j) {
        x[(size_t) (8 * QK + j)]  = 0.0f;                                          // block 8: all zero
        x[(size_t) (9 * QK + j)]  = j == 0 ? 127.0f : (float) (j - 16) + 0.5f;     // block 9: d = 1, ties
        x[(size_t) (10 * QK + j)] = j == 5 ? -254.0f : (float) (2 * (j - 16) + 1); // block 10: d = 2, ties
    }
    std::vector<wsp::cpu::mm::BlockQ8> y(64);
    wsp::cpu::mm::quantize_row_q8(x.data(), y.data(), (int64_t) x.size());
    for (int ib = 0; ib < 64; ++ib) {
        SCOPED_TRACE("block " + std::to_string(ib));
        const float * xb   = x.data() + ib * QK;
        float         amax = 0.0f;
        for (int j = 0; j < QK; ++j) {
            amax = std::max(amax, std::fabs(xb[j]));
        }
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int         sum = 0;
        for (int j = 0; j < QK; ++j) {
            const int q = (int) std::nearbyint(xb[j] * id);
            ASSERT_EQ(y[(size_t) ib].qs[j], q) << "element " << j;
            sum += q;
        }
        EXPECT_EQ(y[(size_t) ib].d, d);
        EXPECT_EQ(y[(size_t) ib].s, d * (float) sum);
    }
    // the ties went to even
    EXPECT_EQ(y[9].qs[1], -14);  // -14.5
    EXPECT_EQ(y[9].qs[2], -14);  // -13.5
    EXPECT_EQ(y[10].qs[0], -16); // -31 / 2
}

// Note [nibble pairs] (mul_mat_q8_pairs.cpp): the 4- and 5-bit weights take the paired AVX-512 kernels
// up to some M where there are some, in which every b row sums as it would alone: each row of
// such a batch comes out bit for bit as that row alone (elsewhere they agree to float rounding)
TEST(MulMat, NibbleTypesRowsOfABatchEqualEachRowAlone) {
    for (wsp_ggml_type type : { WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1 }) {
        for (int64_t K : { (int64_t) 64, (int64_t) 96, (int64_t) 160, (int64_t) 1280 }) { // 2, 3, 5, 40 blocks
            // the most rows the paired kernels take (Q4_0 / Q5_0 8: two tiles of 4, Q4_1 / Q5_1
            // 4) and one fewer (a last tile of 3)
            const int64_t most = wsp::cpu::mm::paired_max_rows(type, K);
            for (int64_t M : { most, most - 1 }) {
                SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " K " + std::to_string(K) + " M " +
                             std::to_string(M));
                const int64_t                  N = 37;
                Graph                          g;
                wsp_ggml_tensor *              a   = g.input(type, { K, N });
                wsp_ggml_tensor *              b   = g.input(WSP_GGML_TYPE_F32, { K, M });
                wsp_ggml_tensor *              all = wsp_ggml_mul_mat(g.ctx(), a, b);
                std::vector<wsp_ggml_tensor *> one;
                for (int64_t m = 0; m < M; ++m) {
                    one.push_back(
                        wsp_ggml_mul_mat(g.ctx(), a, wsp_ggml_view_2d(g.ctx(), b, K, 1, b->nb[1], m * b->nb[1])));
                }
                g.build(all, one);
                set_values(a, random_values((size_t) (K * N), 41));
                set_values(b, random_values((size_t) (K * M), 42));
                ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                const std::vector<float> got = get_values(all);
                for (int64_t m = 0; m < M; ++m) {
                    const std::vector<float> row(got.begin() + m * N, got.begin() + (m + 1) * N);
                    const std::vector<float> alone = get_values(one[(size_t) m]);
#if defined(__AVX512VBMI__) && defined(__AVX512VNNI__)
                    EXPECT_EQ(std::memcmp(row.data(), alone.data(), (size_t) N * sizeof(float)), 0) << "row " << m;
#else
                    EXPECT_LE(nmse(alone, row), 1e-11) << "row " << m;
#endif
                }
            }
        }
    }
}

// what the backend reports matches what the kernel computes
TEST(MulMat, SupportsOp) {
    Graph              g;
    wsp_ggml_backend_t be = g.backend();
    for (wsp_ggml_type a_type : weight_types()) {
        for (wsp_ggml_type b_type : float_types()) {
            wsp_ggml_tensor * a = g.input(a_type, { 64, 4 });
            wsp_ggml_tensor * b = g.input(b_type, { 64, 3 });
            EXPECT_TRUE(wsp_ggml_backend_supports_op(be, wsp_ggml_mul_mat(g.ctx(), a, b)))
                << wsp_ggml_type_name(a_type) << " x " << wsp_ggml_type_name(b_type);
        }
    }
    // integer activations are not something the kernel reads
    wsp_ggml_tensor * a = g.input(WSP_GGML_TYPE_F32, { 64, 4 });
    wsp_ggml_tensor * b = g.input(WSP_GGML_TYPE_Q8_0, { 64, 3 });
    EXPECT_FALSE(wsp_ggml_backend_supports_op(be, wsp_ggml_mul_mat(g.ctx(), a, b)));
}

} // namespace wsp::test
