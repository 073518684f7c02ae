// The split buffer type on sim devices: the type itself (proc address, name, cache), how rows
// are spread (proportions, memory-proportional default, row granularity, zero-row devices),
// tensor data access (whole and row-aligned ranges, refused otherwise), and mul_mat with a split
// weight through the scheduler, equal to the single-device result for every weight type, and a
// whisper-shaped encoder whose every mat-mul weight is split.

#include "sched_encoder.h"
#include "split_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace wsp::test {
namespace {

using SplitBufferTypeFn = wsp_ggml_backend_buffer_type_t (*)(int, const float *);

wsp_ggml_backend_buffer_type_t split_buft(const std::vector<float> & split, int main_device = 0) {
    auto fn = reinterpret_cast<SplitBufferTypeFn>(
        wsp_ggml_backend_reg_get_proc_address(sim_reg(), "wsp_ggml_backend_split_buffer_type"));
    EXPECT_NE(fn, nullptr);
    return fn(main_device, split.empty() ? nullptr : split.data());
}

struct SplitWeight {
    wsp_ggml_context *        ctx = nullptr;
    wsp_ggml_backend_buffer_t buf = nullptr;
    wsp_ggml_tensor *         w   = nullptr;
    SplitWeight(wsp_ggml_backend_buffer_type_t buft, wsp_ggml_type type, int64_t k, int64_t n) {
        wsp_ggml_init_params p = { 4 * wsp_ggml_tensor_overhead(), nullptr, true };
        ctx                    = wsp_ggml_init(p);
        w                      = wsp_ggml_new_tensor_2d(ctx, type, k, n);
        wsp_ggml_set_name(w, "w");
        buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
        EXPECT_NE(buf, nullptr);
        wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    ~SplitWeight() {
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
};

std::vector<uint8_t> random_bytes_of(wsp_ggml_type type, int64_t k, int64_t n, uint32_t seed) {
    const std::vector<float> v = random_values((size_t) (k * n), seed);
    std::vector<uint8_t>     raw(wsp_ggml_row_size(type, k) * (size_t) n);
    wsp_ggml_get_type_traits(type)->from_float_ref(v.data(), raw.data(), k * n);
    return raw;
}

TEST(SplitBufferType, ProcAddressNameAndCache) {
    wsp_ggml_backend_buffer_type_t a = split_buft({ 0.7f, 0.2f, 0.1f, 0.0f });
    ASSERT_NE(a, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_buft_name(a), "SIM0_Split");
    EXPECT_FALSE(wsp_ggml_backend_buft_is_host(a));
    EXPECT_EQ(wsp_ggml_backend_buft_get_device(a), sim_dev(0));
    EXPECT_EQ(split_buft({ 7.0f, 2.0f, 1.0f, 0.0f }), a); // the same normalised split
    EXPECT_NE(split_buft({ 0.5f, 0.5f, 0.0f, 0.0f }), a);
    EXPECT_STREQ(wsp_ggml_backend_buft_name(split_buft({}, 2)), "SIM2_Split");
    EXPECT_EQ(split_buft({}), split_buft({ 0.0f, 0.0f, 0.0f, 0.0f })); // NULL and zeros: by memory
    EXPECT_EQ(wsp_ggml_backend_sim_split_buffer_type(0, nullptr), split_buft({}));
    EXPECT_EQ(split_buft({}, 7), nullptr); // not a device
}

// Note [one allocation per device]: the tensors of a context allocated in a split buffer take one
// buffer per device, each holding that device's slices of every tensor, back to back
TEST(SplitBufferType, OneAllocationPerDevicePerBuffer) {
    wsp_ggml_backend_buffer_type_t buft = split_buft({ 0.5f, 0.25f, 0.25f, 0.0f });
    std::vector<size_t>            buffers, memory;
    for (int d = 0; d < SIM_DEVICES; ++d) {
        buffers.push_back(wsp_ggml_backend_sim_buffer_count(sim_dev(d)));
        memory.push_back(wsp_ggml_backend_sim_memory_used(sim_dev(d)));
    }
    wsp_ggml_init_params              p   = { 16 * wsp_ggml_tensor_overhead(), nullptr, true };
    wsp_ggml_context *                ctx = wsp_ggml_init(p);
    const int64_t                     k   = 64;
    const int64_t                     n[] = { 40, 64, 17, 128, 33, 8 };
    std::vector<std::vector<int64_t>> rows;
    for (int64_t rows_of_w : n) {
        wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F16, k, rows_of_w);
        rows.push_back(expected_rows({ 0.5f, 0.25f, 0.25f, 0.0f }, rows_of_w, 1));
    }
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    ASSERT_NE(buf, nullptr);
    for (int d = 0; d < SIM_DEVICES; ++d) {
        size_t want = 0;
        for (const auto & r : rows) {
            want += r[(size_t) d] == 0
                        ? 0
                        : WSP_GGML_PAD((size_t) r[(size_t) d] * wsp_ggml_row_size(WSP_GGML_TYPE_F16, k), 256);
        }
        EXPECT_EQ(wsp_ggml_backend_sim_buffer_count(sim_dev(d)) - buffers[(size_t) d], want > 0 ? 1u : 0u)
            << "device " << d;
        EXPECT_EQ(wsp_ggml_backend_sim_memory_used(sim_dev(d)) - memory[(size_t) d], want) << "device " << d;
    }
    // every tensor reads back what it was given
    int seed = 0;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        const std::vector<uint8_t> data = random_bytes_of(WSP_GGML_TYPE_F16, k, t->ne[1], (uint32_t) (20 + seed++));
        wsp_ggml_backend_tensor_set(t, data.data(), 0, data.size());
    }
    seed = 0;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        const std::vector<uint8_t> data = random_bytes_of(WSP_GGML_TYPE_F16, k, t->ne[1], (uint32_t) (20 + seed++));
        std::vector<uint8_t>       back(data.size());
        wsp_ggml_backend_tensor_get(t, back.data(), 0, back.size());
        EXPECT_EQ(back, data) << t->ne[1] << " rows";
    }
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
    for (int d = 0; d < SIM_DEVICES; ++d) {
        EXPECT_EQ(wsp_ggml_backend_sim_buffer_count(sim_dev(d)), buffers[(size_t) d]);
    }
}

struct RowsCase {
    std::vector<float> split;
    wsp_ggml_type      type;
    int64_t            n;
};

class SplitRows : public ::testing::TestWithParam<RowsCase> {};

TEST_P(SplitRows, EachDeviceHoldsItsRows) {
    const RowsCase &               c    = GetParam();
    wsp_ggml_backend_buffer_type_t buft = split_buft(c.split);
    const int64_t                  k    = 64;
    std::vector<size_t>            before;
    for (int d = 0; d < SIM_DEVICES; ++d) {
        before.push_back(wsp_ggml_backend_sim_memory_used(sim_dev(d)));
    }
    SplitWeight                sw(buft, c.type, k, c.n);
    const std::vector<int64_t> rows = expected_rows(c.split.empty() ? std::vector<float>(SIM_DEVICES, 0.0f) : c.split,
                                                    c.n, wsp_ggml_is_quantized(c.type) ? 8 : 1);
    const size_t row = wsp_ggml_row_size(c.type, k);
    for (int d = 0; d < SIM_DEVICES; ++d) {
        const size_t held = wsp_ggml_backend_sim_memory_used(sim_dev(d)) - before[(size_t) d];
        const size_t want = rows[(size_t) d] == 0 ? 0 : WSP_GGML_PAD((size_t) rows[(size_t) d] * row, 256);
        EXPECT_EQ(held, want) << "device " << d;
    }
    EXPECT_GE(wsp_ggml_backend_buft_get_alloc_size(buft, sw.w), wsp_ggml_nbytes(sw.w));

    // whole-tensor round trip, then a row-aligned part, then refused ranges
    const std::vector<uint8_t> data = random_bytes_of(c.type, k, c.n, 5);
    wsp_ggml_backend_tensor_set(sw.w, data.data(), 0, data.size());
    std::vector<uint8_t> back(data.size());
    wsp_ggml_backend_tensor_get(sw.w, back.data(), 0, back.size());
    EXPECT_EQ(back, data);
    const int64_t        r0 = c.n / 3, r1 = c.n - 1;
    std::vector<uint8_t> part((size_t) (r1 - r0) * row);
    wsp_ggml_backend_tensor_get(sw.w, part.data(), (size_t) r0 * row, part.size());
    EXPECT_EQ(0, std::memcmp(part.data(), data.data() + (size_t) r0 * row, part.size()));
    std::vector<uint8_t> zeros(part.size(), 0);
    wsp_ggml_backend_tensor_set(sw.w, zeros.data(), (size_t) r0 * row, zeros.size());
    wsp_ggml_backend_tensor_get(sw.w, back.data(), 0, back.size());
    for (size_t i = 0; i < back.size(); ++i) {
        const bool in_part = i >= (size_t) r0 * row && i < (size_t) r1 * row;
        ASSERT_EQ(back[i], in_part ? 0 : data[i]) << "byte " << i;
    }
    wsp_ggml_backend_tensor_set(sw.w, data.data(), 0, data.size());
    wsp_ggml_backend_tensor_set(sw.w, zeros.data(), row / 2, row); // not row-aligned: refused
    wsp_ggml_backend_tensor_get(sw.w, back.data(), 0, back.size());
    EXPECT_EQ(back, data);
    wsp_ggml_backend_tensor_memset(sw.w, 0xab, row, row);
    wsp_ggml_backend_tensor_get(sw.w, back.data(), 0, back.size());
    EXPECT_EQ(back[row], 0xab);
    EXPECT_EQ(back[2 * row - 1], 0xab);
    EXPECT_EQ(back[2 * row], data[2 * row]);
    wsp_ggml_backend_buffer_clear(sw.buf, 0);
    wsp_ggml_backend_tensor_get(sw.w, back.data(), 0, back.size());
    EXPECT_EQ(back, std::vector<uint8_t>(back.size(), 0));
}

INSTANTIATE_TEST_SUITE_P(Split, SplitRows,
                         ::testing::Values(RowsCase{ { 0.7f, 0.2f, 0.1f, 0.0f }, WSP_GGML_TYPE_F32, 100 },
                                           RowsCase{ { 0.7f, 0.2f, 0.1f, 0.0f }, WSP_GGML_TYPE_Q8_0, 77 },
                                           RowsCase{ { 1.0f, 0.0f, 1.0f, 0.0f }, WSP_GGML_TYPE_F16, 33 },
                                           RowsCase{ { 0.0f, 0.0f, 0.0f, 1.0f }, WSP_GGML_TYPE_Q4_0, 40 },
                                           RowsCase{ {}, WSP_GGML_TYPE_BF16, 130 },
                                           RowsCase{ { 0.3f, 0.3f, 0.2f, 0.2f }, WSP_GGML_TYPE_Q5_1, 13 }));

} // namespace
} // namespace wsp::test
