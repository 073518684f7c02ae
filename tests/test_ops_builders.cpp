// Op builders record an op without computing it: for valid inputs each must give the result
// shape and type of the ggml contract, link its sources, and store its parameters where the
// kernels (and other backends) read them.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>

namespace wsp::test {
namespace {

class Builders : public ::testing::Test {
protected:
    void SetUp() override { ctx_ = wsp_ggml_init({ 256 * wsp_ggml_tensor_overhead(), nullptr, true }); }

    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_tensor * t(wsp_ggml_type type, std::vector<int64_t> ne) {
        ne.resize(4, 1);
        return wsp_ggml_new_tensor(ctx_, type, 4, ne.data());
    }

    static void expect_shape(const wsp_ggml_tensor * r, std::vector<int64_t> ne) {
        ne.resize(4, 1);
        for (int i = 0; i < 4; ++i) {
            EXPECT_EQ(r->ne[i], ne[(size_t) i]) << "dim " << i << " of " << shape_str(r);
        }
    }

    static float param_f32(const wsp_ggml_tensor * r, int i) {
        float v;
        std::memcpy(&v, &r->op_params[i], 4);
        return v;
    }

    wsp_ggml_context * ctx_ = nullptr;
};

TEST_F(Builders, BinaryOpsKeepTheShapeOfA) {
    wsp_ggml_tensor * a = t(WSP_GGML_TYPE_F16, { 6, 4, 3, 2 });
    wsp_ggml_tensor * b = t(WSP_GGML_TYPE_F32, { 3, 1, 3, 1 });
    using Fn            = wsp_ggml_tensor * (*) (wsp_ggml_context *, wsp_ggml_tensor *, wsp_ggml_tensor *);
    const std::pair<Fn, wsp_ggml_op> ops[] = {
        { wsp_ggml_add, WSP_GGML_OP_ADD },         { wsp_ggml_sub, WSP_GGML_OP_SUB },
        { wsp_ggml_mul, WSP_GGML_OP_MUL },         { wsp_ggml_div, WSP_GGML_OP_DIV },
        { wsp_ggml_add_inplace, WSP_GGML_OP_ADD }, { wsp_ggml_mul_inplace, WSP_GGML_OP_MUL },
    };
    for (size_t k = 0; k < std::size(ops); ++k) {
        wsp_ggml_tensor * r = ops[k].first(ctx_, a, b);
        SCOPED_TRACE(wsp_ggml_op_name(ops[k].second));
        EXPECT_EQ(r->op, ops[k].second);
        EXPECT_EQ(r->type, a->type);
        expect_shape(r, { 6, 4, 3, 2 });
        EXPECT_EQ(r->src[0], a);
        EXPECT_EQ(r->src[1], b);
        EXPECT_EQ(r->src[2], nullptr);
        EXPECT_EQ(r->view_src, k >= 4 ? a : nullptr); // in-place results are views of a
    }
}

TEST_F(Builders, UnaryScaleNormAndReductions) {
    wsp_ggml_tensor * a = t(WSP_GGML_TYPE_F32, { 7, 5, 2 });
    wsp_ggml_tensor * g = wsp_ggml_gelu(ctx_, a);
    EXPECT_EQ(g->op, WSP_GGML_OP_UNARY);
    EXPECT_EQ(wsp_ggml_get_unary_op(g), WSP_GGML_UNARY_OP_GELU);
    EXPECT_STREQ(wsp_ggml_op_desc(g), "GELU");
    EXPECT_EQ(wsp_ggml_gelu_inplace(ctx_, a)->view_src, a);
    EXPECT_EQ(wsp_ggml_get_unary_op(wsp_ggml_unary(ctx_, a, WSP_GGML_UNARY_OP_TANH)), WSP_GGML_UNARY_OP_TANH);
    EXPECT_EQ(wsp_ggml_get_unary_op(wsp_ggml_relu(ctx_, a)), WSP_GGML_UNARY_OP_RELU);
    EXPECT_EQ(wsp_ggml_get_unary_op(wsp_ggml_sigmoid(ctx_, a)), WSP_GGML_UNARY_OP_SIGMOID);
    EXPECT_EQ(wsp_ggml_sqr(ctx_, a)->op, WSP_GGML_OP_SQR);
    EXPECT_EQ(wsp_ggml_sqrt(ctx_, a)->op, WSP_GGML_OP_SQRT);
    EXPECT_EQ(wsp_ggml_dup(ctx_, a)->op, WSP_GGML_OP_DUP);

    wsp_ggml_tensor * s = wsp_ggml_scale(ctx_, a, 0.125f);
    EXPECT_EQ(s->op, WSP_GGML_OP_SCALE);
    EXPECT_EQ(param_f32(s, 0), 0.125f);
    EXPECT_EQ(wsp_ggml_scale_inplace(ctx_, a, 2.0f)->view_src, a);

    wsp_ggml_tensor * n = wsp_ggml_norm(ctx_, a, 1e-5f);
    EXPECT_EQ(n->op, WSP_GGML_OP_NORM);
    EXPECT_EQ(param_f32(n, 0), 1e-5f);
    expect_shape(n, { 7, 5, 2 });

    wsp_ggml_tensor * h = t(WSP_GGML_TYPE_F16, { 7, 5, 2, 3 });
    wsp_ggml_tensor * m = wsp_ggml_mean(ctx_, h);
    EXPECT_EQ(m->op, WSP_GGML_OP_MEAN);
    EXPECT_EQ(m->type, WSP_GGML_TYPE_F32);
    expect_shape(m, { 1, 5, 2, 3 });
    EXPECT_EQ(m->src[0], h);
}

TEST_F(Builders, ConcatAlongEachDim) {
    for (int dim = 0; dim < 4; ++dim) {
        std::vector<int64_t> na = { 3, 4, 2, 5 }, nb = na;
        nb[(size_t) dim]        = 7;
        wsp_ggml_tensor *    a  = t(WSP_GGML_TYPE_BF16, na);
        wsp_ggml_tensor *    b  = t(WSP_GGML_TYPE_BF16, nb);
        wsp_ggml_tensor *    r  = wsp_ggml_concat(ctx_, a, b, dim);
        std::vector<int64_t> nr = na;
        nr[(size_t) dim] += 7;
        expect_shape(r, nr);
        EXPECT_EQ(r->op, WSP_GGML_OP_CONCAT);
        EXPECT_EQ(r->type, WSP_GGML_TYPE_BF16);
        EXPECT_EQ(r->op_params[0], dim);
        EXPECT_EQ(r->src[0], a);
        EXPECT_EQ(r->src[1], b);
    }
}

TEST_F(Builders, MulMatBroadcastsOverDims2And3) {
    wsp_ggml_tensor * w = t(WSP_GGML_TYPE_Q4_0, { 64, 10, 2, 1 });
    wsp_ggml_tensor * x = t(WSP_GGML_TYPE_F32, { 64, 7, 6, 3 });
    wsp_ggml_tensor * r = wsp_ggml_mul_mat(ctx_, w, x);
    EXPECT_EQ(r->op, WSP_GGML_OP_MUL_MAT);
    EXPECT_EQ(r->type, WSP_GGML_TYPE_F32);
    expect_shape(r, { 10, 7, 6, 3 });
    EXPECT_EQ(r->src[0], w);
    EXPECT_EQ(r->src[1], x);
    wsp_ggml_mul_mat_set_prec(r, WSP_GGML_PREC_F32);
    EXPECT_EQ(r->op_params[0], WSP_GGML_PREC_F32);
}

TEST_F(Builders, CpyIsAViewOfTheDestinationAndCastANewTensor) {
    wsp_ggml_tensor * a = t(WSP_GGML_TYPE_F32, { 8, 6 });
    wsp_ggml_tensor * b = t(WSP_GGML_TYPE_F16, { 6, 8 });
    wsp_ggml_set_name(b, "dst");
    wsp_ggml_tensor * c = wsp_ggml_cpy(ctx_, a, b);
    EXPECT_EQ(c->op, WSP_GGML_OP_CPY);
    EXPECT_EQ(c->view_src, b);
    EXPECT_EQ(c->view_offs, 0u);
    EXPECT_EQ(c->type, WSP_GGML_TYPE_F16);
    expect_shape(c, { 6, 8 });
    EXPECT_TRUE(wsp_ggml_are_same_stride(c, b));
    EXPECT_EQ(c->src[0], a);
    EXPECT_EQ(c->src[1], b);
    EXPECT_EQ(std::string(c->name).rfind("dst", 0), 0u);

    wsp_ggml_tensor * h = wsp_ggml_cast(ctx_, a, WSP_GGML_TYPE_BF16);
    EXPECT_EQ(h->type, WSP_GGML_TYPE_BF16);
    expect_shape(h, { 8, 6 });
    wsp_ggml_tensor * wide = t(WSP_GGML_TYPE_F32, { 64, 3 });
    wsp_ggml_tensor * q    = wsp_ggml_cast(ctx_, wide, WSP_GGML_TYPE_Q8_0);
    EXPECT_EQ(q->op, WSP_GGML_OP_CPY);
    EXPECT_EQ(q->type, WSP_GGML_TYPE_Q8_0);
    EXPECT_EQ(q->view_src, nullptr);
    expect_shape(q, { 64, 3 });
    EXPECT_EQ(q->src[0], wide);
    EXPECT_EQ(q->nb[1], 2u * 34u);
}

TEST_F(Builders, GetRows) {
    wsp_ggml_tensor * a = t(WSP_GGML_TYPE_Q5_1, { 64, 100 });
    wsp_ggml_tensor * i = t(WSP_GGML_TYPE_I32, { 9 });
    wsp_ggml_tensor * r = wsp_ggml_get_rows(ctx_, a, i);
    EXPECT_EQ(r->op, WSP_GGML_OP_GET_ROWS);
    EXPECT_EQ(r->type, WSP_GGML_TYPE_F32);
    expect_shape(r, { 64, 9 });
    EXPECT_EQ(r->src[0], a);
    EXPECT_EQ(r->src[1], i);
    // 3-D a [n_embd, rows, ne2] with b [n, ne2]
    wsp_ggml_tensor * a3 = t(WSP_GGML_TYPE_F16, { 5, 10, 4 });
    wsp_ggml_tensor * b2 = t(WSP_GGML_TYPE_I32, { 3, 4 });
    expect_shape(wsp_ggml_get_rows(ctx_, a3, b2), { 5, 3, 4 });
    wsp_ggml_tensor * ai = t(WSP_GGML_TYPE_I32, { 5, 10 });
    EXPECT_EQ(wsp_ggml_get_rows(ctx_, ai, i)->type, WSP_GGML_TYPE_I32);
}

TEST_F(Builders, SoftMaxAndFlashAttention) {
    wsp_ggml_tensor * kq   = t(WSP_GGML_TYPE_F32, { 32, 10, 4 });
    wsp_ggml_tensor * mask = t(WSP_GGML_TYPE_F16, { 32, 64 });
    wsp_ggml_tensor * sm   = wsp_ggml_soft_max_ext(ctx_, kq, mask, 0.5f, 8.0f);
    EXPECT_EQ(sm->op, WSP_GGML_OP_SOFT_MAX);
    expect_shape(sm, { 32, 10, 4 });
    EXPECT_EQ(sm->src[1], mask);
    EXPECT_EQ(param_f32(sm, 0), 0.5f);
    EXPECT_EQ(param_f32(sm, 1), 8.0f);
    EXPECT_EQ(wsp_ggml_soft_max(ctx_, kq)->src[1], nullptr);

    wsp_ggml_tensor * q  = t(WSP_GGML_TYPE_F32, { 64, 10, 6, 1 }); // [d, n_batch, n_head]
    wsp_ggml_tensor * k  = t(WSP_GGML_TYPE_F16, { 64, 32, 2, 1 }); // [d, n_kv, n_head_kv]
    wsp_ggml_tensor * v  = t(WSP_GGML_TYPE_F16, { 48, 32, 2, 1 }); // [d_v, n_kv, n_head_kv]
    wsp_ggml_tensor * fm = t(WSP_GGML_TYPE_F16, { 32, 64, 1, 1 }); // [n_kv, pad(n_batch)]
    wsp_ggml_tensor * fa = wsp_ggml_flash_attn_ext(ctx_, q, k, v, fm, 0.125f, 0.0f, 30.0f);
    EXPECT_EQ(fa->op, WSP_GGML_OP_FLASH_ATTN_EXT);
    EXPECT_EQ(fa->type, WSP_GGML_TYPE_F32);
    expect_shape(fa, { 48, 6, 10, 1 }); // [d_v, n_head, n_batch]: permuted
    EXPECT_EQ(fa->src[0], q);
    EXPECT_EQ(fa->src[1], k);
    EXPECT_EQ(fa->src[2], v);
    EXPECT_EQ(fa->src[3], fm);
    EXPECT_EQ(param_f32(fa, 0), 0.125f);
    EXPECT_EQ(param_f32(fa, 1), 0.0f);
    EXPECT_EQ(param_f32(fa, 2), 30.0f);
    EXPECT_EQ(wsp_ggml_flash_attn_ext_get_prec(fa), WSP_GGML_PREC_DEFAULT);
    wsp_ggml_flash_attn_ext_set_prec(fa, WSP_GGML_PREC_F32);
    EXPECT_EQ(wsp_ggml_flash_attn_ext_get_prec(fa), WSP_GGML_PREC_F32);
}

TEST_F(Builders, Im2colShapesAndParams) {
    // 1-D: a [KW, IC, OC], b [IW, IC, N] => [IC*KW, OW, N]
    wsp_ggml_tensor * k1 = t(WSP_GGML_TYPE_F16, { 3, 80, 384 });
    wsp_ggml_tensor * x1 = t(WSP_GGML_TYPE_F32, { 300, 80, 2 });
    wsp_ggml_tensor * c1 = wsp_ggml_im2col(ctx_, k1, x1, 2, 0, 1, 0, 1, 0, false, WSP_GGML_TYPE_F16);
    EXPECT_EQ(c1->op, WSP_GGML_OP_IM2COL);
    EXPECT_EQ(c1->type, WSP_GGML_TYPE_F16);
    expect_shape(c1, { 240, 150, 2 });
    const int32_t expect1[7] = { 2, 0, 1, 0, 1, 0, 0 };
    EXPECT_EQ(std::memcmp(c1->op_params, expect1, sizeof(expect1)), 0);
    // dilation 2, no padding: OW = (300 - 2 * 2 - 1) / 1 + 1 = 296
    expect_shape(wsp_ggml_im2col(ctx_, k1, x1, 1, 0, 0, 0, 2, 0, false, WSP_GGML_TYPE_F32), { 240, 296, 2 });

    // 2-D: a [KW, KH, IC, OC], b [IW, IH, IC, N] => [IC*KH*KW, OW, OH, N]
    wsp_ggml_tensor * k2 = t(WSP_GGML_TYPE_F16, { 3, 5, 4, 8 });
    wsp_ggml_tensor * x2 = t(WSP_GGML_TYPE_F32, { 17, 11, 4, 3 });
    wsp_ggml_tensor * c2 = wsp_ggml_im2col(ctx_, k2, x2, 2, 1, 1, 2, 1, 2, true, WSP_GGML_TYPE_F32);
    // OW = (17 + 2 - 2 - 1) / 2 + 1 = 9; OH = (11 + 4 - 2 * 4 - 1) / 1 + 1 = 7
    expect_shape(c2, { 60, 9, 7, 3 });
    const int32_t expect2[7] = { 2, 1, 1, 2, 1, 2, 1 };
    EXPECT_EQ(std::memcmp(c2->op_params, expect2, sizeof(expect2)), 0);
}

TEST_F(Builders, Conv1dFrontEndShapes) {
    // whisper's front end: kernel [3, 80, 384] over a mel [300, 80]
    wsp_ggml_tensor * k   = t(WSP_GGML_TYPE_F16, { 3, 80, 384 });
    wsp_ggml_tensor * mel = t(WSP_GGML_TYPE_F32, { 300, 80 });
    expect_shape(wsp_ggml_conv_1d(ctx_, k, mel, 1, 0, 1), { 298, 384, 1 });
    expect_shape(wsp_ggml_conv_1d(ctx_, k, mel, 1, 1, 1), { 300, 384, 1 });
    wsp_ggml_tensor * ph1 = wsp_ggml_conv_1d_ph(ctx_, k, mel, 1, 1);
    expect_shape(ph1, { 300, 384, 1 });
    EXPECT_EQ(ph1->type, WSP_GGML_TYPE_F32);
    wsp_ggml_tensor * h   = t(WSP_GGML_TYPE_F32, { 300, 384 });
    wsp_ggml_tensor * k2  = t(WSP_GGML_TYPE_F16, { 3, 384, 384 });
    wsp_ggml_tensor * ph2 = wsp_ggml_conv_1d_ph(ctx_, k2, h, 2, 1);
    expect_shape(ph2, { 150, 384, 1 });
    // the result is a reshape of a mul_mat of the im2col columns with the kernel
    ASSERT_EQ(ph2->op, WSP_GGML_OP_RESHAPE);
    const wsp_ggml_tensor * mm = ph2->src[0];
    ASSERT_EQ(mm->op, WSP_GGML_OP_MUL_MAT);
    EXPECT_EQ(mm->src[0]->view_src->op, WSP_GGML_OP_IM2COL);
}

TEST_F(Builders, PadReflectAndCustom) {
    wsp_ggml_tensor * a = t(WSP_GGML_TYPE_F32, { 10, 3, 2 });
    wsp_ggml_tensor * p = wsp_ggml_pad_reflect_1d(ctx_, a, 4, 9);
    EXPECT_EQ(p->op, WSP_GGML_OP_PAD_REFLECT_1D);
    expect_shape(p, { 23, 3, 2 });
    EXPECT_EQ(p->op_params[0], 4);
    EXPECT_EQ(p->op_params[1], 9);

    int                   user = 0;
    wsp_ggml_custom1_op_t fun  = [](wsp_ggml_tensor *, const wsp_ggml_tensor *, int, int, void *) {};
    wsp_ggml_tensor *     c    = wsp_ggml_map_custom1(ctx_, a, fun, 3, &user);
    EXPECT_EQ(c->op, WSP_GGML_OP_MAP_CUSTOM1);
    expect_shape(c, { 10, 3, 2 });
    EXPECT_EQ(c->src[0], a);
    EXPECT_EQ(c->view_src, nullptr);
    // upstream's parameter block: { fun, n_tasks, userdata }
    struct {
        wsp_ggml_custom1_op_t fun;
        int                   n_tasks;
        void *                userdata;
    } params;
    std::memcpy(&params, c->op_params, sizeof(params));
    EXPECT_EQ(params.fun, fun);
    EXPECT_EQ(params.n_tasks, 3);
    EXPECT_EQ(params.userdata, &user);
    EXPECT_EQ(wsp_ggml_map_custom1_inplace(ctx_, a, fun, WSP_GGML_N_TASKS_MAX, nullptr)->view_src, a);
}

} // namespace
} // namespace wsp::test
