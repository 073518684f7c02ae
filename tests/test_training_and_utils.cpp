// The training entry points stop the process with a message naming the function and saying that
// training is not supported (each in a child process); and the utilities of ggml.h: the graph in
// dot form (every node, leaf and edge), fopen, the layout predicates and type_sizef.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

class Training : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
        a_   = wsp_ggml_new_tensor_2d(ctx_, WSP_GGML_TYPE_F32, 8, 4);
        b_   = wsp_ggml_new_tensor_2d(ctx_, WSP_GGML_TYPE_F32, 8, 4);
    }
    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_context * ctx_ = nullptr;
    wsp_ggml_tensor *  a_   = nullptr;
    wsp_ggml_tensor *  b_   = nullptr;
};

std::string stop_message(const char * fn) {
    return std::string(fn) + ": training is not supported by this library";
}

TEST_F(Training, EveryEntryPointStopsWithAMessage) {
    wsp_ggml_cgraph *                                                 g           = wsp_ggml_new_graph(ctx_);
    int64_t                                                           ne[4]       = { 8, 4, 1, 1 };
    int                                                               sections[4] = { 1, 1, 1, 1 };
    const std::vector<std::pair<const char *, std::function<void()>>> calls       = {
              { "wsp_ggml_set_param", [&] { wsp_ggml_set_param(a_); } },
        { "wsp_ggml_set_loss", [&] { wsp_ggml_set_loss(a_); } },
        { "wsp_ggml_build_backward_expand", [&] { wsp_ggml_build_backward_expand(ctx_, g, nullptr); } },
        { "wsp_ggml_graph_get_grad", [&] { wsp_ggml_graph_get_grad(g, a_); } },
        { "wsp_ggml_graph_get_grad_acc", [&] { wsp_ggml_graph_get_grad_acc(g, a_); } },
        { "wsp_ggml_graph_reset", [&] { wsp_ggml_graph_reset(g); } },
        { "wsp_ggml_opt_step_adamw", [&] { wsp_ggml_opt_step_adamw(ctx_, a_, b_, a_, b_, a_); } },
        { "wsp_ggml_cross_entropy_loss", [&] { wsp_ggml_cross_entropy_loss(ctx_, a_, b_); } },
        { "wsp_ggml_cross_entropy_loss_back", [&] { wsp_ggml_cross_entropy_loss_back(ctx_, a_, b_, a_); } },
        { "wsp_ggml_silu_back", [&] { wsp_ggml_silu_back(ctx_, a_, b_); } },
        { "wsp_ggml_rms_norm_back", [&] { wsp_ggml_rms_norm_back(ctx_, a_, b_, 1e-5f); } },
        { "wsp_ggml_repeat_back", [&] { wsp_ggml_repeat_back(ctx_, a_, b_); } },
        { "wsp_ggml_get_rows_back", [&] { wsp_ggml_get_rows_back(ctx_, a_, b_, a_); } },
        { "wsp_ggml_soft_max_ext_back", [&] { wsp_ggml_soft_max_ext_back(ctx_, a_, b_, 1.0f, 0.0f); } },
        { "wsp_ggml_soft_max_ext_back_inplace", [&] { wsp_ggml_soft_max_ext_back_inplace(ctx_, a_, b_, 1.0f, 0.0f); } },
        { "wsp_ggml_rope_ext_back",
          [&] { wsp_ggml_rope_ext_back(ctx_, a_, b_, nullptr, 8, 0, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f); } },
        { "wsp_ggml_rope_multi_back",
          [&] {
              wsp_ggml_rope_multi_back(ctx_, a_, b_, nullptr, 8, sections, 0, 0, 1e4f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
          } },
        { "wsp_ggml_im2col_back", [&] { wsp_ggml_im2col_back(ctx_, a_, b_, ne, 1, 1, 0, 0, 1, 1, false); } },
        { "wsp_ggml_pool_2d_back",
          [&] { wsp_ggml_pool_2d_back(ctx_, a_, b_, WSP_GGML_OP_POOL_MAX, 2, 2, 2, 2, 0.0f, 0.0f); } },
        { "wsp_ggml_flash_attn_back", [&] { wsp_ggml_flash_attn_back(ctx_, a_, b_, a_, b_, false); } },
    };
    for (const auto & c : calls) {
        EXPECT_DEATH(c.second(), stop_message(c.first)) << c.first;
    }
}

std::string read_text(const std::string & path) {
    std::ifstream      f(path);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

size_t count_of(const std::string & text, const std::string & what) {
    size_t n = 0;
    for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) {
        ++n;
    }
    return n;
}

TEST(GraphDot, EveryNodeLeafAndEdgeIsWritten) {
    wsp_ggml_context * ctx =
        wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
    wsp_ggml_tensor * w = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F16, 8, 3);
    wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 8, 2);
    wsp_ggml_set_name(w, "weight|<w>");
    wsp_ggml_set_name(x, "input");
    wsp_ggml_tensor * y = wsp_ggml_gelu(ctx, wsp_ggml_mul_mat(ctx, w, x));
    wsp_ggml_set_name(y, "out");
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx);
    wsp_ggml_build_forward_expand(g, y);

    const std::string path = ::testing::TempDir() + "wsp_graph.dot";
    wsp_ggml_graph_dump_dot(g, nullptr, path.c_str());
    const std::string dot = read_text(path);
    EXPECT_EQ(dot.rfind("digraph G {", 0), 0u) << dot;
    EXPECT_EQ(dot.back(), '\n');
    EXPECT_EQ(count_of(dot, " -> "), 3u) << dot; // w, x -> mul_mat -> gelu
    EXPECT_EQ(count_of(dot, "shape=box"), 2u) << dot;
    EXPECT_EQ(count_of(dot, "shape=record"), 2u) << dot;
    EXPECT_NE(dot.find("MUL_MAT"), std::string::npos) << dot;
    EXPECT_NE(dot.find("GELU"), std::string::npos) << dot;
    EXPECT_NE(dot.find("weight\\|\\<w\\>"), std::string::npos) << "record syntax escaped: " << dot;
    EXPECT_NE(dot.find("f16 [8, 3, 1, 1]"), std::string::npos) << dot;

    // nodes of the forward graph gf drawn bold in gb
    wsp_ggml_graph_dump_dot(g, g, path.c_str());
    EXPECT_EQ(count_of(read_text(path), "style=bold"), 2u);
    std::remove(path.c_str());

    LogCapture log;
    wsp_ggml_graph_dump_dot(g, nullptr, "/nonexistent-dir/graph.dot");
    EXPECT_TRUE(log.contains("cannot open /nonexistent-dir/graph.dot"));
    wsp_ggml_free(ctx);
}

TEST(Utilities, FopenLayoutPredicatesAndTypeSizef) {
    const std::string path = ::testing::TempDir() + "wsp_fopen_\xce\xb4.txt"; // a UTF-8 name
    FILE *            f    = wsp_ggml_fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("ok", f);
    std::fclose(f);
    EXPECT_EQ(read_text(path), "ok");
    std::remove(path.c_str());
    EXPECT_EQ(wsp_ggml_fopen("/nonexistent-dir/x", "r"), nullptr);

    wsp_ggml_context * ctx = wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  t   = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, 5, 4, 3, 2); // [W, H, C, N]
    EXPECT_FALSE(wsp_ggml_is_contiguous_channels(t));
    EXPECT_TRUE(wsp_ggml_is_contiguously_allocated(t));
    // channel-last data [C, W, H, N] seen as [W, H, C, N]
    wsp_ggml_tensor * cl =
        wsp_ggml_permute(ctx, wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, 3, 5, 4, 2), 2, 0, 1, 3);
    EXPECT_EQ(cl->ne[0], 5);
    EXPECT_EQ(cl->ne[2], 3);
    EXPECT_TRUE(wsp_ggml_is_contiguous_channels(cl));
    EXPECT_TRUE(wsp_ggml_is_contiguously_allocated(cl)); // permuted, but no gaps
    EXPECT_FALSE(wsp_ggml_is_contiguous(cl));
    wsp_ggml_tensor * rows = wsp_ggml_view_2d(ctx, t, 3, 4, t->nb[1], 0); // 3 of 5 columns
    EXPECT_FALSE(wsp_ggml_is_contiguously_allocated(rows));
    wsp_ggml_free(ctx);

    // deprecated in the API (use wsp_ggml_row_size), still provided
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    EXPECT_DOUBLE_EQ(wsp_ggml_type_sizef(WSP_GGML_TYPE_F32), 4.0);
    EXPECT_DOUBLE_EQ(wsp_ggml_type_sizef(WSP_GGML_TYPE_F16), 2.0);
    EXPECT_DOUBLE_EQ(wsp_ggml_type_sizef(WSP_GGML_TYPE_Q8_0), 34.0 / 32.0);
    EXPECT_DOUBLE_EQ(wsp_ggml_type_sizef(WSP_GGML_TYPE_Q4_0), 18.0 / 32.0);
    EXPECT_DOUBLE_EQ(wsp_ggml_type_sizef((wsp_ggml_type) 4), 0.0); // a removed type id (Q4_2)
#pragma GCC diagnostic pop
}

} // namespace
} // namespace wsp::test
