// The CPU device's extra buffer type CPU_REPACK (Note [Q4_0x8 repack]): offered through
// wsp_ggml_backend_dev_get_extra_bufts as whisper.cpp asks for it; Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights
// read back bit for bit (whole, in part, at any offset, memset too) while stored in the 8-row layout; MUL_MAT on them
// against the plain layout's result and a double reference at every M, broadcast batches included; supports_op as
// whisper.cpp probes it (a weight in a zero-size buffer), and every other op reading a repacked weight refused.

#include "ggml-backend.h"
#include "test_util.h"
#include "../src/cpu/mul_mat_path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace wsp::test {
namespace {

wsp_ggml_backend_buffer_type_t repack_buft() {
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    auto                   fn  = (wsp_ggml_backend_dev_get_extra_bufts_t) wsp_ggml_backend_reg_get_proc_address(
                           wsp_ggml_backend_dev_backend_reg(dev), "wsp_ggml_backend_dev_get_extra_bufts");
    if (fn == nullptr) {
        return nullptr;
    }
    wsp_ggml_backend_buffer_type_t * list = fn(dev);
    return list != nullptr ? list[0] : nullptr;
}

// the types CPU_REPACK keeps in its layout
const wsp_ggml_type REPACKED[] = { WSP_GGML_TYPE_Q4_0, WSP_GGML_TYPE_Q4_1, WSP_GGML_TYPE_Q5_0, WSP_GGML_TYPE_Q5_1,
                                   WSP_GGML_TYPE_Q8_0 };

// the bytes of random weights of type, and the values they decode to
struct Weights {
    std::vector<uint8_t> bytes;
    std::vector<float>   values;
};

Weights weights(wsp_ggml_type type, int64_t K, int64_t rows, uint32_t seed) {
    std::vector<float> f = random_values((size_t) (K * rows), seed);
    for (size_t i = 0; i < f.size(); i += 7) {
        f[i] += 0.5f; // rows not centred on 0: Q4_1's mins are not all -d * 8
    }
    Weights w;
    w.bytes.resize(wsp_ggml_row_size(type, K) * (size_t) rows);
    wsp_ggml_quantize_chunk(type, f.data(), w.bytes.data(), 0, rows, K, nullptr);
    w.values.resize(f.size());
    wsp_ggml_get_type_traits(type)->to_float(w.bytes.data(), w.values.data(), K * rows);
    return w;
}

// a context of one weight tensor, allocated in buft
struct WeightCtx {
    wsp_ggml_context *        ctx = nullptr;
    wsp_ggml_backend_buffer_t buf = nullptr;
    wsp_ggml_tensor *         t   = nullptr;
    WeightCtx(wsp_ggml_backend_buffer_type_t buft, wsp_ggml_type type, std::vector<int64_t> ne) {
        ctx = wsp_ggml_init({ 4 * wsp_ggml_tensor_overhead(), nullptr, true });
        ne.resize(4, 1);
        t   = wsp_ggml_new_tensor(ctx, type, 4, ne.data());
        buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    }
    ~WeightCtx() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
};

TEST(CpuRepack, OfferedAsTheCpuExtraBufferType) {
    wsp_ggml_backend_buffer_type_t buft = repack_buft();
    ASSERT_NE(buft, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_buft_name(buft), "CPU_REPACK");
    EXPECT_FALSE(wsp_ggml_backend_buft_is_host(buft));
    EXPECT_EQ(wsp_ggml_backend_buft_get_device(buft), wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU));
    EXPECT_TRUE(wsp_ggml_backend_dev_supports_buft(wsp_ggml_backend_buft_get_device(buft), buft));
}

void check_bytes(wsp_ggml_type type) {
    SCOPED_TRACE(wsp_ggml_type_name(type));
    const int64_t K = 96, N = 24;
    Weights       w = weights(type, K, N, 7);
    WeightCtx     wc(repack_buft(), type, { K, N });
    ASSERT_NE(wc.buf, nullptr);
    wsp_ggml_backend_tensor_set(wc.t, w.bytes.data(), 0, w.bytes.size());
    std::vector<uint8_t> back(w.bytes.size());
    wsp_ggml_backend_tensor_get(wc.t, back.data(), 0, back.size());
    EXPECT_EQ(back, w.bytes);
    // stored in another layout: the raw bytes differ (same size, a permutation within groups)
    EXPECT_NE(std::memcmp(wc.t->data, w.bytes.data(), w.bytes.size()), 0);

    // pieces at odd offsets, across group boundaries
    const Weights other = weights(type, K, N, 8);
    for (size_t off : { (size_t) 0, (size_t) 5, (size_t) 431, (size_t) 700 }) {
        const size_t len = 517;
        wsp_ggml_backend_tensor_set(wc.t, other.bytes.data() + off, off, len);
        std::memcpy(w.bytes.data() + off, other.bytes.data() + off, len);
        std::vector<uint8_t> piece(len);
        wsp_ggml_backend_tensor_get(wc.t, piece.data(), off, len);
        EXPECT_EQ(0, std::memcmp(piece.data(), other.bytes.data() + off, len)) << off;
    }
    wsp_ggml_backend_tensor_get(wc.t, back.data(), 0, back.size());
    EXPECT_EQ(back, w.bytes);

    // memset in part (across a group boundary), then whole
    wsp_ggml_backend_tensor_memset(wc.t, 0xa7, 301, 250);
    std::memset(w.bytes.data() + 301, 0xa7, 250);
    wsp_ggml_backend_tensor_get(wc.t, back.data(), 0, back.size());
    EXPECT_EQ(back, w.bytes);
    wsp_ggml_backend_tensor_memset(wc.t, 0x5a, 0, back.size());
    wsp_ggml_backend_tensor_get(wc.t, back.data(), 0, back.size());
    EXPECT_EQ(back, std::vector<uint8_t>(back.size(), 0x5a));
}

TEST(CpuRepack, BytesReadBackAsWrittenWholeAndInPart) {
    for (wsp_ggml_type type : REPACKED) {
        check_bytes(type);
    }
}

// out = w x b with w in CPU_REPACK, beside the same weight in the CPU buffer and a double reference
void check_mul_mat(wsp_ggml_type type, int64_t K, int64_t N, int64_t M, int64_t ne2w, int64_t ne2b) {
    SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " K " + std::to_string(K) + " N " + std::to_string(N) + " M " +
                 std::to_string(M) + " batches " + std::to_string(ne2w) + "/" + std::to_string(ne2b));
    const Weights w = weights(type, K, N * ne2w, (uint32_t) (K + N + M));
    WeightCtx     packed(repack_buft(), type, { K, N, ne2w });
    WeightCtx     plain(wsp_ggml_backend_cpu_buffer_type(), type, { K, N, ne2w });
    wsp_ggml_backend_tensor_set(packed.t, w.bytes.data(), 0, w.bytes.size());
    wsp_ggml_backend_tensor_set(plain.t, w.bytes.data(), 0, w.bytes.size());

    Graph             g;
    wsp_ggml_tensor * b     = g.input(WSP_GGML_TYPE_F32, { K, M, ne2b });
    wsp_ggml_tensor * out   = wsp_ggml_mul_mat(g.ctx(), packed.t, b);
    wsp_ggml_tensor * out_p = wsp_ggml_mul_mat(g.ctx(), plain.t, b);
    ASSERT_TRUE(wsp_ggml_backend_supports_op(g.backend(), out));
    g.build(out, { out_p });
    const std::vector<float> x = random_values((size_t) (K * M * ne2b), 99);
    set_values(b, x);
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> got = get_values(out), plain_got = get_values(out_p);

    std::vector<double> ref(got.size());
    for (int64_t i2 = 0; i2 < ne2b; ++i2) {
        const int64_t w2 = i2 / (ne2b / ne2w);
        for (int64_t m = 0; m < M; ++m) {
            for (int64_t n = 0; n < N; ++n) {
                double s = 0.0;
                for (int64_t k = 0; k < K; ++k) {
                    s += (double) w.values[(size_t) ((w2 * N + n) * K + k)] * x[(size_t) ((i2 * M + m) * K + k)];
                }
                ref[(size_t) ((i2 * M + m) * N + n)] = s;
            }
        }
    }
    // activations quantized to 8 bits: ~0.4% per element, NMSE ~1e-5
    EXPECT_LT(nmse(got, ref), 1e-4);
    if (M < wsp::cpu::mm::gemm_min_rows(type)) {
        // the plain layout takes the same 8-bit activations at these M: only the order of the
        // float sums differs
        EXPECT_LT(nmse(got, plain_got), 1e-11);
    }
}

TEST(CpuRepack, MulMatAtEveryM) {
    for (wsp_ggml_type type : REPACKED) {
        for (int64_t M : { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 64 }) {
            check_mul_mat(type, 256, 40, M, 1, 1);
        }
        check_mul_mat(type, 1280, 64, 1, 1, 1); // whisper's shapes
        check_mul_mat(type, 32, 8, 3, 1, 1);    // one block, one group
        check_mul_mat(type, 96, 16, 5, 2, 4);   // a broadcast over b's batches
        check_mul_mat(type, 64, 24, 150, 1, 1); // many rows (the encoder)
    }
}

// Blocks at the ends of their range against activations that quantize to +-127 everywhere: the
// integer sums are at their largest (Q5's u = 31, Q8_0's 255 after its offset), where a 16-bit
// partial sum of the AVX2 kernel without VNNI would wrap. Every value is exact in float: the
// result must equal the reference to rounding.
TEST(CpuRepack, ExtremeBlocksSumExactly) {
    const int64_t K = 256, N = 16;
    for (wsp_ggml_type type : REPACKED) {
        for (uint8_t fill : { (uint8_t) 0xff, (uint8_t) 0x80, (uint8_t) 0x7f, (uint8_t) 0x00 }) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " bytes " + std::to_string(fill));
            const size_t         bs = wsp_ggml_type_size(type);
            std::vector<uint8_t> bytes(wsp_ggml_row_size(type, K) * (size_t) N, fill);
            for (size_t b = 0; b < bytes.size(); b += bs) {
                const uint16_t one = 0x3c00; // d = 1 (and m = 1 for the types with a min)
                std::memcpy(&bytes[b], &one, 2);
                if (type == WSP_GGML_TYPE_Q4_1 || type == WSP_GGML_TYPE_Q5_1) {
                    std::memcpy(&bytes[b + 2], &one, 2);
                }
            }
            std::vector<float> values((size_t) (K * N));
            wsp_ggml_get_type_traits(type)->to_float(bytes.data(), values.data(), K * N);
            WeightCtx packed(repack_buft(), type, { K, N });
            wsp_ggml_backend_tensor_set(packed.t, bytes.data(), 0, bytes.size());
            for (float sign : { 1.0f, -1.0f }) {
                const int64_t     M = 3;
                Graph             g;
                wsp_ggml_tensor * b   = g.input(WSP_GGML_TYPE_F32, { K, M });
                wsp_ggml_tensor * out = wsp_ggml_mul_mat(g.ctx(), packed.t, b);
                g.build(out, {});
                std::vector<float> x((size_t) (K * M), sign);
                for (int64_t k = 0; k < K; ++k) {
                    x[(size_t) (K + k)] = k % 2 ? 1.0f : -1.0f; // b row 1: alternating signs
                }
                set_values(b, x);
                ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                const std::vector<float> got = get_values(out);
                for (int64_t m = 0; m < M; ++m) {
                    for (int64_t n = 0; n < N; ++n) {
                        double ref = 0;
                        for (int64_t k = 0; k < K; ++k) {
                            ref += (double) values[(size_t) (n * K + k)] * x[(size_t) (m * K + k)];
                        }
                        EXPECT_NEAR(got[(size_t) (m * N + n)], ref, 1e-5 * (std::fabs(ref) + K))
                            << "m " << m << " n " << n;
                    }
                }
            }
        }
    }
}

// Note [b row pairs] (mul_mat_repack.cpp): two b rows share each 512-bit instruction where there
// is AVX-512, and every lane computes as the one-row tile does: each row of a batch of M comes out
// bit for bit as that row alone
TEST(CpuRepack, RowsOfABatchEqualEachRowAloneBitForBit) {
    for (auto [type, K] : { std::pair{ WSP_GGML_TYPE_Q4_0, 64 }, std::pair{ WSP_GGML_TYPE_Q4_0, 1280 },
                            std::pair{ WSP_GGML_TYPE_Q4_1, 64 }, std::pair{ WSP_GGML_TYPE_Q4_1, 1280 },
                            std::pair{ WSP_GGML_TYPE_Q5_0, 64 }, std::pair{ WSP_GGML_TYPE_Q5_0, 1280 },
                            std::pair{ WSP_GGML_TYPE_Q5_1, 64 }, std::pair{ WSP_GGML_TYPE_Q5_1, 1280 },
                            std::pair{ WSP_GGML_TYPE_Q8_0, 64 }, std::pair{ WSP_GGML_TYPE_Q8_0, 1280 } }) {
        const int64_t N = 24, M = 19; // pairs in tiles of 8 and 1, and an odd last row
        SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " K " + std::to_string(K));
        const Weights w = weights(type, K, N, 7);
        WeightCtx     packed(repack_buft(), type, { K, N });
        wsp_ggml_backend_tensor_set(packed.t, w.bytes.data(), 0, w.bytes.size());
        Graph                          g;
        wsp_ggml_tensor *              b   = g.input(WSP_GGML_TYPE_F32, { K, M });
        wsp_ggml_tensor *              all = wsp_ggml_mul_mat(g.ctx(), packed.t, b);
        std::vector<wsp_ggml_tensor *> one;
        for (int64_t m = 0; m < M; ++m) {
            one.push_back(
                wsp_ggml_mul_mat(g.ctx(), packed.t, wsp_ggml_view_2d(g.ctx(), b, K, 1, b->nb[1], m * b->nb[1])));
        }
        g.build(all, one);
        set_values(b, random_values((size_t) (K * M), 8));
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        const std::vector<float> got = get_values(all);
        for (int64_t m = 0; m < M; ++m) {
            const std::vector<float> row = get_values(one[(size_t) m]);
            EXPECT_EQ(std::memcmp(row.data(), got.data() + m * N, (size_t) N * sizeof(float)), 0) << "row " << m;
        }
    }
}

TEST(CpuRepack, SupportsOpAsWhisperProbesIt) {
    wsp_ggml_backend_dev_t dev   = wsp_ggml_backend_dev_by_type(WSP_GGML_BACKEND_DEVICE_TYPE_CPU);
    wsp_ggml_context *     ctx   = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    auto                   probe = [&](wsp_ggml_type type, int64_t N) {
        wsp_ggml_tensor * w  = wsp_ggml_new_tensor_2d(ctx, type, 64, N);
        wsp_ggml_tensor * b  = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 64, 1500);
        wsp_ggml_tensor * op = wsp_ggml_mul_mat(ctx, w, b);
        w->buffer            = wsp_ggml_backend_buft_alloc_buffer(repack_buft(), 0);
        const bool ok        = wsp_ggml_backend_dev_supports_op(dev, op);
        wsp_ggml_backend_buffer_free(w->buffer);
        w->buffer = nullptr;
        return ok;
    };
    for (wsp_ggml_type type : REPACKED) {
        EXPECT_TRUE(probe(type, 384)) << wsp_ggml_type_name(type);
        // not whole groups of 8 rows: for the plain CPU buffer
        EXPECT_FALSE(probe(type, 12)) << wsp_ggml_type_name(type);
    }
    EXPECT_FALSE(probe(WSP_GGML_TYPE_F16, 384)); // only the quantized types are repacked
    wsp_ggml_free(ctx);

    // another op on a repacked weight: refused
    WeightCtx          wc(repack_buft(), WSP_GGML_TYPE_Q4_0, { 64, 16 });
    wsp_ggml_context * g   = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  ids = wsp_ggml_new_tensor_1d(g, WSP_GGML_TYPE_I32, 2);
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(dev, wsp_ggml_get_rows(g, wc.t, ids)));
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(
        dev, wsp_ggml_cpy(g, wc.t, wsp_ggml_new_tensor_2d(g, WSP_GGML_TYPE_Q4_0, 64, 16))));
    wsp_ggml_tensor * half = wsp_ggml_view_2d(g, wc.t, 64, 8, wc.t->nb[1], 0);
    EXPECT_FALSE(wsp_ggml_backend_dev_supports_op(
        dev, wsp_ggml_mul_mat(g, half, wsp_ggml_new_tensor_2d(g, WSP_GGML_TYPE_F32, 64, 1))));
    wsp_ggml_free(g);
}

} // namespace
} // namespace wsp::test
