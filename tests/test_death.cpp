// Programmer errors abort with a message that says what went wrong: the op, the tensors and
// their shapes (or, for a full context, the sizes involved). Each case runs in a child process.

#include "test_util.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

class Death : public ::testing::Test {
protected:
    void SetUp() override {
        // re-executing the test binary keeps the child free of the parent's threads
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true });
    }

    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_tensor * t(const char * name, wsp_ggml_type type, std::vector<int64_t> ne) {
        ne.resize(4, 1);
        wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx_, type, 4, ne.data());
        wsp_ggml_set_name(r, name);
        return r;
    }

    wsp_ggml_context * ctx_ = nullptr;
};

TEST_F(Death, FullContextNamesTheSizes) {
    EXPECT_DEATH(
        {
            wsp_ggml_context * small = wsp_ggml_init({ 3 * wsp_ggml_tensor_overhead() + 100, nullptr, false });
            for (int i = 0; i < 4; ++i) {
                wsp_ggml_new_tensor_1d(small, WSP_GGML_TYPE_F32, 64);
            }
        },
        "context memory is full: tensor of 592 bytes needs 624 bytes with its header, but only [0-9]+ of the "
        "context's [0-9]+ bytes are free");
    EXPECT_DEATH(
        {
            wsp_ggml_context * meta = wsp_ggml_init({ wsp_ggml_graph_overhead() - 16, nullptr, true });
            wsp_ggml_new_graph(meta);
        },
        "context memory is full: graph of [0-9]+ bytes");
}

TEST_F(Death, MulMatShapeMismatch) {
    wsp_ggml_tensor * a = t("w", WSP_GGML_TYPE_F16, { 4, 3 });
    wsp_ggml_tensor * b = t("x", WSP_GGML_TYPE_F32, { 5, 2 });
    EXPECT_DEATH(
        wsp_ggml_mul_mat(ctx_, a, b),
        "wsp_ggml_mul_mat: invalid arguments \\(a = 'w' \\(f16 \\[4, 3, 1, 1\\]\\), b = 'x' \\(f32 \\[5, 2, 1, "
        "1\\]\\)\\): a->ne\\[0\\] == b->ne\\[0\\]");
    wsp_ggml_tensor * c = t("y", WSP_GGML_TYPE_F32, { 4, 2, 3 });
    wsp_ggml_tensor * d = t("z", WSP_GGML_TYPE_F32, { 4, 2, 2 });
    EXPECT_DEATH(wsp_ggml_mul_mat(ctx_, c, d), "wsp_ggml_mul_mat: .*'y' \\(f32 \\[4, 2, 3, 1\\]\\).*'z'.*ne\\[2\\]");
}

TEST_F(Death, AddNotBroadcastable) {
    wsp_ggml_tensor * a = t("a", WSP_GGML_TYPE_F32, { 6, 4 });
    wsp_ggml_tensor * b = t("b", WSP_GGML_TYPE_F32, { 4, 4 });
    EXPECT_DEATH(wsp_ggml_add(ctx_, a, b),
                 "wsp_ggml_add: invalid arguments \\(a = 'a' \\(f32 \\[6, 4, 1, 1\\]\\), b = 'b' \\(f32 \\[4, 4, 1, "
                 "1\\]\\)\\): wsp_ggml_can_repeat\\(b, a\\)");
    EXPECT_DEATH(wsp_ggml_mul(ctx_, b, t("c", WSP_GGML_TYPE_F32, { 4, 3 })),
                 "wsp_ggml_mul: .*'c' \\(f32 \\[4, 3, 1, 1\\]\\)");
}

TEST_F(Death, ConcatShapeMismatch) {
    wsp_ggml_tensor * a = t("a", WSP_GGML_TYPE_F32, { 3, 4 });
    wsp_ggml_tensor * b = t("b", WSP_GGML_TYPE_F32, { 3, 5 });
    EXPECT_DEATH(wsp_ggml_concat(ctx_, a, b, 0),
                 "wsp_ggml_concat: invalid arguments \\(a = 'a' \\(f32 \\[3, 4, 1, 1\\]\\), b = 'b' \\(f32 \\[3, 5, 1, "
                 "1\\]\\)\\): a->ne\\[d\\] == b->ne\\[d\\]");
    EXPECT_DEATH(wsp_ggml_concat(ctx_, a, t("h", WSP_GGML_TYPE_F16, { 3, 4 }), 1), "wsp_ggml_concat: .*'h' \\(f16");
}

TEST_F(Death, GetRowsNeedsI32Indices) {
    wsp_ggml_tensor * a = t("emb", WSP_GGML_TYPE_F16, { 8, 10 });
    wsp_ggml_tensor * b = t("ids", WSP_GGML_TYPE_F32, { 3 });
    EXPECT_DEATH(wsp_ggml_get_rows(ctx_, a, b),
                 "wsp_ggml_get_rows: invalid arguments \\(a = 'emb' \\(f16 \\[8, 10, 1, 1\\]\\), b = 'ids' \\(f32 "
                 "\\[3, 1, 1, 1\\]\\)\\): b->type == WSP_GGML_TYPE_I32");
}

TEST_F(Death, SoftMaxMaskShape) {
    wsp_ggml_tensor * a    = t("kq", WSP_GGML_TYPE_F32, { 32, 10, 4 });
    wsp_ggml_tensor * mask = t("mask", WSP_GGML_TYPE_F16, { 31, 64 });
    EXPECT_DEATH(wsp_ggml_soft_max_ext(ctx_, a, mask, 1.0f, 0.0f),
                 "wsp_ggml_soft_max_ext: invalid arguments \\(a = 'kq' \\(f32 \\[32, 10, 4, 1\\]\\), b = 'mask' \\(f16 "
                 "\\[31, 64, 1, 1\\]\\)\\): mask->ne\\[0\\] == a->ne\\[0\\]");
    wsp_ggml_tensor * short_mask = t("m2", WSP_GGML_TYPE_F32, { 32, 8 });
    EXPECT_DEATH(wsp_ggml_soft_max_ext(ctx_, a, short_mask, 1.0f, 0.0f), "'m2' \\(f32 \\[32, 8, 1, 1\\]\\).*ne\\[1\\]");
}

TEST_F(Death, FlashAttnHeadSizeMismatch) {
    wsp_ggml_tensor * q = t("q", WSP_GGML_TYPE_F32, { 64, 10, 8 });
    wsp_ggml_tensor * k = t("k", WSP_GGML_TYPE_F16, { 80, 32, 8 });
    wsp_ggml_tensor * v = t("v", WSP_GGML_TYPE_F16, { 64, 32, 8 });
    EXPECT_DEATH(wsp_ggml_flash_attn_ext(ctx_, q, k, v, nullptr, 0.125f, 0.0f, 0.0f),
                 "wsp_ggml_flash_attn_ext: invalid arguments \\(a = 'q' \\(f32 \\[64, 10, 8, 1\\]\\), b = 'k' \\(f16 "
                 "\\[80, 32, 8, 1\\]\\), c = 'v' \\(f16 \\[64, 32, 8, 1\\]\\)\\): k->ne\\[0\\] == q->ne\\[0\\]");
}

TEST_F(Death, ReshapeToAnotherElementCount) {
    wsp_ggml_tensor * a = t("x", WSP_GGML_TYPE_F32, { 6, 4 });
    EXPECT_DEATH(wsp_ggml_reshape_2d(ctx_, a, 5, 5),
                 "wsp_ggml_reshape_2d: cannot reshape 'x' \\(f32 \\[6, 4, 1, 1\\]\\) \\(24 elements\\) to 25 elements");
    wsp_ggml_tensor * p = wsp_ggml_transpose(ctx_, a);
    EXPECT_DEATH(wsp_ggml_reshape_1d(ctx_, p, 24), "wsp_ggml_reshape_1d: .*\\[4, 6, 1, 1\\].*is_contiguous");
}

TEST_F(Death, PermuteWithRepeatedAxes) {
    wsp_ggml_tensor * a = t("x", WSP_GGML_TYPE_F32, { 6, 4, 2 });
    EXPECT_DEATH(wsp_ggml_permute(ctx_, a, 0, 0, 1, 2),
                 "wsp_ggml_permute: axes \\(0, 0, 1, 2\\) of 'x' \\(f32 \\[6, 4, 2, 1\\]\\) are not a permutation");
    EXPECT_DEATH(wsp_ggml_permute(ctx_, a, 0, 1, 2, 4), "wsp_ggml_permute: axes \\(0, 1, 2, 4\\)");
}

TEST_F(Death, ViewOutOfBounds) {
    wsp_ggml_tensor * a = t("src", WSP_GGML_TYPE_F32, { 10, 4 });
    EXPECT_DEATH(wsp_ggml_view_1d(ctx_, a, 8, 140),
                 "wsp_ggml_view_1d: .*offset 140.*'src' \\(f32 \\[10, 4, 1, 1\\]\\) \\(160 bytes\\)");
    EXPECT_DEATH(wsp_ggml_view_2d(ctx_, a, 10, 4, 44, 0), "wsp_ggml_view_2d: .*'src' \\(f32 \\[10, 4, 1, 1\\]\\)");
    wsp_ggml_tensor * v = wsp_ggml_view_1d(ctx_, a, 20, 40);
    EXPECT_DEATH(wsp_ggml_view_1d(ctx_, v, 8, 120), "wsp_ggml_view_1d: .*offset");
}

TEST_F(Death, GraphFullNamesTheTensor) {
    EXPECT_DEATH(
        {
            wsp_ggml_cgraph * g = wsp_ggml_new_graph_custom(ctx_, 3, false);
            wsp_ggml_tensor * x = t("x", WSP_GGML_TYPE_F32, { 4 });
            for (int i = 0; i < 3; ++i) {
                x = wsp_ggml_sqr(ctx_, x);
            }
            wsp_ggml_set_name(x, "last");
            wsp_ggml_build_forward_expand(g, wsp_ggml_sqrt(ctx_, x));
        },
        "graph is full: it holds 3 nodes.*f32 \\[4, 1, 1, 1\\]");
}

TEST_F(Death, OtherMisuse) {
    wsp_ggml_context * data = wsp_ggml_init({ 1 << 12, nullptr, false });
    wsp_ggml_tensor *  a    = wsp_ggml_new_tensor_2d(data, WSP_GGML_TYPE_F32, 5, 3);
    wsp_ggml_set_name(a, "a");
    EXPECT_DEATH(wsp_ggml_get_f32_1d(a, 15), "wsp_ggml_get_f32_1d: index 15 is out of the 15 elements of 'a'");
    EXPECT_DEATH(wsp_ggml_set_i32_1d(a, -1, 0), "wsp_ggml_set_i32_1d: index -1");
    EXPECT_DEATH(wsp_ggml_get_f32_1d(t("meta", WSP_GGML_TYPE_F32, { 2 }), 0), "'meta' .* has no host data");
    EXPECT_DEATH(wsp_ggml_new_tensor_1d(data, (wsp_ggml_type) 4, 8), "invalid tensor type id 4");
    EXPECT_DEATH(wsp_ggml_new_tensor_1d(data, WSP_GGML_TYPE_Q4_0, 48),
                 "48 elements is not a multiple of the q4_0 block size 32");
    EXPECT_DEATH(wsp_ggml_cast(ctx_, t("r", WSP_GGML_TYPE_F32, { 40 }), WSP_GGML_TYPE_Q8_0),
                 "wsp_ggml_cast: rows of 'r'");
    EXPECT_DEATH(wsp_ggml_cpy(ctx_, a, t("d", WSP_GGML_TYPE_F16, { 4, 4 })),
                 "wsp_ggml_cpy: .*'a' \\(f32 \\[5, 3, 1, 1\\]\\).*'d'");
    wsp_ggml_cgraph * g = wsp_ggml_new_graph(ctx_);
    EXPECT_DEATH(wsp_ggml_graph_node(g, 0), "wsp_ggml_graph_node: index out of range \\(the graph has 0 nodes\\)");
    wsp_ggml_free(data);
}

} // namespace
} // namespace wsp::test
