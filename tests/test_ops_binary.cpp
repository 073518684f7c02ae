// ADD, SUB, MUL, DIV (b broadcast over a in every dim) and MEAN on the CPU backend, for F32,
// F16 and BF16 operands, contiguous, permuted and strided layouts, with 1 and 2 threads,
// against double-precision references computed from the values the kernels read.

#include "test_util.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

using BinFn = wsp_ggml_tensor * (*) (wsp_ggml_context *, wsp_ggml_tensor *, wsp_ggml_tensor *);

struct BinOp {
    const char * name;
    BinFn        fn;
    double (*ref)(double, double);
};

const BinOp BIN_OPS[] = {
    { "add", wsp_ggml_add, [](double x, double y) { return x + y; } },
    { "sub", wsp_ggml_sub, [](double x, double y) { return x - y; } },
    { "mul", wsp_ggml_mul, [](double x, double y) { return x * y; } },
    { "div", wsp_ggml_div, [](double x, double y) { return x / y; } },
};

struct BinShape {
    std::vector<int64_t> a, b;
    Layout               la, lb;
};

std::vector<BinShape> bin_shapes() {
    const Layout C = Layout::Contiguous, P = Layout::Permuted, S = Layout::Strided;
    return {
        { { 1 }, { 1 }, C, C },
        { { 7 }, { 7 }, C, C },
        { { 31, 5 }, { 31, 5 }, C, C },
        { { 97, 3 }, { 97, 3 }, C, C },
        { { 33, 3, 2, 2 }, { 33, 3, 2, 2 }, C, C },
        { { 33, 3, 2, 2 }, { 1, 3, 2, 2 }, C, C },  // b broadcast in dim 0
        { { 33, 3, 2, 2 }, { 33, 1, 2, 2 }, C, C }, // dim 1
        { { 33, 3, 2, 2 }, { 33, 3, 1, 2 }, C, C }, // dim 2
        { { 33, 3, 2, 2 }, { 33, 3, 2, 1 }, C, C }, // dim 3
        { { 33, 3, 2, 2 }, { 1, 1, 1, 1 }, C, C },  // every dim
        { { 34, 5, 2 }, { 17, 1, 2 }, C, C },       // b repeated along its rows
        { { 33, 5, 2 }, { 33, 5, 2 }, P, C },
        { { 33, 5, 2 }, { 33, 5, 2 }, C, P },
        { { 31, 4, 3 }, { 31, 1, 3 }, S, S },
        { { 13, 6 }, { 13, 6 }, P, S },
    };
}

// b's flat index for a's element (i0, i1, i2, i3)
size_t broadcast_index(const wsp_ggml_tensor * a, const wsp_ggml_tensor * b, size_t flat) {
    int64_t i[4];
    wsp_ggml_unravel_index(a, (int64_t) flat, &i[0], &i[1], &i[2], &i[3]);
    return flat_index(b, i[0] % b->ne[0], i[1] % b->ne[1], i[2] % b->ne[2], i[3] % b->ne[3]);
}

struct TypePair {
    wsp_ggml_type a, b;
};

class BinaryTest : public ::testing::TestWithParam<TypePair> {};

TEST_P(BinaryTest, MatchesTheReferenceInEveryLayoutAndBroadcast) {
    const TypePair tp = GetParam();
    for (const BinOp & op : BIN_OPS) {
        for (const BinShape & s : bin_shapes()) {
            Graph             g;
            wsp_ggml_tensor * a   = make_operand(g, tp.a, s.a, s.la);
            wsp_ggml_tensor * b   = make_operand(g, tp.b, s.b, s.lb);
            wsp_ggml_tensor * out = op.fn(g.ctx(), a, b);
            g.build(out);
            fill_inputs(g, 100, 0.5f, 1.5f);
            const std::vector<float> va = get_values(a), vb = get_values(b);
            std::vector<double>      ref(va.size());
            for (size_t i = 0; i < va.size(); ++i) { // values in [0.5, 1.5]: div is tame, sub cancels
                ref[i] = op.ref(va[i], vb[broadcast_index(a, b, i)]);
            }
            // the kernel computes in float and stores in a's type
            const double rtol = type_eps(tp.a) + 1e-7;
            for (int n_threads : { 1, 2 }) {
                ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                const std::string what = std::string(op.name) + " " + shape_str(a) + " " + layout_name(s.la) + " by " +
                                         shape_str(b) + " " + layout_name(s.lb) + ", threads " +
                                         std::to_string(n_threads);
                if (!all_close(get_values(out), ref, 1e-7, rtol, what)) {
                    return;
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, BinaryTest,
                         ::testing::Values(TypePair{ WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F32 },
                                           TypePair{ WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F16 },
                                           TypePair{ WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_BF16 },
                                           TypePair{ WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F32 },
                                           TypePair{ WSP_GGML_TYPE_F32, WSP_GGML_TYPE_BF16 },
                                           TypePair{ WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_F16 }),
                         [](const auto & info) {
                             return std::string(wsp_ggml_type_name(info.param.a)) + "_" +
                                    wsp_ggml_type_name(info.param.b);
                         });

TEST(Binary, InPlaceVariantsWriteIntoA) {
    Graph             g;
    wsp_ggml_tensor * a   = g.input(WSP_GGML_TYPE_F32, { 19, 4 });
    wsp_ggml_tensor * b   = g.input(WSP_GGML_TYPE_F32, { 19, 1 });
    wsp_ggml_tensor * sum = wsp_ggml_add(g.ctx(), a, b);
    wsp_ggml_tensor * out = wsp_ggml_mul_inplace(g.ctx(), wsp_ggml_add_inplace(g.ctx(), sum, b), b);
    g.build(out);
    fill_inputs(g, 7);
    const std::vector<float> va = get_values(a), vb = get_values(b);
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(out->data, sum->data);
    std::vector<double> ref(va.size());
    for (size_t i = 0; i < va.size(); ++i) {
        const double y = vb[i % 19];
        ref[i]         = ((double) va[i] + y + y) * y;
    }
    all_close(get_values(out), ref, 1e-6, 1e-6, "add, add_inplace, mul_inplace");
}

TEST(Binary, LargeRowsSplitAcrossThreads) {
    Graph             g;
    wsp_ggml_tensor * a   = g.input(WSP_GGML_TYPE_F32, { 4099, 13 });
    wsp_ggml_tensor * b   = g.input(WSP_GGML_TYPE_F32, { 4099, 1 });
    wsp_ggml_tensor * out = wsp_ggml_sub(g.ctx(), a, b);
    g.build(out);
    fill_inputs(g, 3);
    const std::vector<float> va = get_values(a), vb = get_values(b);
    std::vector<double>      ref(va.size());
    for (size_t i = 0; i < va.size(); ++i) {
        ref[i] = (double) va[i] - vb[i % 4099];
    }
    for (int n_threads : { 1, 2, 3 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
        all_close(get_values(out), ref, 1e-7, 1e-7, "sub, threads " + std::to_string(n_threads));
    }
}

TEST(Binary, EmptyTensorsComputeNothing) {
    Graph             g;
    wsp_ggml_tensor * a    = g.input(WSP_GGML_TYPE_F32, { 0, 3 });
    wsp_ggml_tensor * b    = g.input(WSP_GGML_TYPE_F16, { 0, 1 });
    wsp_ggml_tensor * sum  = wsp_ggml_add(g.ctx(), a, b);
    wsp_ggml_tensor * mean = wsp_ggml_mean(g.ctx(), sum);
    wsp_ggml_tensor * half = wsp_ggml_cast(g.ctx(), sum, WSP_GGML_TYPE_F16);
    wsp_ggml_tensor * keep = g.input(WSP_GGML_TYPE_F32, { 4 });
    wsp_ggml_tensor * out  = wsp_ggml_mul(g.ctx(), keep, keep);
    g.build(out, { mean, half });
    fill_inputs(g, 1);
    const std::vector<float> vk = get_values(keep);
    EXPECT_EQ(wsp_ggml_nelements(sum), 0);
    EXPECT_EQ(wsp_ggml_nelements(half), 0);
    for (int n_threads : { 1, 2 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
        std::vector<double> ref(4);
        for (size_t i = 0; i < 4; ++i) {
            ref[i] = (double) vk[i] * vk[i];
        }
        all_close(get_values(out), ref, 1e-7, 1e-7, "non-empty node next to empty ones");
    }
}

class MeanTest : public ::testing::TestWithParam<wsp_ggml_type> {};

TEST_P(MeanTest, RowMeans) {
    const wsp_ggml_type type = GetParam();
    struct Case {
        std::vector<int64_t> ne;
        Layout               layout;
    };
    const Case cases[] = {
        { { 1 }, Layout::Contiguous },         { { 7, 3 }, Layout::Contiguous },
        { { 100, 5, 2 }, Layout::Contiguous }, { { 33, 5, 2, 3 }, Layout::Contiguous },
        { { 33, 5, 2 }, Layout::Permuted },    { { 31, 4, 3 }, Layout::Strided },
        { { 5000, 3 }, Layout::Contiguous },
    };
    for (const Case & c : cases) {
        Graph             g;
        wsp_ggml_tensor * a   = make_operand(g, type, c.ne, c.layout);
        wsp_ggml_tensor * out = wsp_ggml_mean(g.ctx(), a);
        g.build(out);
        fill_inputs(g, 5, -1.0f, 2.0f);
        const std::vector<float> va  = get_values(a);
        const int64_t            ne0 = a->ne[0];
        std::vector<double>      ref((size_t) wsp_ggml_nrows(a), 0.0);
        for (size_t i = 0; i < va.size(); ++i) {
            ref[i / (size_t) ne0] += va[i] / (double) ne0;
        }
        for (int n_threads : { 1, 2 }) {
            ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
            all_close(get_values(out), ref, 1e-7, 1e-6,
                      "mean " + shape_str(a) + " " + layout_name(c.layout) + " threads " + std::to_string(n_threads));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, MeanTest, ::testing::ValuesIn(float_types()),
                         [](const auto & info) { return std::string(wsp_ggml_type_name(info.param)); });

} // namespace
} // namespace wsp::test
