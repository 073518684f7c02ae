// The math family's elementwise ops on the CPU against double references: the in-place forms of
// ggml.h's ops (computed in a's memory), LOG / SIN / COS / CLAMP / LEAKY_RELU / ADD1 over every
// float type and layout, add_cast into each float type, ACC and SET (and set_1d / set_2d) over
// strided views, DIAG and the causal masks, and the builders' shape errors.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

namespace wsp::test {
namespace {

using RefFn = std::function<double(double)>;

double sigmoid(double v) {
    return 1.0 / (1.0 + std::exp(-v));
}

std::vector<double> map_ref(const std::vector<float> & x, const RefFn & f) {
    std::vector<double> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        r[i] = f((double) x[i]);
    }
    return r;
}

// F32 results within a few float roundings; F16 / BF16 within one step of the stored type
double rtol_of(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 ? 2e-6 : type_eps(t);
}

// ---- in-place forms

struct InPlaceCase {
    const char *                                                            name;
    std::function<wsp_ggml_tensor *(wsp_ggml_context *, wsp_ggml_tensor *)> build;
    RefFn                                                                   ref;
};

TEST(MathInPlace, UnaryFormsComputeInAsMemory) {
    const std::vector<InPlaceCase> cases = {
        { "dup", wsp_ggml_dup_inplace, [](double v) { return v; } },
        { "sqr", wsp_ggml_sqr_inplace, [](double v) { return v * v; } },
        { "sqrt", wsp_ggml_sqrt_inplace, [](double v) { return std::sqrt(v); } },
        { "abs", wsp_ggml_abs_inplace, [](double v) { return std::fabs(v); } },
        { "sgn", wsp_ggml_sgn_inplace, [](double v) { return v > 0   ? 1.0
                                                             : v < 0 ? -1.0
                                                                     : 0.0; } },
        { "neg", wsp_ggml_neg_inplace, [](double v) { return -v; } },
        { "step", wsp_ggml_step_inplace, [](double v) { return v > 0 ? 1.0 : 0.0; } },
        { "tanh", wsp_ggml_tanh_inplace, [](double v) { return std::tanh(v); } },
        { "elu", wsp_ggml_elu_inplace, [](double v) { return v > 0 ? v : std::expm1(v); } },
        { "relu", wsp_ggml_relu_inplace, [](double v) { return v > 0 ? v : 0.0; } },
        { "sigmoid", wsp_ggml_sigmoid_inplace, sigmoid },
        { "gelu_erf", wsp_ggml_gelu_erf_inplace,
          [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); } },
        { "gelu_quick", wsp_ggml_gelu_quick_inplace, [](double v) { return v * sigmoid(1.702 * v); } },
        { "silu", wsp_ggml_silu_inplace, [](double v) { return v * sigmoid(v); } },
        { "exp", wsp_ggml_exp_inplace, [](double v) { return std::exp(v); } },
    };
    for (const InPlaceCase & c : cases) {
        SCOPED_TRACE(c.name);
        Graph  g;
        auto * a   = g.input(WSP_GGML_TYPE_F32, { 37, 5, 2 });
        auto * out = c.build(g.ctx(), a);
        EXPECT_EQ(out->view_src, a);
        g.build(out);
        const float              lo = std::strcmp(c.name, "sqrt") == 0 ? 0.0f : -3.0f;
        const std::vector<float> x  = random_values((size_t) wsp_ggml_nelements(a), 3, lo, 3.0f);
        set_values(a, x);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(out->data, a->data);
        all_close(get_values(a), map_ref(x, c.ref), 1e-6, 2e-6, c.name);
    }
}

TEST(MathInPlace, SubDivWithBroadcast) {
    for (bool sub : { true, false }) {
        Graph  g;
        auto * a   = g.input(WSP_GGML_TYPE_F32, { 37, 5, 2 });
        auto * b   = g.input(WSP_GGML_TYPE_F32, { 37, 1, 2 });
        auto * out = sub ? wsp_ggml_sub_inplace(g.ctx(), a, b) : wsp_ggml_div_inplace(g.ctx(), a, b);
        g.build(out);
        const std::vector<float> x = random_values(37 * 5 * 2, 4), y = random_values(37 * 2, 5, 0.5f, 2.0f);
        set_values(a, x);
        set_values(b, y);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(out->data, a->data);
        std::vector<double> ref(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            const size_t i0 = i % 37, i2 = i / (37 * 5);
            const double v = y[i2 * 37 + i0];
            ref[i]         = sub ? x[i] - v : x[i] / v;
        }
        all_close(get_values(out), ref, 1e-6, 2e-7, sub ? "sub_inplace" : "div_inplace");
    }
}

TEST(MathInPlace, SoftMax) {
    Graph  g;
    auto * a   = g.input(WSP_GGML_TYPE_F32, { 67, 3, 2 });
    auto * out = wsp_ggml_soft_max_inplace(g.ctx(), a);
    g.build(out);
    const std::vector<float> x = random_values(67 * 6, 6, -5.0f, 5.0f);
    set_values(a, x);
    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(out->data, a->data);
    std::vector<double> ref(x.size());
    for (size_t r = 0; r < 6; ++r) {
        double mx = -INFINITY, s = 0.0;
        for (size_t i = 0; i < 67; ++i) {
            mx = std::max(mx, (double) x[r * 67 + i]);
        }
        for (size_t i = 0; i < 67; ++i) {
            s += std::exp(x[r * 67 + i] - mx);
        }
        for (size_t i = 0; i < 67; ++i) {
            ref[r * 67 + i] = std::exp(x[r * 67 + i] - mx) / s;
        }
    }
    all_close(get_values(out), ref, 1e-7, 2e-6, "soft_max_inplace");
}

// ---- LOG, SIN, COS, CLAMP, LEAKY_RELU, ADD1

struct MapCase {
    const char *                                                                                      name;
    float                                                                                             lo, hi;
    std::function<wsp_ggml_tensor *(wsp_ggml_context *, wsp_ggml_tensor *, wsp_ggml_tensor * scalar)> build;
    RefFn                                                                                             ref;
};

const float ADD1_VALUE = 0.375f;

std::vector<MapCase> map_cases() {
    return {
        { "log", 0.05f, 4.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) { return wsp_ggml_log(c, a); },
          [](double v) { return std::log(v); } },
        { "log_inplace", 0.05f, 4.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) { return wsp_ggml_log_inplace(c, a); },
          [](double v) { return std::log(v); } },
        { "sin", -6.0f, 6.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) { return wsp_ggml_sin(c, a); },
          [](double v) { return std::sin(v); } },
        { "sin_inplace", -6.0f, 6.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) { return wsp_ggml_sin_inplace(c, a); },
          [](double v) { return std::sin(v); } },
        { "cos", -6.0f, 6.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) { return wsp_ggml_cos(c, a); },
          [](double v) { return std::cos(v); } },
        { "cos_inplace", -6.0f, 6.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) { return wsp_ggml_cos_inplace(c, a); },
          [](double v) { return std::cos(v); } },
        { "clamp", -2.0f, 2.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) {
              return wsp_ggml_clamp(c, a, -0.5f, 0.75f);
          },
          [](double v) { return v < -0.5   ? -0.5
                                : v > 0.75 ? 0.75
                                           : v; } },
        { "leaky_relu", -2.0f, 2.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) {
              return wsp_ggml_leaky_relu(c, a, 0.125f, false);
          },
          [](double v) { return v < 0 ? 0.125 * v : v; } },
        { "leaky_relu_inplace", -2.0f, 2.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor *) {
              return wsp_ggml_leaky_relu(c, a, 0.3f, true);
          },
          [](double v) { return v < 0 ? (double) 0.3f * v : v; } },
        { "add1", -2.0f, 2.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor * s) { return wsp_ggml_add1(c, a, s); },
          [](double v) { return v + ADD1_VALUE; } },
        { "add1_inplace", -2.0f, 2.0f,
          [](wsp_ggml_context * c, wsp_ggml_tensor * a, wsp_ggml_tensor * s) { return wsp_ggml_add1_inplace(c, a, s); },
          [](double v) { return v + ADD1_VALUE; } },
    };
}

TEST(MathMap, EveryOpTypeLayoutAndShape) {
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 1031, 3 }, { 7, 3, 2, 5 } };
    for (const MapCase & c : map_cases()) {
        const bool inplace = std::strstr(c.name, "inplace") != nullptr || std::strcmp(c.name, "clamp") == 0;
        for (wsp_ggml_type type : float_types()) {
            for (Layout layout : { Layout::Contiguous, Layout::Permuted, Layout::Strided }) {
                for (const auto & ne : shapes) {
                    SCOPED_TRACE(std::string(c.name) + " " + wsp_ggml_type_name(type) + " " + layout_name(layout) +
                                 " ne0 " + std::to_string(ne[0]));
                    Graph  g;
                    auto * a   = make_operand(g, type, ne, layout);
                    auto * s   = g.input(type == WSP_GGML_TYPE_F16 ? WSP_GGML_TYPE_F32 : type, { 1 });
                    auto * out = c.build(g.ctx(), a, s);
                    ASSERT_EQ(out->type, type);
                    EXPECT_EQ(out->view_src != nullptr, inplace);
                    g.build(out);
                    const std::vector<float> x =
                        round_trip(type, random_values((size_t) wsp_ggml_nelements(a), 7, c.lo, c.hi));
                    set_values(a, x);
                    if (s->data != nullptr) { // only ADD1's graph holds the scalar
                        set_values(s, { ADD1_VALUE });
                    }
                    ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
                    if (inplace) {
                        EXPECT_EQ(out->data, a->data);
                    }
                    all_close(get_values(out), map_ref(x, c.ref), 1e-6, rtol_of(type), c.name);
                }
            }
        }
    }
}

TEST(MathMap, ClampKeepsNaNAndInfinities) {
    Graph  g;
    auto * a   = g.input(WSP_GGML_TYPE_F32, { 4 });
    auto * out = wsp_ggml_clamp(g.ctx(), a, -1.0f, 1.0f);
    g.build(out);
    set_values(a, { NAN, INFINITY, -INFINITY, 0.5f });
    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> v = get_values(out);
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_EQ(v[1], 1.0f);
    EXPECT_EQ(v[2], -1.0f);
    EXPECT_EQ(v[3], 0.5f);
}

TEST(MathAddCast, EveryResultType) {
    for (wsp_ggml_type ta : float_types()) {
        for (wsp_ggml_type tr : float_types()) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(ta)) + " -> " + wsp_ggml_type_name(tr));
            Graph  g;
            auto * a   = make_operand(g, ta, { 67, 5, 3 }, Layout::Permuted);
            auto * b   = g.input(WSP_GGML_TYPE_F32, { 67, 1, 3 });
            auto * out = wsp_ggml_add_cast(g.ctx(), a, b, tr);
            ASSERT_EQ(out->type, tr);
            ASSERT_EQ(out->op, WSP_GGML_OP_ADD);
            g.build(out);
            const std::vector<float> x = round_trip(ta, random_values(67 * 15, 8)), y = random_values(67 * 3, 9);
            set_values(a, x);
            set_values(b, y);
            ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
            std::vector<double> ref(x.size());
            for (size_t i = 0; i < x.size(); ++i) {
                ref[i] = (double) x[i] + y[(i / (67 * 5)) * 67 + i % 67];
            }
            all_close(get_values(out), ref, 1e-6, rtol_of(tr), "add_cast");
        }
    }
}

// ---- ACC and SET

// the reference of ACC / SET over a contiguous a of n elements, b in logical order
std::vector<double> view_write_ref(const std::vector<float> & x, const wsp_ggml_tensor * a,
                                   const std::vector<float> & y, const wsp_ggml_tensor * b, size_t nb1, size_t nb2,
                                   size_t nb3, size_t offset, bool acc) {
    std::vector<double> r(x.begin(), x.end());
    const size_t        es = wsp_ggml_type_size(a->type);
    size_t              k  = 0;
    for (int64_t i3 = 0; i3 < b->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < b->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < b->ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < b->ne[0]; ++i0, ++k) {
                    const size_t e = (offset + i0 * es + i1 * nb1 + i2 * nb2 + i3 * nb3) / es;
                    r[e]           = acc ? r[e] + y[k] : (double) y[k];
                }
            }
        }
    }
    return r;
}

struct ViewWriteCase {
    std::vector<int64_t> a_ne, b_ne;
    int                  nb1_rows, nb2_rows; // view strides in rows of a (dims 1 and 2 of a)
    int64_t              offset_elems;
    wsp_ggml_type        a_type, b_type;
    Layout               b_layout;
};

void check_view_write(const ViewWriteCase & c, bool acc, bool inplace) {
    Graph             g;
    auto *            a   = g.input(c.a_type, c.a_ne);
    auto *            b   = make_operand(g, c.b_type, c.b_ne, c.b_layout);
    const size_t      nb1 = a->nb[1] * (size_t) c.nb1_rows, nb2 = a->nb[1] * (size_t) c.nb2_rows, nb3 = a->nb[3];
    const size_t      off = (size_t) c.offset_elems * wsp_ggml_type_size(c.a_type);
    wsp_ggml_tensor * out;
    if (acc) {
        out = inplace ? wsp_ggml_acc_inplace(g.ctx(), a, b, nb1, nb2, nb3, off)
                      : wsp_ggml_acc(g.ctx(), a, b, nb1, nb2, nb3, off);
    } else {
        out = inplace ? wsp_ggml_set_inplace(g.ctx(), a, b, nb1, nb2, nb3, off)
                      : wsp_ggml_set(g.ctx(), a, b, nb1, nb2, nb3, off);
    }
    EXPECT_EQ(out->op_params[4], inplace ? 1 : 0);
    g.build(out);
    const bool         ints = c.a_type == WSP_GGML_TYPE_I32;
    std::vector<float> x    = random_values((size_t) wsp_ggml_nelements(a), 10, -4.0f, 4.0f);
    std::vector<float> y    = random_values((size_t) wsp_ggml_nelements(b), 11, -4.0f, 4.0f);
    for (auto * v : { &x, &y }) {
        for (float & e : *v) {
            e = ints ? std::round(e * 1000.0f) : e;
        }
    }
    x = ints ? x : round_trip(c.a_type, x);
    y = ints ? y : round_trip(c.b_type, y);
    set_values(a, x);
    set_values(b, y);
    ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(out->data == a->data, inplace);
    const auto ref = view_write_ref(x, a, y, b, nb1, nb2, nb3, off, acc);
    all_close(get_values(out), ref, 1e-6, ints ? 0.0 : rtol_of(c.a_type), acc ? "acc" : "set");
    if (!inplace) {
        all_close(get_values(a), std::vector<double>(x.begin(), x.end()), 0.0, 0.0, "a is left as it was");
    }
}

TEST(MathAccSet, StridedViewsTypesAndInPlace) {
    const std::vector<ViewWriteCase> cases = {
        { { 10, 6, 3 }, { 4, 3, 2 }, 1, 6, 2 + 10 + 60, WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F32, Layout::Contiguous },
        { { 10, 6, 3 }, { 4, 3, 2 }, 2, 6, 3, WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F32, Layout::Permuted },
        { { 33, 7 }, { 31, 3 }, 2, 0, 1, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F32, Layout::Strided },
        { { 33, 7 }, { 5, 7 }, 1, 0, 28, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_BF16, Layout::Contiguous },
        { { 1 }, { 1 }, 1, 1, 0, WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F32, Layout::Contiguous },
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        for (bool acc : { true, false }) {
            for (bool inplace : { false, true }) {
                SCOPED_TRACE("case " + std::to_string(i) + (acc ? " acc" : " set") + (inplace ? " inplace" : ""));
                check_view_write(cases[i], acc, inplace);
            }
        }
    }
}

TEST(MathAccSet, SetOfI32) {
    for (bool inplace : { false, true }) {
        check_view_write({ { 10, 4 }, { 3, 2 }, 2, 0, 4, WSP_GGML_TYPE_I32, WSP_GGML_TYPE_I32, Layout::Permuted },
                         false, inplace);
    }
}

TEST(MathAccSet, Set1dAnd2d) {
    for (bool inplace : { false, true }) {
        Graph  g;
        auto * a  = g.input(WSP_GGML_TYPE_F32, { 20, 3 });
        auto * b1 = g.input(WSP_GGML_TYPE_F32, { 5 });
        auto * b2 = g.input(WSP_GGML_TYPE_F32, { 4, 2 });
        auto * s1 = inplace ? wsp_ggml_set_1d_inplace(g.ctx(), a, b1, 3 * 4) : wsp_ggml_set_1d(g.ctx(), a, b1, 3 * 4);
        auto * s2 = inplace ? wsp_ggml_set_2d_inplace(g.ctx(), s1, b2, 2 * a->nb[1], 20 * 4 - 4 * 4)
                            : wsp_ggml_set_2d(g.ctx(), s1, b2, 2 * a->nb[1], 20 * 4 - 4 * 4);
        g.build(s2);
        const std::vector<float> x = random_values(60, 12), y1 = random_values(5, 13), y2 = random_values(8, 14);
        set_values(a, x);
        set_values(b1, y1);
        set_values(b2, y2);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        std::vector<double> ref(x.begin(), x.end());
        for (int i = 0; i < 5; ++i) {
            ref[3 + i] = y1[i];
        }
        for (int r = 0; r < 2; ++r) {
            for (int i = 0; i < 4; ++i) {
                ref[16 + 40 * r + i] = y2[r * 4 + i];
            }
        }
        all_close(get_values(s2), ref, 0.0, 0.0, inplace ? "set_1d/2d inplace" : "set_1d/2d");
        EXPECT_EQ(s2->data == a->data, inplace);
    }
}

// ---- DIAG, DIAG_MASK_INF, DIAG_MASK_ZERO

TEST(MathDiag, DiagOfEachSlice) {
    for (wsp_ggml_type type : float_types()) {
        Graph  g;
        auto * a   = make_operand(g, type, { 7, 1, 3, 2 }, Layout::Strided);
        auto * out = wsp_ggml_diag(g.ctx(), a);
        ASSERT_EQ(out->ne[0], 7);
        ASSERT_EQ(out->ne[1], 7);
        g.build(out);
        const std::vector<float> x = round_trip(type, random_values(42, 15));
        set_values(a, x);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        std::vector<double> ref(7 * 7 * 6, 0.0);
        for (size_t s = 0; s < 6; ++s) {
            for (size_t i = 0; i < 7; ++i) {
                ref[s * 49 + i * 7 + i] = x[s * 7 + i];
            }
        }
        all_close(get_values(out), ref, 0.0, 0.0, wsp_ggml_type_name(type));
    }
}

TEST(MathDiag, MasksForSeveralPastLengths) {
    for (bool inf : { true, false }) {
        for (int n_past : { 0, 2, -1, 20 }) {
            for (bool inplace : { false, true }) {
                for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
                    SCOPED_TRACE(std::string(inf ? "inf" : "zero") + " n_past " + std::to_string(n_past) +
                                 (inplace ? " inplace " : " ") + layout_name(layout));
                    Graph  g;
                    auto * a   = make_operand(g, WSP_GGML_TYPE_F32, { 9, 5, 3 }, layout);
                    auto * out = inf ? (inplace ? wsp_ggml_diag_mask_inf_inplace(g.ctx(), a, n_past)
                                                : wsp_ggml_diag_mask_inf(g.ctx(), a, n_past))
                                     : (inplace ? wsp_ggml_diag_mask_zero_inplace(g.ctx(), a, n_past)
                                                : wsp_ggml_diag_mask_zero(g.ctx(), a, n_past));
                    g.build(out);
                    const std::vector<float> x = random_values(9 * 5 * 3, 16);
                    set_values(a, x);
                    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                    EXPECT_EQ(out->data == a->data, inplace);
                    const std::vector<float> got = get_values(out);
                    int                      bad = 0;
                    for (size_t k = 0; k < x.size(); ++k) {
                        const int64_t i = (int64_t) (k % 9), j = (int64_t) (k / 9) % 5;
                        const float   want = i > n_past + j ? (inf ? -INFINITY : 0.0f) : x[k];
                        bad += got[k] != want;
                    }
                    EXPECT_EQ(bad, 0);
                }
            }
        }
    }
}

// ---- shape errors

class MathDeath : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 32 * wsp_ggml_tensor_overhead(), nullptr, true });
    }
    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_tensor * t(wsp_ggml_type type, std::vector<int64_t> ne) {
        ne.resize(4, 1);
        return wsp_ggml_new_tensor(ctx_, type, 4, ne.data());
    }

    wsp_ggml_context * ctx_ = nullptr;
};

TEST_F(MathDeath, BuildersNameTheRule) {
    EXPECT_DEATH(wsp_ggml_add1(ctx_, t(WSP_GGML_TYPE_F32, { 4, 2 }), t(WSP_GGML_TYPE_F32, { 2 })),
                 "wsp_ggml_add1: invalid arguments .*wsp_ggml_is_scalar\\(b\\)");
    EXPECT_DEATH(wsp_ggml_argmax(ctx_, t(WSP_GGML_TYPE_F32, { 4, 2, 3 })), "wsp_ggml_argmax: .*wsp_ggml_is_matrix");
    EXPECT_DEATH(wsp_ggml_count_equal(ctx_, t(WSP_GGML_TYPE_I32, { 4 }), t(WSP_GGML_TYPE_I32, { 5 })),
                 "wsp_ggml_count_equal: .*same_shape");
    EXPECT_DEATH(wsp_ggml_group_norm(ctx_, t(WSP_GGML_TYPE_F32, { 4, 4, 4 }), 0, 1e-5f),
                 "wsp_ggml_group_norm: .*n_groups > 0");
    EXPECT_DEATH(wsp_ggml_diag(ctx_, t(WSP_GGML_TYPE_F32, { 4, 2 })), "wsp_ggml_diag: .*ne\\[1\\] == 1");
    EXPECT_DEATH(wsp_ggml_add_cast(ctx_, t(WSP_GGML_TYPE_F32, { 4 }), t(WSP_GGML_TYPE_F32, { 4 }), WSP_GGML_TYPE_Q8_0),
                 "wsp_ggml_add_cast: result type q8_0 is not F32, F16 or BF16");
    wsp_ggml_tensor * a = t(WSP_GGML_TYPE_F32, { 10, 4 });
    EXPECT_DEATH(wsp_ggml_acc(ctx_, a, t(WSP_GGML_TYPE_F32, { 4, 2 }), a->nb[1], a->nb[2], a->nb[3], 36 * 4),
                 "wsp_ggml_acc: the view of .* does not fit in a");
    EXPECT_DEATH(wsp_ggml_set_1d(ctx_, a, t(WSP_GGML_TYPE_F32, { 50 }), 0), "wsp_ggml_set_1d: .*nelements");
    EXPECT_DEATH(wsp_ggml_acc(ctx_, a, t(WSP_GGML_TYPE_I32, { 2 }), a->nb[1], a->nb[2], a->nb[3], 0),
                 "wsp_ggml_acc: .*is_float");
    EXPECT_DEATH(wsp_ggml_soft_max_inplace(ctx_, wsp_ggml_transpose(ctx_, a)),
                 "wsp_ggml_soft_max_inplace: .*is_contiguous");
}

} // namespace
} // namespace wsp::test
