// wsp_gguf_init_from_buffer: a GGUF file's bytes in memory read as the file would be (keys,
// tensor infos, offsets, data copied into the new context, so the buffer may go right after the
// call), and malformed buffers (NULL, empty, bad magic, truncated anywhere) refused with a
// logged message.

#include "ggml.h"
#include "gguf.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<uint8_t>;

// a file of two keys and three tensors of patterned data, as bytes
Bytes sample_file(wsp_ggml_context * data) {
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    wsp_gguf_set_val_str(ctx, "general.name", "from a buffer");
    wsp_gguf_set_val_u32(ctx, "sample.count", 42);
    const int64_t       ne[3][2] = { { 5, 3 }, { 64, 2 }, { 7, 1 } };
    const wsp_ggml_type types[3] = { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_F16 };
    for (int i = 0; i < 3; ++i) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_2d(data, types[i], ne[i][0], ne[i][1]);
        wsp_ggml_format_name(t, "t%d", i);
        auto * p = static_cast<uint8_t *>(t->data);
        for (size_t j = 0; j < wsp_ggml_nbytes(t); ++j) {
            p[j] = (uint8_t) (j * 13 + i);
        }
        // Q8_0 scales must be finite: the first two bytes of each 34-byte block are an fp16 scale
        if (types[i] == WSP_GGML_TYPE_Q8_0) {
            for (size_t b = 0; b < wsp_ggml_nbytes(t); b += 34) {
                p[b]     = 0x00;
                p[b + 1] = 0x3c; // 1.0
            }
        }
        wsp_gguf_add_tensor(ctx, t);
    }
    const std::string path = ::testing::TempDir() + "wsp_gguf_buffer.gguf";
    EXPECT_TRUE(wsp_gguf_write_to_file(ctx, path.c_str(), false));
    wsp_gguf_free(ctx);
    std::ifstream f(path, std::ios::binary);
    Bytes         bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    return bytes;
}

TEST(GgufBuffer, ReadsWhatTheFileHoldsAndCopiesTheData) {
    wsp_ggml_context * data  = wsp_ggml_init({ 1 << 20, nullptr, false });
    Bytes              bytes = sample_file(data);
    ASSERT_GT(bytes.size(), 0u);

    wsp_ggml_context * loaded = nullptr;
    wsp_gguf_context * ctx    = wsp_gguf_init_from_buffer(bytes.data(), bytes.size(), { false, &loaded });
    ASSERT_NE(ctx, nullptr);
    ASSERT_NE(loaded, nullptr);
    std::fill(bytes.begin(), bytes.end(), 0xff); // the buffer is not needed after the call

    EXPECT_STREQ(wsp_gguf_get_val_str(ctx, wsp_gguf_find_key(ctx, "general.name")), "from a buffer");
    EXPECT_EQ(wsp_gguf_get_val_u32(ctx, wsp_gguf_find_key(ctx, "sample.count")), 42u);
    ASSERT_EQ(wsp_gguf_get_n_tensors(ctx), 3);
    for (int i = 0; i < 3; ++i) {
        const std::string name = "t" + std::to_string(i);
        wsp_ggml_tensor * want = wsp_ggml_get_tensor(data, name.c_str());
        wsp_ggml_tensor * got  = wsp_ggml_get_tensor(loaded, name.c_str());
        ASSERT_NE(got, nullptr) << name;
        EXPECT_EQ(got->type, want->type) << name;
        EXPECT_EQ(got->ne[0], want->ne[0]) << name;
        EXPECT_EQ(got->ne[1], want->ne[1]) << name;
        ASSERT_EQ(wsp_ggml_nbytes(got), wsp_ggml_nbytes(want)) << name;
        EXPECT_EQ(std::memcmp(got->data, want->data, wsp_ggml_nbytes(want)), 0) << name;
    }
    wsp_gguf_free(ctx);
    wsp_ggml_free(loaded);
    wsp_ggml_free(data);
}

TEST(GgufBuffer, MetadataOnlyGivesTensorsWithoutData) {
    wsp_ggml_context * data   = wsp_ggml_init({ 1 << 20, nullptr, false });
    const Bytes        bytes  = sample_file(data);
    wsp_ggml_context * loaded = nullptr;
    wsp_gguf_context * ctx    = wsp_gguf_init_from_buffer(bytes.data(), bytes.size(), { true, &loaded });
    ASSERT_NE(ctx, nullptr);
    ASSERT_NE(loaded, nullptr);
    wsp_ggml_tensor * t = wsp_ggml_get_tensor(loaded, "t1");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->data, nullptr);
    EXPECT_EQ(t->type, WSP_GGML_TYPE_Q8_0);
    EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, 1), (size_t) 64); // 15 floats padded to 32, then aligned
    wsp_gguf_free(ctx);
    wsp_ggml_free(loaded);
    wsp_ggml_free(data);
}

void expect_refused(const void * p, size_t n, const char * why) {
    wsp::test::LogCapture log;
    wsp_ggml_context *    loaded = nullptr;
    wsp_gguf_context *    ctx    = wsp_gguf_init_from_buffer(p, n, { false, &loaded });
    EXPECT_EQ(ctx, nullptr) << why;
    EXPECT_EQ(loaded, nullptr) << why;
    EXPECT_GE(log.count(WSP_GGML_LOG_LEVEL_ERROR), 1) << why;
    wsp_gguf_free(ctx);
}

TEST(GgufBuffer, RefusesNullEmptyBadMagicAndEveryTruncation) {
    wsp_ggml_context * data  = wsp_ggml_init({ 1 << 20, nullptr, false });
    Bytes              bytes = sample_file(data);
    expect_refused(nullptr, 100, "NULL");
    expect_refused(bytes.data(), 0, "empty");
    for (size_t n = 1; n < bytes.size(); n += (n < 400 ? 1 : 97)) {
        expect_refused(bytes.data(), n, ("truncated to " + std::to_string(n)).c_str());
    }
    bytes[0] = 'X';
    expect_refused(bytes.data(), bytes.size(), "bad magic");
    wsp_ggml_free(data);
}

} // namespace
