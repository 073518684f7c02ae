// The rest of ggml-cpu.h as whisper.rn declares it: the cpu_has_* answers against what the kernel
// reports for this CPU (/proc/cpuinfo), NUMA detection against /sys, the CPU type traits (from_float
// and vec_dot against a double reference over the dequantized operands) and the row converters.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// the flags line of /proc/cpuinfo (empty where there is none)
std::set<std::string> cpuinfo_flags() {
    std::ifstream         in("/proc/cpuinfo");
    std::set<std::string> flags;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("flags", 0) == 0) {
            std::istringstream words(line.substr(line.find(':') + 1));
            for (std::string w; words >> w;) {
                flags.insert(w);
            }
            break;
        }
    }
    return flags;
}

#if defined(__x86_64__) || defined(__i386__)
// the kernel lists a feature only where the CPU has it and the OS saves its state
TEST(CpuFeatures, X86AnswersMatchTheKernelsFlags) {
    const std::set<std::string> flags = cpuinfo_flags();
    if (flags.empty()) {
        GTEST_SKIP() << "/proc/cpuinfo has no flags line here";
    }
    const struct {
        const char * flag;
        int (*has)(void);
    } checks[] = {
        { "pni", wsp_ggml_cpu_has_sse3 },
        { "ssse3", wsp_ggml_cpu_has_ssse3 },
        { "avx", wsp_ggml_cpu_has_avx },
        { "avx_vnni", wsp_ggml_cpu_has_avx_vnni },
        { "avx2", wsp_ggml_cpu_has_avx2 },
        { "bmi2", wsp_ggml_cpu_has_bmi2 },
        { "f16c", wsp_ggml_cpu_has_f16c },
        { "fma", wsp_ggml_cpu_has_fma },
        { "avx512f", wsp_ggml_cpu_has_avx512 },
        { "avx512vbmi", wsp_ggml_cpu_has_avx512_vbmi },
        { "avx512_vnni", wsp_ggml_cpu_has_avx512_vnni },
        { "avx512_bf16", wsp_ggml_cpu_has_avx512_bf16 },
        { "amx_int8", wsp_ggml_cpu_has_amx_int8 },
    };
    for (const auto & c : checks) {
        EXPECT_EQ(c.has(), flags.count(c.flag) ? 1 : 0) << c.flag;
    }
}

// the library was built for this machine (or an older one): what it was compiled to use is there
TEST(CpuFeatures, CompiledFeaturesAreAvailable) {
#    if defined(__AVX2__)
    EXPECT_EQ(wsp_ggml_cpu_has_avx2(), 1);
#    endif
#    if defined(__AVX512F__)
    EXPECT_EQ(wsp_ggml_cpu_has_avx512(), 1);
#    endif
#    if defined(__F16C__)
    EXPECT_EQ(wsp_ggml_cpu_has_f16c(), 1);
#    endif
#    if defined(__FMA__)
    EXPECT_EQ(wsp_ggml_cpu_has_fma(), 1);
#    endif
    EXPECT_EQ(wsp_ggml_cpu_has_sse3(), 1); // every x86-64 CPU of this century
}

TEST(CpuFeatures, OtherArchitecturesFeaturesAreOff) {
    for (int (*has)(void) :
         { wsp_ggml_cpu_has_neon, wsp_ggml_cpu_has_arm_fma, wsp_ggml_cpu_has_fp16_va, wsp_ggml_cpu_has_dotprod,
           wsp_ggml_cpu_has_matmul_int8, wsp_ggml_cpu_has_sve, wsp_ggml_cpu_has_sme, wsp_ggml_cpu_has_riscv_v,
           wsp_ggml_cpu_has_vsx, wsp_ggml_cpu_has_vxe, wsp_ggml_cpu_has_nnpa, wsp_ggml_cpu_has_wasm_simd }) {
        EXPECT_EQ(has(), 0);
    }
    EXPECT_EQ(wsp_ggml_cpu_get_sve_cnt(), 0);
    EXPECT_EQ(wsp_ggml_cpu_has_llamafile(), 0);
}
#endif

// the CPU device's feature list names exactly the features the cpu_has_* functions report
TEST(CpuFeatures, BackendFeatureListAgrees) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_cpu_reg();
    auto                   get =
        (wsp_ggml_backend_get_features_t) wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_get_features");
    ASSERT_NE(get, nullptr);
    std::set<std::string> names;
    for (const wsp_ggml_backend_feature * f = get(reg); f->name != nullptr; ++f) {
        names.insert(f->name);
    }
    EXPECT_EQ(names.count("AVX512") == 1, wsp_ggml_cpu_has_avx512() == 1);
    EXPECT_EQ(names.count("AVX_VNNI") == 1, wsp_ggml_cpu_has_avx_vnni() == 1);
    EXPECT_EQ(names.count("BMI2") == 1, wsp_ggml_cpu_has_bmi2() == 1);
    EXPECT_EQ(names.count("SSSE3") == 1, wsp_ggml_cpu_has_ssse3() == 1);
    EXPECT_EQ(names.count("ARM_FMA") == 1, wsp_ggml_cpu_has_arm_fma() == 1);
}

// /sys/devices/system/node/node0, node1, ...: more than one is a NUMA machine
int sys_numa_nodes() {
    int n = 0;
    while (std::filesystem::is_directory("/sys/devices/system/node/node" + std::to_string(n))) {
        ++n;
    }
    return n;
}

TEST(CpuNuma, InitReadsTheNodesOnceAndLogsTheStrategy) {
    LogCapture log;
    wsp_ggml_numa_init((wsp_ggml_numa_strategy) 7);
    EXPECT_TRUE(log.contains("unknown NUMA strategy 7")) << log.text();
    wsp_ggml_numa_init(WSP_GGML_NUMA_STRATEGY_DISTRIBUTE);
    EXPECT_EQ(wsp_ggml_is_numa(), sys_numa_nodes() > 1);
    EXPECT_TRUE(log.contains("strategy distribute accepted")) << log.text();
    EXPECT_TRUE(log.contains("not pinned")) << log.text();
    wsp_ggml_numa_init(WSP_GGML_NUMA_STRATEGY_ISOLATE);
    EXPECT_TRUE(log.contains("NUMA already initialized")) << log.text();
    EXPECT_TRUE(log.contains("strategy distribute)")) << log.text();
    EXPECT_EQ(wsp_ggml_is_numa(), sys_numa_nodes() > 1);
}

//
// type traits
//

std::vector<uint8_t> to_type(wsp_ggml_type t, const std::vector<float> & x) {
    std::vector<uint8_t> out(wsp_ggml_row_size(t, (int64_t) x.size()));
    if (!x.empty()) {
        wsp_ggml_get_type_traits_cpu(t)->from_float(x.data(), out.data(), (int64_t) x.size());
    }
    return out;
}

std::vector<float> dequantized(wsp_ggml_type t, const std::vector<uint8_t> & data, size_t n) {
    std::vector<float> out(n);
    if (n > 0) {
        wsp_ggml_get_type_traits(t)->to_float(data.data(), out.data(), (int64_t) n);
    }
    return out;
}

const wsp_ggml_type COMPUTED[] = { WSP_GGML_TYPE_F32,  WSP_GGML_TYPE_F16,  WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_Q4_0,
                                   WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_0 };

TEST(CpuTypeTraits, TableAsUpstream) {
    struct Want {
        wsp_ggml_type type, dot_type;
    };
    for (Want w : { Want{ WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F32 }, Want{ WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F16 },
                    Want{ WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_BF16 }, Want{ WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q8_0 },
                    Want{ WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q8_1 }, Want{ WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q8_0 },
                    Want{ WSP_GGML_TYPE_Q5_1, WSP_GGML_TYPE_Q8_1 }, Want{ WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q8_0 },
                    Want{ WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q8_K }, Want{ WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q8_K },
                    Want{ WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q8_K }, Want{ WSP_GGML_TYPE_Q5_K, WSP_GGML_TYPE_Q8_K },
                    Want{ WSP_GGML_TYPE_Q6_K, WSP_GGML_TYPE_Q8_K } }) {
        const wsp_ggml_type_traits_cpu * tr = wsp_ggml_get_type_traits_cpu(w.type);
        EXPECT_NE(tr->from_float, nullptr) << wsp_ggml_type_name(w.type);
        EXPECT_NE(tr->vec_dot, nullptr) << wsp_ggml_type_name(w.type);
        EXPECT_EQ(tr->vec_dot_type, w.dot_type) << wsp_ggml_type_name(w.type);
        EXPECT_EQ(tr->nrows, 1) << wsp_ggml_type_name(w.type);
    }
    // Q8_1 is a vec_dot_type only: a quantizer, no dot product of its own
    const wsp_ggml_type_traits_cpu * q81 = wsp_ggml_get_type_traits_cpu(WSP_GGML_TYPE_Q8_1);
    EXPECT_NE(q81->from_float, nullptr);
    EXPECT_EQ(q81->vec_dot, nullptr);
    EXPECT_EQ(q81->vec_dot_type, WSP_GGML_TYPE_Q8_1);
    // types without a CPU quantizer and dot product (an IQ4_XS weight is read through its
    // dequantizer): nothing to call
    for (wsp_ggml_type t : { WSP_GGML_TYPE_IQ4_XS, WSP_GGML_TYPE_IQ2_XXS, WSP_GGML_TYPE_I32 }) {
        EXPECT_EQ(wsp_ggml_get_type_traits_cpu(t)->from_float, nullptr) << wsp_ggml_type_name(t);
        EXPECT_EQ(wsp_ggml_get_type_traits_cpu(t)->vec_dot, nullptr) << wsp_ggml_type_name(t);
    }
    LogCapture log;
    EXPECT_EQ(wsp_ggml_get_type_traits_cpu((wsp_ggml_type) 63)->vec_dot, nullptr);
    EXPECT_TRUE(log.contains("invalid type id 63"));
}

// The K-quants' vec_dot against Q8_K rows: the double product of both dequantized, to float
// rounding (its integer sums are exact); a row that is not whole super-blocks is NaN with a message
TEST(CpuTypeTraits, KQuantDotsAgainstQ8K) {
    const int                n   = 1024;
    const std::vector<float> w   = random_values(n, 31, -0.05f, 0.05f);
    const std::vector<float> a   = random_values(n, 32, -1.0f, 1.0f);
    const auto *             q8k = wsp_ggml_get_type_traits(WSP_GGML_TYPE_Q8_K);
    std::vector<uint8_t>     y(wsp_ggml_row_size(WSP_GGML_TYPE_Q8_K, n));
    q8k->from_float_ref(a.data(), y.data(), n);
    std::vector<float> yf(n);
    q8k->to_float(y.data(), yf.data(), n);
    for (wsp_ggml_type t :
         { WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q5_K, WSP_GGML_TYPE_Q6_K }) {
        SCOPED_TRACE(wsp_ggml_type_name(t));
        const wsp_ggml_type_traits_cpu * tr = wsp_ggml_get_type_traits_cpu(t);
        ASSERT_EQ(tr->vec_dot_type, WSP_GGML_TYPE_Q8_K);
        std::vector<uint8_t> x(wsp_ggml_row_size(t, n));
        tr->from_float(w.data(), x.data(), n);
        std::vector<float> xf(n);
        wsp_ggml_get_type_traits(t)->to_float(x.data(), xf.data(), n);
        double ref = 0.0, mag = 0.0;
        for (int i = 0; i < n; ++i) {
            ref += (double) xf[i] * yf[i];
            mag += std::fabs((double) xf[i] * yf[i]);
        }
        float got = 0.0f;
        tr->vec_dot(n, &got, 0, x.data(), 0, y.data(), 0, 1);
        EXPECT_NEAR(got, ref, 1e-6 * mag);
        LogCapture log;
        tr->vec_dot(n - 32, &got, 0, x.data(), 0, y.data(), 0, 1);
        EXPECT_TRUE(std::isnan(got));
        EXPECT_TRUE(log.contains("not a multiple of the block size 256")) << log.text();
    }
}

// from_float of the quantized types is the reference quantizer (bit-exact with quantize_chunk)
TEST(CpuTypeTraits, FromFloatIsTheReferenceQuantizer) {
    const std::vector<float> x = random_values(320, 21, -2.0f, 2.0f);
    for (wsp_ggml_type t : COMPUTED) {
        std::vector<uint8_t> chunk(wsp_ggml_row_size(t, 320));
        ASSERT_EQ(wsp_ggml_quantize_chunk(t, x.data(), chunk.data(), 0, 1, 320, nullptr), chunk.size());
        EXPECT_EQ(to_type(t, x), chunk) << wsp_ggml_type_name(t);
    }
}

// vec_dot(x of the type, y of its vec_dot_type) against sum x_i y_i in double over the values the
// two operands hold (dequantized). Integer block sums are exact, so the error is the float
// accumulation over blocks, plus for Q4_1 / Q5_1 the fp16 rounding of Q8_1's s = d * sum(q).
TEST(CpuTypeTraits, VecDotAgainstDoubleReference) {
    for (wsp_ggml_type t : COMPUTED) {
        const wsp_ggml_type_traits_cpu * tr = wsp_ggml_get_type_traits_cpu(t);
        const wsp_ggml_type              dt = tr->vec_dot_type;
        const bool             is_float = t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
        const std::vector<int> sizes =
            is_float ? std::vector<int>{ 0, 1, 7, 32, 33, 257, 1000 } : std::vector<int>{ 0, 32, 96, 320, 1024 };
        for (int n : sizes) {
            const std::vector<float>   x   = random_values((size_t) n, 100 + n, -3.0f, 3.0f);
            const std::vector<float>   y   = random_values((size_t) n, 200 + n, -1.0f, 2.0f);
            const std::vector<uint8_t> qx  = to_type(t, x);
            const std::vector<uint8_t> qy  = to_type(dt, y);
            const std::vector<float>   dx  = dequantized(t, qx, (size_t) n);
            const std::vector<float>   dy  = dequantized(dt, qy, (size_t) n);
            double                     ref = 0.0, mass = 0.0, ysum = 0.0, xmax = 0.0;
            for (int i = 0; i < n; ++i) {
                ref += (double) dx[i] * dy[i];
                mass += std::fabs((double) dx[i] * dy[i]);
                ysum += std::fabs((double) dy[i]);
                xmax = std::max(xmax, std::fabs((double) dx[i]));
            }
            float s = std::numeric_limits<float>::quiet_NaN();
            tr->vec_dot(n, &s, 0, qx.data(), 0, qy.data(), 0, 1);
            double tol = 1e-6 + 4e-7 * mass;
            if (dt == WSP_GGML_TYPE_Q8_1) {
                tol += xmax * ysum * std::ldexp(1.0, -10);
            }
            EXPECT_NEAR(s, ref, tol) << wsp_ggml_type_name(t) << " n " << n;
        }
    }
}

// nrc rows at once: s[j * bs + i] = dot(x row i, y row j), rows bx / by bytes apart
TEST(CpuTypeTraits, VecDotSeveralRows) {
    const int n = 64, nrc = 2;
    for (wsp_ggml_type t : COMPUTED) {
        const wsp_ggml_type_traits_cpu * tr = wsp_ggml_get_type_traits_cpu(t);
        const std::vector<float>         x  = random_values((size_t) (n * nrc), 5, -1.0f, 1.0f);
        const std::vector<float>         y  = random_values((size_t) (n * nrc), 6, -1.0f, 1.0f);
        const std::vector<uint8_t>       qx = to_type(t, x);
        const std::vector<uint8_t>       qy = to_type(tr->vec_dot_type, y);
        const size_t                     bx = wsp_ggml_row_size(t, n), by = wsp_ggml_row_size(tr->vec_dot_type, n);
        const size_t                     bs = 5;
        std::vector<float>               s(bs * nrc, -7.0f);
        tr->vec_dot(n, s.data(), bs, qx.data(), bx, qy.data(), by, nrc);
        for (int j = 0; j < nrc; ++j) {
            for (int i = 0; i < nrc; ++i) {
                float one = 0.0f;
                tr->vec_dot(n, &one, 0, qx.data() + i * bx, 0, qy.data() + j * by, 0, 1);
                EXPECT_EQ(s[j * bs + i], one) << wsp_ggml_type_name(t) << " x row " << i << " y row " << j;
            }
        }
        EXPECT_EQ(s[2], -7.0f); // between the rows' results: untouched
    }
}

TEST(CpuTypeTraits, VecDotOfPartialBlocksIsNaNWithAMessage) {
    LogCapture                       log;
    const wsp_ggml_type_traits_cpu * tr = wsp_ggml_get_type_traits_cpu(WSP_GGML_TYPE_Q8_0);
    std::vector<uint8_t>             q(34 * 2, 0);
    float                            s = 0.0f;
    tr->vec_dot(48, &s, 0, q.data(), 0, q.data(), 0, 1);
    EXPECT_TRUE(std::isnan(s));
    EXPECT_TRUE(log.contains("n = 48 is not a multiple of the block size 32")) << log.text();
}

//
// row converters
//

TEST(CpuRowConverters, RoundToNearestEvenAndBack) {
    // ties: 1 + 2^-11 lies between fp16 1 and 1 + 2^-10 (even: 1); 1 + 3 * 2^-11 rounds up to the even 1 + 2^-9
    std::vector<float>       x    = { 1.0f + 1.0f / 2048,
                                      1.0f + 3.0f / 2048,
                                      65520.0f,
                                      -0.0f,
                                      5.96e-8f,
                                      1e-10f,
                                      std::numeric_limits<float>::infinity(),
                                      std::numeric_limits<float>::quiet_NaN() };
    const std::vector<float> more = random_values(37, 9, -100.0f, 100.0f);
    x.insert(x.end(), more.begin(), more.end());
    for (size_t n : { (size_t) 0, (size_t) 1, (size_t) 7, (size_t) 8, (size_t) 17, x.size() }) {
        std::vector<wsp_ggml_fp16_t> h(n);
        std::vector<wsp_ggml_bf16_t> b(n);
        std::vector<float>           back(n), same(n);
        wsp_ggml_cpu_fp32_to_fp16(x.data(), h.data(), (int64_t) n);
        wsp_ggml_cpu_fp32_to_bf16(x.data(), b.data(), (int64_t) n);
        wsp_ggml_cpu_fp32_to_fp32(x.data(), same.data(), (int64_t) n);
        EXPECT_TRUE(n == 0 || std::memcmp(same.data(), x.data(), n * sizeof(float)) == 0);
        for (size_t i = 0; i < n; ++i) {
            if (std::isnan(x[i])) {
                EXPECT_EQ(h[i] & 0x7c00, 0x7c00);
                EXPECT_NE(h[i] & 0x03ff, 0);
                EXPECT_EQ(b[i].bits & 0x7f80, 0x7f80);
                EXPECT_NE(b[i].bits & 0x007f, 0);
                continue;
            }
            EXPECT_EQ(h[i], ieee_fp16_bits(x[i])) << i;
            EXPECT_EQ(b[i].bits, ieee_bf16_bits(x[i])) << i;
        }
        wsp_ggml_cpu_fp16_to_fp32(h.data(), back.data(), (int64_t) n);
        for (size_t i = 0; i < n; ++i) {
            if (!std::isnan(x[i])) {
                EXPECT_EQ((double) back[i], ieee_fp16_value(h[i])) << i;
            }
        }
        wsp_ggml_cpu_bf16_to_fp32(b.data(), back.data(), (int64_t) n);
        for (size_t i = 0; i < n; ++i) {
            uint32_t bits;
            std::memcpy(&bits, &back[i], 4);
            EXPECT_EQ(bits, (uint32_t) b[i].bits << 16) << i;
        }
    }
    wsp_ggml_fp16_t h2[2];
    wsp_ggml_cpu_fp32_to_fp16(x.data(), h2, 2);
    EXPECT_EQ(h2[0], 0x3c00);
    EXPECT_EQ(h2[1], 0x3c02);
}

} // namespace
} // namespace wsp::test
