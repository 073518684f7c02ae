// The host target's cuBLAS subset (src/host_target/cublas.h) through its CUDA names: GEMMs against
// a double-accumulation reference for the combinations the backend uses, the compute types'
// rounding, every validation rule, the workspace and peer checks. The machine has 4 devices.

#include "core/fp16.h"
#include "host_target/cublas.h"
#include "host_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace wsp::test::host;

// ---- GEMM reference

// a matrix as stored (column-major, leading dimension ld) in one of the three element types
struct Matrix {
    cudaDataType_t        type;
    int                   rows, cols, ld;
    std::vector<uint16_t> half; // F16 or BF16 bits
    std::vector<float>    f32;

    Matrix(cudaDataType_t t, int r, int c, int ld_, std::mt19937 & rng, float scale = 1.0f)
        : type(t), rows(r), cols(c), ld(ld_) {
        std::uniform_real_distribution<float> u(-scale, scale);
        const size_t                          n = (size_t) ld * (size_t) std::max(c, 1);
        (t == CUDA_R_32F ? f32.resize(n) : half.resize(n));
        for (size_t i = 0; i < n; ++i) {
            set(i, u(rng));
        }
    }
    void set(size_t i, float v) {
        if (type == CUDA_R_32F) {
            f32[i] = v;
        } else {
            half[i] = type == CUDA_R_16F ? wsp::fp32_to_fp16(v) : wsp::fp32_to_bf16(v);
        }
    }
    float at(int r, int c) const {
        const size_t i = (size_t) r + (size_t) c * (size_t) ld;
        return type == CUDA_R_32F   ? f32[i]
               : type == CUDA_R_16F ? wsp::fp16_to_fp32(half[i])
                                    : wsp::bf16_to_fp32(half[i]);
    }
    size_t       bytes() const { return type == CUDA_R_32F ? f32.size() * 4 : half.size() * 2; }
    const void * data() const { return type == CUDA_R_32F ? (const void *) f32.data() : (const void *) half.data(); }
};

float tf32(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u = (u + 0x0fffu + ((u >> 13) & 1u)) & ~0x1fffu;
    std::memcpy(&x, &u, 4);
    return x;
}

struct Reference {
    std::vector<double> value, bound; // bound: sum of |alpha a b| + |beta c|, for the tolerance
};

// C = alpha op(A) op(B) + beta C in double (inputs optionally rounded to TF32)
Reference reference(bool ta, bool tb, int m, int n, int k, float alpha, const Matrix & A, const Matrix & B, float beta,
                    const std::vector<float> & C, int ldc, bool round_tf32 = false) {
    Reference ref;
    ref.value.assign((size_t) ldc * n, 0.0);
    ref.bound.assign((size_t) ldc * n, 0.0);
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
            double s = 0, b = 0;
            for (int l = 0; l < k; ++l) {
                float a = ta ? A.at(l, i) : A.at(i, l);
                float v = tb ? B.at(j, l) : B.at(l, j);
                if (round_tf32) {
                    a = tf32(a);
                    v = tf32(v);
                }
                s += (double) a * v;
                b += std::fabs((double) a * v);
            }
            const size_t at = (size_t) i + (size_t) j * ldc;
            const double c  = beta != 0.0f ? (double) beta * C[at] : 0.0;
            ref.value[at]   = alpha * s + c;
            ref.bound[at]   = std::fabs(alpha) * b + std::fabs(c);
        }
    }
    return ref;
}

// |got - ref| <= eps * (k + 4) * bound, eps of float accumulation, plus the output's rounding
void expect_near(const std::vector<float> & got, const Reference & ref, int m, int n, int ldc, int k, double out_eps,
                 const char * what) {
    int bad = 0;
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
            const size_t at = (size_t) i + (size_t) j * ldc;
            const double tol =
                std::ldexp(1.0, -24) * (k + 4) * ref.bound[at] + out_eps * std::fabs(ref.value[at]) + 1e-30;
            if (!(std::fabs(got[at] - ref.value[at]) <= tol) && bad++ < 5) {
                ADD_FAILURE() << what << ": C(" << i << ", " << j << ") = " << got[at] << ", reference "
                              << ref.value[at] << " (tolerance " << tol << ")";
            }
        }
    }
    EXPECT_EQ(bad, 0) << what;
}

std::vector<float> to_floats(cudaDataType_t t, const std::vector<uint16_t> & h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) {
        f[i] = t == CUDA_R_16F ? wsp::fp16_to_fp32(h[i]) : wsp::bf16_to_fp32(h[i]);
    }
    return f;
}

class HostBlas : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(machine_configured);
        ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
        stream_ = make_stream(0);
        ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cublasSetStream(handle_, stream_), CUBLAS_STATUS_SUCCESS);
    }
    void TearDown() override {
        if (handle_ != nullptr) {
            EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS);
        }
        EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        destroy_stream(stream_);
    }

    // one GemmEx on device 0 against the reference; C is F32 unless c_type says otherwise
    void check_gemm(bool ta, bool tb, int m, int n, int k, cudaDataType_t ab, cublasComputeType_t compute, float alpha,
                    float beta, int pad, cudaDataType_t c_type = CUDA_R_32F) {
        std::mt19937       rng(1234 + m * 7 + n * 13 + k * 17 + (int) ab);
        const int          lda = std::max(1, (ta ? k : m) + pad), ldb = std::max(1, (tb ? n : k) + pad);
        const int          ldc = std::max(1, m + pad);
        const Matrix       A(ab, ta ? k : m, ta ? m : k, lda, rng), B(ab, tb ? n : k, tb ? k : n, ldb, rng);
        Matrix             C0(c_type, m, n, ldc, rng);
        std::vector<float> c_before((size_t) ldc * std::max(n, 1));
        for (int j = 0; j < std::max(n, 1); ++j) {
            for (int i = 0; i < ldc; ++i) {
                c_before[(size_t) i + (size_t) j * ldc] = C0.at(i, j);
            }
        }
        DeviceBuffer dA(0, A.bytes()), dB(0, B.bytes()), dC(0, C0.bytes());
        ASSERT_EQ(cudaMemcpy(dA.get(), A.data(), A.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dB.get(), B.data(), B.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dC.get(), C0.data(), C0.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cublasGemmEx(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                               dA.get(), ab, lda, dB.get(), ab, ldb, &beta, dC.get(), c_type, ldc, compute,
                               CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        std::vector<float> got     = c_type == CUDA_R_32F ? download<float>(dC, c_before.size())
                                                          : to_floats(c_type, download<uint16_t>(dC, c_before.size()));
        const Reference    ref     = reference(ta, tb, m, n, k, alpha, A, B, beta, c_before, ldc);
        const double       out_eps = c_type == CUDA_R_16F    ? std::ldexp(1.0, -11)
                                     : c_type == CUDA_R_16BF ? std::ldexp(1.0, -8)
                                                             : 0;
        const std::string  what = std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " m " + std::to_string(m) + " n " +
                                 std::to_string(n) + " k " + std::to_string(k) + " type " + std::to_string((int) ab);
        expect_near(got, ref, m, n, ldc, k, out_eps, what.c_str());
        for (int j = 0; j < n; ++j) { // the padding rows are not touched
            for (int i = m; i < ldc; ++i) {
                const size_t at = (size_t) i + (size_t) j * ldc;
                ASSERT_EQ(got[at], c_before[at]) << what << ": padding C(" << i << ", " << j << ") written";
            }
        }
    }

    // the host waits for the stream before it reads results
    void finish() { ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }

    cudaStream_t   stream_ = nullptr;
    cublasHandle_t handle_ = nullptr;
};

// ---- GEMM results

TEST_F(HostBlas, BackendCombinationsMatchReference) {
    // the backend: C[N x M] = A[K x N]^T B[K x M], A and B of one type, C F32, compute 32F
    const int shapes[][3] = { { 1, 1, 1 }, { 7, 13, 5 }, { 64, 33, 129 }, { 17, 1, 300 }, { 1, 19, 64 } };
    for (cudaDataType_t t : { CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF }) {
        for (const auto & s : shapes) {
            for (int pad : { 0, 3 }) {
                check_gemm(true, false, s[0], s[1], s[2], t, CUBLAS_COMPUTE_32F, 1.0f, 0.0f, pad);
            }
        }
    }
}

TEST_F(HostBlas, EveryTransposeAlphaBetaAndOutputType) {
    for (bool ta : { false, true }) {
        for (bool tb : { false, true }) {
            check_gemm(ta, tb, 11, 6, 9, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1.5f, 0.5f, 2);
            check_gemm(ta, tb, 11, 6, 9, CUDA_R_16F, CUBLAS_COMPUTE_32F, -0.75f, 2.0f, 1, CUDA_R_16F);
            check_gemm(ta, tb, 11, 6, 9, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1.0f, 1.0f, 0, CUDA_R_16BF);
        }
    }
}

TEST_F(HostBlas, EmptyShapes) {
    check_gemm(true, false, 0, 5, 3, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1.0f, 0.0f, 0);
    check_gemm(true, false, 4, 0, 3, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1.0f, 0.0f, 0);
    check_gemm(true, false, 4, 5, 0, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1.0f, 0.5f, 0); // C = beta C
}

TEST_F(HostBlas, BetaZeroDoesNotReadC) {
    const int    m = 3, n = 2, k = 4;
    std::mt19937 rng(7);
    const Matrix A(CUDA_R_32F, k, m, k, rng), B(CUDA_R_32F, k, n, k, rng);
    DeviceBuffer dA(0, A.bytes()), dB(0, B.bytes()), dC(0, (size_t) m * n * 4);
    upload(dA, A.f32);
    upload(dB, B.f32);
    upload(dC, std::vector<float>((size_t) m * n, NAN));
    const float alpha = 1.0f, beta = 0.0f;
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA.get(), CUDA_R_32F, k, dB.get(),
                           CUDA_R_32F, k, &beta, dC.get(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    finish();
    for (float v : download<float>(dC, (size_t) m * n)) {
        EXPECT_TRUE(std::isfinite(v));
    }
}

TEST_F(HostBlas, Tf32RoundsInputs) {
    // 1 + 2^-20 is exact in F32 and rounds to 1 in TF32 (1 + 2^-8 is exact in both): one product
    // shows the difference
    const float  a = 1.0f + std::ldexp(1.0f, -20), b = 1.0f + std::ldexp(1.0f, -8), alpha = 1.0f, beta = 0.0f;
    DeviceBuffer dA(0, 4), dB(0, 4), dC(0, 4);
    upload(dA, std::vector<float>{ a });
    upload(dB, std::vector<float>{ b });
    for (auto compute : { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 }) {
        ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 1, &alpha, dA.get(), CUDA_R_32F, 1, dB.get(),
                               CUDA_R_32F, 1, &beta, dC.get(), CUDA_R_32F, 1, compute, CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_SUCCESS);
        finish();
        const float got = download<float>(dC, 1)[0];
        EXPECT_EQ(got, compute == CUBLAS_COMPUTE_32F ? a * b : tf32(a) * tf32(b)) << "compute " << (int) compute;
    }
    // the TF32 math mode makes CUBLAS_COMPUTE_32F round F32 inputs too
    ASSERT_EQ(cublasSetMathMode(handle_, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 1, &alpha, dA.get(), CUDA_R_32F, 1, dB.get(),
                           CUDA_R_32F, 1, &beta, dC.get(), CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    finish();
    EXPECT_EQ(download<float>(dC, 1)[0], b) << "a rounds to 1 in TF32, b is exact";
}

TEST_F(HostBlas, Tf32MatchesTf32Reference) {
    const int    m = 24, n = 10, k = 200;
    std::mt19937 rng(99);
    const Matrix A(CUDA_R_32F, k, m, k, rng), B(CUDA_R_32F, k, n, k, rng);
    DeviceBuffer dA(0, A.bytes()), dB(0, B.bytes()), dC(0, (size_t) m * n * 4);
    upload(dA, A.f32);
    upload(dB, B.f32);
    const float alpha = 1.0f, beta = 0.0f;
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA.get(), CUDA_R_32F, k, dB.get(),
                           CUDA_R_32F, k, &beta, dC.get(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F_FAST_TF32,
                           CUBLAS_GEMM_DEFAULT_TENSOR_OP),
              CUBLAS_STATUS_SUCCESS);
    finish();
    const std::vector<float> got = download<float>(dC, (size_t) m * n), none((size_t) m * n, 0.0f);
    expect_near(got, reference(true, false, m, n, k, alpha, A, B, beta, none, m, true), m, n, m, k, 0, "TF32");
    // and it is measurably away from the F32 result
    const Reference f32      = reference(true, false, m, n, k, alpha, A, B, beta, none, m, false);
    double          max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(got[i] - f32.value[i]) / (f32.bound[i] + 1e-30));
    }
    EXPECT_GT(max_diff, std::ldexp(1.0, -16)) << "TF32 rounding is not visible";
}

TEST_F(HostBlas, Compute16FRoundsEveryStep) {
    // 2048 + 1 + 1: half's spacing at 2048 is 2, so each +1 rounds back to 2048 (float: 2050)
    const std::vector<uint16_t> a = { wsp::fp32_to_fp16(2048), wsp::fp32_to_fp16(1), wsp::fp32_to_fp16(1) };
    const std::vector<uint16_t> b(3, wsp::fp32_to_fp16(1));
    DeviceBuffer                dA(0, 6), dB(0, 6), dC(0, 4);
    upload(dA, a);
    upload(dB, b);
    const uint16_t alpha = wsp::fp32_to_fp16(1), beta = wsp::fp32_to_fp16(0);
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 3, &alpha, dA.get(), CUDA_R_16F, 3, dB.get(),
                           CUDA_R_16F, 3, &beta, dC.get(), CUDA_R_16F, 1, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    finish();
    EXPECT_EQ(wsp::fp16_to_fp32(download<uint16_t>(dC, 1)[0]), 2048.0f);
    // the same in 32F compute keeps the ones
    const float alpha32 = 1.0f, beta32 = 0.0f;
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 3, &alpha32, dA.get(), CUDA_R_16F, 3, dB.get(),
                           CUDA_R_16F, 3, &beta32, dC.get(), CUDA_R_16F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    finish();
    EXPECT_EQ(wsp::fp16_to_fp32(download<uint16_t>(dC, 1)[0]), 2050.0f);
}

TEST_F(HostBlas, StridedBatchedWithBroadcastA) {
    const int    m = 9, n = 5, k = 12, batch = 3;
    std::mt19937 rng(5);
    const Matrix A(CUDA_R_16F, k, m, k, rng);         // one A for every batch entry (stride 0)
    const Matrix B(CUDA_R_16F, k, n * batch, k, rng); // entries k * n apart
    DeviceBuffer dA(0, A.bytes()), dB(0, B.bytes()), dC(0, (size_t) m * n * batch * 4);
    upload(dA, A.half);
    upload(dB, B.half);
    const float alpha = 1.0f, beta = 0.0f;
    ASSERT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA.get(), CUDA_R_16F, k, 0,
                                         dB.get(), CUDA_R_16F, k, (long long) k * n, &beta, dC.get(), CUDA_R_32F, m,
                                         (long long) m * n, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    finish();
    const std::vector<float> got = download<float>(dC, (size_t) m * n * batch);
    for (int b = 0; b < batch; ++b) {
        Matrix Bb(CUDA_R_16F, k, n, k, rng);
        for (int j = 0; j < n; ++j) {
            for (int l = 0; l < k; ++l) {
                Bb.half[(size_t) l + (size_t) j * k] = B.half[(size_t) l + (size_t) (b * n + j) * k];
            }
        }
        const std::vector<float> zero((size_t) m * n, 0.0f);
        const std::vector<float> part(got.begin() + (long) b * m * n, got.begin() + (long) (b + 1) * m * n);
        expect_near(part, reference(true, false, m, n, k, alpha, A, Bb, beta, zero, m), m, n, m, k, 0, "strided");
    }
}

TEST_F(HostBlas, PointerArrayBatched) {
    const int                   m = 6, n = 4, k = 8, batch = 5;
    std::mt19937                rng(11);
    std::vector<Matrix>         As, Bs;
    std::vector<DeviceBuffer *> bufs;
    std::vector<const void *>   pa, pb;
    std::vector<void *>         pc;
    for (int b = 0; b < batch; ++b) {
        As.emplace_back(CUDA_R_16BF, k, m, k, rng);
        Bs.emplace_back(CUDA_R_16BF, k, n, k, rng);
    }
    std::vector<std::unique_ptr<DeviceBuffer>> owned;
    for (int b = 0; b < batch; ++b) {
        owned.push_back(std::make_unique<DeviceBuffer>(0, As[(size_t) b].bytes()));
        upload(*owned.back(), As[(size_t) b].half);
        pa.push_back(owned.back()->get());
        owned.push_back(std::make_unique<DeviceBuffer>(0, Bs[(size_t) b].bytes()));
        upload(*owned.back(), Bs[(size_t) b].half);
        pb.push_back(owned.back()->get());
        owned.push_back(std::make_unique<DeviceBuffer>(0, (size_t) m * n * 4));
        pc.push_back(owned.back()->get());
    }
    DeviceBuffer              arrays(0, 3 * batch * sizeof(void *));
    std::vector<const void *> all(pa);
    all.insert(all.end(), pb.begin(), pb.end());
    all.insert(all.end(), pc.begin(), pc.end());
    upload(arrays, all);
    auto **     p     = arrays.get<const void *>();
    const float alpha = 2.0f, beta = 0.0f;
    ASSERT_EQ(cublasGemmBatchedEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, p, CUDA_R_16BF, k, p + batch,
                                  CUDA_R_16BF, k, &beta, (void **) (p + 2 * batch), CUDA_R_32F, m, batch,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const std::vector<float> zero((size_t) m * n, 0.0f);
    for (int b = 0; b < batch; ++b) {
        const std::vector<float> got = download<float>(*owned[(size_t) (3 * b + 2)], (size_t) m * n);
        expect_near(got, reference(true, false, m, n, k, alpha, As[(size_t) b], Bs[(size_t) b], beta, zero, m), m, n, m,
                    k, 0, "pointer array");
    }
}

TEST_F(HostBlas, LargeGemmIsQuickEnough) {
    // the size of a whisper layer's GEMM: 384 x 1500 x 384, F16 weights
    const int    m = 384, n = 1500, k = 384;
    std::mt19937 rng(3);
    const Matrix A(CUDA_R_16F, k, m, k, rng), B(CUDA_R_16F, k, n, k, rng);
    DeviceBuffer dA(0, A.bytes()), dB(0, B.bytes()), dC(0, (size_t) m * n * 4);
    upload(dA, A.half);
    upload(dB, B.half);
    const float alpha = 1.0f, beta = 0.0f;
    const auto  t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA.get(), CUDA_R_16F, k, dB.get(),
                           CUDA_R_16F, k, &beta, dC.get(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RecordProperty("seconds", std::to_string(seconds));
    EXPECT_LT(seconds, 10.0);
    // spot-check a few columns against the reference
    const std::vector<float> got = download<float>(dC, (size_t) m * n);
    for (int j : { 0, 777, n - 1 }) {
        for (int i = 0; i < m; i += 37) {
            double s = 0, b = 0;
            for (int l = 0; l < k; ++l) {
                s += (double) A.at(l, i) * B.at(l, j);
                b += std::fabs((double) A.at(l, i) * B.at(l, j));
            }
            EXPECT_NEAR(got[(size_t) i + (size_t) j * m], s, std::ldexp(1.0, -24) * (k + 4) * b);
        }
    }
}

TEST_F(HostBlas, CapturedIntoAGraph) {
    // C += A^T B, captured once and replayed twice
    const int    m = 5, n = 3, k = 4;
    std::mt19937 rng(21);
    const Matrix A(CUDA_R_32F, k, m, k, rng), B(CUDA_R_32F, k, n, k, rng);
    DeviceBuffer dA(0, A.bytes()), dB(0, B.bytes()), dC(0, (size_t) m * n * 4);
    upload(dA, A.f32);
    upload(dB, B.f32);
    upload(dC, std::vector<float>((size_t) m * n, 0.0f));
    const float alpha = 1.0f, beta = 1.0f;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, dA.get(), CUDA_R_32F, k, dB.get(),
                           CUDA_R_32F, k, &beta, dC.get(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(download<float>(dC, 1)[0], 0.0f) << "a captured GEMM must not run at capture";
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const std::vector<float> zero((size_t) m * n, 0.0f);
    const Reference          ref = reference(true, false, m, n, k, 2.0f, A, B, 0.0f, zero, m);
    expect_near(download<float>(dC, (size_t) m * n), ref, m, n, m, k + 1, 0, "graph");
    EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

// ---- validation

TEST_F(HostBlas, InvalidValuesAreRejected) {
    DeviceBuffer d(0, 1 << 16);
    void *       p     = d.get();
    const float  alpha = 1.0f, beta = 0.0f;
    auto         gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc,
                    const void * al = nullptr) {
        return cublasGemmEx(handle_, ta, tb, m, n, k, al != nullptr ? al : &alpha, p, CUDA_R_32F, lda, p, CUDA_R_32F,
                                    ldb, &beta, p, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    EXPECT_EQ(gemm(T, N, 4, 3, 5, 5, 5, 4), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(gemm(T, N, -1, 3, 5, 5, 5, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(gemm(T, N, 4, -1, 5, 5, 5, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(gemm(T, N, 4, 3, -1, 5, 5, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(gemm((cublasOperation_t) 7, N, 4, 3, 5, 5, 5, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(gemm(T, CUBLAS_OP_CONJG, 4, 3, 5, 5, 5, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(gemm(T, N, 4, 3, 5, 4, 5, 4), CUBLAS_STATUS_INVALID_VALUE); // lda < k for op T
    EXPECT_EQ(gemm(N, N, 4, 3, 5, 3, 5, 4), CUBLAS_STATUS_INVALID_VALUE); // lda < m for op N
    EXPECT_EQ(gemm(N, N, 4, 3, 5, 4, 4, 4), CUBLAS_STATUS_INVALID_VALUE); // ldb < k for op N
    EXPECT_EQ(gemm(N, T, 4, 3, 5, 4, 2, 4), CUBLAS_STATUS_INVALID_VALUE); // ldb < n for op T
    EXPECT_EQ(gemm(T, N, 4, 3, 5, 5, 5, 3), CUBLAS_STATUS_INVALID_VALUE); // ldc < m
    EXPECT_EQ(gemm(T, N, 0, 3, 5, 5, 5, 0), CUBLAS_STATUS_INVALID_VALUE); // ldc < max(1, m)
    EXPECT_EQ(gemm(T, N, 0, 0, 0, 0, 1, 1), CUBLAS_STATUS_INVALID_VALUE); // lda < max(1, k)
    EXPECT_EQ(cublasGemmEx(handle_, T, N, 4, 3, 5, nullptr, p, CUDA_R_32F, 5, p, CUDA_R_32F, 5, &beta, p, CUDA_R_32F, 4,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasGemmStridedBatchedEx(handle_, T, N, 4, 3, 5, &alpha, p, CUDA_R_32F, 5, 0, p, CUDA_R_32F, 5, 0,
                                         &beta, p, CUDA_R_32F, 4, 0, -1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasGemmBatchedEx(handle_, T, N, 4, 3, 5, &alpha, (const void * const *) p, CUDA_R_32F, 5,
                                  (const void * const *) p, CUDA_R_32F, 5, &beta, (void * const *) p, CUDA_R_32F, 4, -2,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasGemmEx(nullptr, T, N, 4, 3, 5, &alpha, p, CUDA_R_32F, 5, p, CUDA_R_32F, 5, &beta, p, CUDA_R_32F, 4,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_F(HostBlas, UnsupportedTypesAreRejected) {
    DeviceBuffer d(0, 1 << 12);
    void *       p     = d.get();
    const float  alpha = 1.0f, beta = 0.0f;
    auto         gemm = [&](cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cublasComputeType_t compute) {
        return cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &alpha, p, a, 2, p, b, 2, &beta, p, c, 2,
                                    compute, CUBLAS_GEMM_DEFAULT);
    };
    EXPECT_EQ(gemm(CUDA_R_16F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(gemm(CUDA_R_16F, CUDA_R_16F, CUDA_R_16BF, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(gemm(CUDA_R_32F, CUDA_R_32F, CUDA_R_16F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(gemm(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_16F), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(gemm(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_64F), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(gemm(CUDA_R_8I, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &alpha, p, CUDA_R_32F, 2, p, CUDA_R_32F, 2,
                           &beta, p, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, (cublasGemmAlgo_t) 50),
              CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// ---- devices, streams and the workspace

TEST_F(HostBlas, StreamOfAnotherDeviceIsRejected) {
    cudaStream_t other = make_stream(1);
    EXPECT_EQ(cublasSetStream(handle_, other), CUBLAS_STATUS_INVALID_VALUE);
    cudaStream_t got = nullptr;
    ASSERT_EQ(cublasGetStream(handle_, &got), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(got, stream_);
    destroy_stream(other);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST_F(HostBlas, MatrixOnAnotherDeviceNeedsPeerAccess) {
    DeviceBuffer a1(1, 64), b0(0, 64), c0(0, 64);
    const float  alpha = 1.0f, beta = 0.0f;
    auto         gemm = [&] {
        return cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &alpha, a1.get(), CUDA_R_32F, 2, b0.get(),
                                    CUDA_R_32F, 2, &beta, c0.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    EXPECT_EQ(gemm(), CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT_NE(cudaStreamSynchronize(stream_), cudaSuccess) << "the stream reports the failed GEMM";
    (void) cudaGetLastError();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    EXPECT_EQ(gemm(), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
}

TEST_F(HostBlas, PointerArrayNamingAnotherDeviceFailsWhenRun) {
    DeviceBuffer a1(1, 64), b0(0, 64), c0(0, 64), arrays(0, 3 * sizeof(void *));
    upload(arrays, std::vector<void *>{ a1.get(), b0.get(), c0.get() });
    auto **     p     = arrays.get<const void *>();
    const float alpha = 1.0f, beta = 0.0f;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    EXPECT_EQ(cublasGemmBatchedEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &alpha, p, CUDA_R_32F, 2, p + 1,
                                  CUDA_R_32F, 2, &beta, (void **) (p + 2), CUDA_R_32F, 2, 1, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS); // the pointers are read when the GEMM runs
    EXPECT_NE(cudaStreamSynchronize(stream_), cudaSuccess);
    (void) cudaGetLastError();
}

TEST_F(HostBlas, WorkspaceMustBeDeviceMemoryOfTheHandle) {
    DeviceBuffer w0(0, 1 << 20), w1(1, 1 << 20);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    EXPECT_EQ(cublasSetWorkspace(handle_, w0.get(), 1 << 20), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSetWorkspace(handle_, w1.get(), 1 << 20), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSetWorkspace(handle_, w0.get<char>() + 16, 1024), CUBLAS_STATUS_INVALID_VALUE); // unaligned
    EXPECT_EQ(cublasSetWorkspace(handle_, w0.get(), 2 << 20), CUBLAS_STATUS_INVALID_VALUE);         // too large
    std::vector<char> host(1024);
    EXPECT_EQ(cublasSetWorkspace(handle_, host.data(), host.size()), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSetWorkspace(handle_, nullptr, 0), CUBLAS_STATUS_SUCCESS);
}

TEST_F(HostBlas, FreedWorkspaceIsReported) {
    auto         w = std::make_unique<DeviceBuffer>(0, 1 << 20);
    DeviceBuffer a(0, 64), b(0, 64), c(0, 64);
    const float  alpha = 1.0f, beta = 0.0f;
    auto         gemm = [&] {
        return cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &alpha, a.get(), CUDA_R_32F, 2, b.get(),
                                    CUDA_R_32F, 2, &beta, c.get(), CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    ASSERT_EQ(cublasSetWorkspace(handle_, w->get(), 1 << 20), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(gemm(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    w->release(); // the backend's bug: the workspace freed while the handle still names it
    EXPECT_EQ(gemm(), CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT_NE(cudaStreamSynchronize(stream_), cudaSuccess);
    (void) cudaGetLastError();
    EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_INVALID_VALUE);
    handle_ = nullptr;
}

TEST_F(HostBlas, WorkspaceFreedAfterDestroyIsFine) {
    DeviceBuffer   w(0, 1 << 20);
    cublasHandle_t h = nullptr;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasSetWorkspace(h, w.get(), 1 << 20), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_NOT_INITIALIZED); // twice
}

TEST_F(HostBlas, StatusStrings) {
    EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
    EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
    EXPECT_EQ((int) CUBLAS_STATUS_EXECUTION_FAILED, 13);
    EXPECT_EQ((int) CUBLAS_COMPUTE_32F_FAST_TF32, 77);
    EXPECT_EQ((int) CUDA_R_16BF, 14);
}

} // namespace
