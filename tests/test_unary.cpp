// The UNARY family, SQR, SQRT and SCALE against double references of their formulas, for F32,
// F16 and BF16, contiguous, padded-row and transposed views, in place, and ranges that reach the
// saturation of tanh/sigmoid/gelu and the ends of exp's range. An element passes when
// |out - ref| <= atol + rtol * |ref| + c * |x f'(x)|: the output type's rounding plus a few float
// roundings of the argument, amplified by the function's condition number (f' taken numerically).

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <functional>
#include <limits>

namespace wsp::test {
namespace {

using Builder = std::function<wsp_ggml_tensor *(wsp_ggml_context *, wsp_ggml_tensor *, bool inplace)>;

struct UnaryOp {
    const char * name;
    Builder      build;
    double (*ref)(double);
    float lo, hi; // input range
};

constexpr float SCALE = 0.37f;

Builder unary(wsp_ggml_unary_op op) {
    return [op](wsp_ggml_context * ctx, wsp_ggml_tensor * a, bool inplace) {
        return inplace ? wsp_ggml_unary_inplace(ctx, a, op) : wsp_ggml_unary(ctx, a, op);
    };
}

double sigmoid_ref(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

double hard_sigmoid_ref(double x) {
    return std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
}

const std::vector<UnaryOp> & all_ops() {
    static const std::vector<UnaryOp> ops = {
        { "abs", unary(WSP_GGML_UNARY_OP_ABS), [](double x) { return std::fabs(x); }, -100, 100 },
        { "sgn", unary(WSP_GGML_UNARY_OP_SGN), [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, -3, 3 },
        { "neg", unary(WSP_GGML_UNARY_OP_NEG), [](double x) { return -x; }, -100, 100 },
        { "step", unary(WSP_GGML_UNARY_OP_STEP), [](double x) { return x > 0 ? 1.0 : 0.0; }, -3, 3 },
        { "tanh", unary(WSP_GGML_UNARY_OP_TANH), [](double x) { return std::tanh(x); }, -100, 100 },
        { "elu", unary(WSP_GGML_UNARY_OP_ELU), [](double x) { return x > 0 ? x : std::expm1(x); }, -100, 100 },
        { "relu", unary(WSP_GGML_UNARY_OP_RELU), [](double x) { return x > 0 ? x : 0.0; }, -100, 100 },
        { "sigmoid", unary(WSP_GGML_UNARY_OP_SIGMOID), sigmoid_ref, -100, 100 },
        // 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)), the same function without the
        // cancellation that ruins 1 + tanh(u) in double for x below about -6
        { "gelu", unary(WSP_GGML_UNARY_OP_GELU),
          [](double x) {
              const double            u   = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
              return x / (1.0 + std::exp(-2.0 * u));
          },
          -100, 100 },
        { "gelu_quick", unary(WSP_GGML_UNARY_OP_GELU_QUICK), [](double x) { return x * sigmoid_ref(1.702 * x); }, -100,
          100 },
        // erfc form: 1 + erf(x / sqrt 2) loses everything to cancellation in the negative tail
        { "gelu_erf", unary(WSP_GGML_UNARY_OP_GELU_ERF),
          [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, -100, 100 },
        { "silu", unary(WSP_GGML_UNARY_OP_SILU), [](double x) { return x * sigmoid_ref(x); }, -100, 100 },
        { "hardswish", unary(WSP_GGML_UNARY_OP_HARDSWISH), [](double x) { return x * hard_sigmoid_ref(x); }, -10, 10 },
        { "hardsigmoid", unary(WSP_GGML_UNARY_OP_HARDSIGMOID), hard_sigmoid_ref, -10, 10 },
        { "exp", unary(WSP_GGML_UNARY_OP_EXP), [](double x) { return std::exp(x); }, -100, 88 },
        { "sqr", [](wsp_ggml_context * ctx, wsp_ggml_tensor * a, bool) { return wsp_ggml_sqr(ctx, a); },
          [](double x) { return x * x; }, -100, 100 },
        { "sqrt", [](wsp_ggml_context * ctx, wsp_ggml_tensor * a, bool) { return wsp_ggml_sqrt(ctx, a); },
          [](double x) { return std::sqrt(x); }, 0, 100 },
        { "scale",
          [](wsp_ggml_context * ctx, wsp_ggml_tensor * a, bool inplace) {
              return inplace ? wsp_ggml_scale_inplace(ctx, a, SCALE) : wsp_ggml_scale(ctx, a, SCALE);
          },
          [](double x) { return (double) SCALE * x; }, -100, 100 },
    };
    return ops;
}

bool has_inplace(const UnaryOp & op) {
    return std::string(op.name) != "sqr" && std::string(op.name) != "sqrt";
}

// F16 cannot hold exp(x) beyond x = 11 (65504), nor the tiny values below e^-16 with precision
void input_range(const UnaryOp & op, wsp_ggml_type type, float & lo, float & hi) {
    lo = op.lo;
    hi = op.hi;
    if (type == WSP_GGML_TYPE_F16 && std::string(op.name) == "exp") {
        lo = -16.0f;
        hi = 11.0f;
    }
}

struct Tolerance {
    double atol, rtol;
};

// atol covers results at the bottom of the float range: x / (1 + exp(-t)) gives 0 where exp(-t)
// overflows although the true value (|x| e^-t < 1e-35) is still a normal float
Tolerance tolerance(wsp_ggml_type out) {
    switch (out) {
        case WSP_GGML_TYPE_F16: return { 6e-8, 7.5e-4 }; // half an ulp is 2^-11 (plus subnormal steps)
        case WSP_GGML_TYPE_BF16: return { 1e-35, 6e-3 }; // half an ulp is 2^-8
        default: return { 1e-35, 1e-6 };                 // a few float ulps
    }
}

// counts the elements outside the tolerance, printing the first few
int count_mismatches(const UnaryOp & op, const std::vector<float> & x, const std::vector<float> & got,
                     wsp_ggml_type out_type) {
    const Tolerance t      = tolerance(out_type);
    const double    c_cond = 1e-6; // about 8 float roundings of the argument
    int             bad    = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double xi  = x[i];
        const double ref = op.ref(xi);
        const double h   = 1e-6;
        const double xd  = std::fabs(op.ref(xi * (1 + h)) - op.ref(xi * (1 - h))) / (2 * h); // |x f'(x)|
        const double tol = t.atol + t.rtol * std::fabs(ref) + c_cond * xd;
        const bool   ok  = std::isinf(ref) ? got[i] == (float) ref : std::fabs((double) got[i] - ref) <= tol;
        if (!ok && ++bad <= 5) {
            ADD_FAILURE() << op.name << ": x = " << xi << " got " << got[i] << " want " << ref << " (tol " << tol
                          << ")";
        }
    }
    return bad;
}

enum class View { contiguous, padded_rows, transposed };

// a [ne0, ne1, ne2] operand over a new input of g, laid out as asked
wsp_ggml_tensor * make_view(Graph & g, wsp_ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, View view) {
    const size_t ts = wsp_ggml_type_size(type);
    switch (view) {
        case View::padded_rows: {
            wsp_ggml_tensor * big = g.input(type, { ne0 + 3, ne1, ne2 });
            return wsp_ggml_view_3d(g.ctx(), big, ne0, ne1, ne2, big->nb[1], big->nb[2], ts);
        }
        case View::transposed: return wsp_ggml_permute(g.ctx(), g.input(type, { ne1, ne0, ne2 }), 1, 0, 2, 3);
        default: return g.input(type, { ne0, ne1, ne2 });
    }
}

void check_op(const UnaryOp & op, wsp_ggml_type type, std::vector<int64_t> ne, View view, bool inplace, int nth,
              uint32_t seed) {
    SCOPED_TRACE(std::string(op.name) + " " + wsp_ggml_type_name(type) + " view " + std::to_string((int) view) +
                 (inplace ? " in place" : "") + " threads " + std::to_string(nth));
    Graph  g;
    auto * a   = make_view(g, type, ne[0], ne[1], ne[2], view);
    auto * out = op.build(g.ctx(), a, inplace);
    g.build(out);
    float lo, hi;
    input_range(op, type, lo, hi);
    std::vector<float> x = round_trip(type, random_values((size_t) wsp_ggml_nelements(a), seed, lo, hi));
    if (x.size() > 2) {
        x[0] = 0.0f; // exact zeros: sgn(0) = 0, step(0) = 0, relu/abs of 0
        x[1] = lo;
    }
    set_values(a, x);
    ASSERT_EQ(g.run(nth), WSP_GGML_STATUS_SUCCESS);
    ASSERT_EQ(out->type, type);
    const std::vector<float> got = get_values(out);
    EXPECT_EQ(count_mismatches(op, x, got, type), 0);
    if (inplace) {
        EXPECT_EQ(out->data, a->data);
        EXPECT_EQ(get_values(a), got); // the source now holds the result
    }
}

TEST(Unary, AllOpsTypesViews) {
    const std::vector<std::vector<int64_t>> shapes = { { 1, 1, 1 }, { 17, 1, 1 }, { 37, 5, 2 }, { 131, 3, 1 } };
    uint32_t                                seed   = 1;
    for (const UnaryOp & op : all_ops()) {
        for (wsp_ggml_type t : float_types()) {
            for (View v : { View::contiguous, View::padded_rows, View::transposed }) {
                for (const auto & ne : shapes) {
                    check_op(op, t, ne, v, false, 2, seed++);
                }
                if (has_inplace(op)) {
                    check_op(op, t, { 37, 5, 2 }, v, true, 2, seed++);
                }
            }
        }
    }
}

// long rows: whole vectors plus a tail, split between threads
TEST(Unary, LongRowsThreads) {
    for (const UnaryOp & op : all_ops()) {
        for (int nth : { 1, 2 }) {
            check_op(op, WSP_GGML_TYPE_F32, { 1000, 37, 1 }, View::contiguous, false, nth, 77);
            check_op(op, WSP_GGML_TYPE_F16, { 1001, 19, 1 }, View::contiguous, has_inplace(op), nth, 78);
        }
    }
}

// the kernel converts between any two float types (nodes built by hand: the builders keep the type)
TEST(Unary, MixedInOutTypes) {
    for (const char * name : { "gelu", "tanh", "exp", "scale", "sqrt" }) {
        const UnaryOp & op = *std::find_if(all_ops().begin(), all_ops().end(),
                                           [&](const UnaryOp & o) { return std::string(o.name) == name; });
        for (wsp_ggml_type tin : float_types()) {
            for (wsp_ggml_type tout : float_types()) {
                SCOPED_TRACE(std::string(name) + " " + wsp_ggml_type_name(tin) + " -> " + wsp_ggml_type_name(tout));
                Graph  g;
                auto * a     = make_view(g, tin, 45, 3, 1, View::transposed);
                auto * proto = op.build(g.ctx(), a, false);
                auto * out   = wsp_ggml_new_tensor(g.ctx(), tout, 4, a->ne);
                out->op      = proto->op;
                std::copy(std::begin(proto->op_params), std::end(proto->op_params), out->op_params);
                out->src[0] = a;
                g.build(out);
                float lo, hi;
                input_range(op, WSP_GGML_TYPE_F16, lo, hi);
                const std::vector<float> x = round_trip(tin, random_values(45 * 3, 5, lo, hi));
                set_values(a, x);
                ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
                EXPECT_EQ(count_mismatches(op, x, get_values(out), tout), 0);
            }
        }
    }
}

// exp, the base of softmax, tanh, sigmoid and gelu: relative error over the whole normal range,
// correct subnormals below it, and exact 0 / inf at the ends
TEST(Unary, ExpAccuracy) {
    std::vector<float> x;
    for (double v = -104.0; v <= 88.5; v += 0.0037) {
        x.push_back((float) v);
    }
    const float extra[] = { 0.0f,   -0.0f,          1e-30f,   -1e-30f, 88.72f,    88.7228f, 88.7229f, 88.73f,
                            89.5f,  -87.33f,        -87.34f,  -103.9f, -104.5f,   -200.0f,  200.0f,   1e30f,
                            -1e30f, 0.5f * FLT_MIN, -FLT_MAX, FLT_MAX, -INFINITY, INFINITY };
    x.insert(x.end(), std::begin(extra), std::end(extra));
    Graph  g;
    auto * a   = g.input(WSP_GGML_TYPE_F32, { (int64_t) x.size() });
    auto * out = wsp_ggml_exp(g.ctx(), a);
    g.build(out);
    set_values(a, x);
    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> y        = get_values(out);
    double                   max_rel  = 0.0;
    const double             sub_step = std::ldexp(1.0, -149); // spacing of float subnormals
    for (size_t i = 0; i < x.size(); ++i) {
        const double ref = std::exp((double) x[i]);
        if (ref > FLT_MAX) {
            EXPECT_EQ(y[i], INFINITY) << "x = " << x[i];
        } else if (ref >= FLT_MIN) {
            max_rel = std::max(max_rel, std::fabs(y[i] - ref) / ref);
        } else {
            EXPECT_LE(std::fabs(y[i] - ref), sub_step) << "x = " << x[i];
        }
    }
    EXPECT_LT(max_rel, 3e-7); // a few ulp (2^-23 = 1.2e-7)
    RecordProperty("exp_max_rel_error", std::to_string(max_rel));
    std::printf("exp: max relative error %.3g over [-104, 88.5] (%zu points)\n", max_rel, x.size());
}

// tanh near 0, where 1 - 2 / (exp(2x) + 1) would lose the leading digits
TEST(Unary, TanhSmallArguments) {
    std::vector<float> x;
    for (float v = 1e-7f; v < 2.0f; v *= 1.01f) {
        x.push_back(v);
        x.push_back(-v);
    }
    Graph  g;
    auto * a   = g.input(WSP_GGML_TYPE_F32, { (int64_t) x.size() });
    auto * out = wsp_ggml_tanh(g.ctx(), a);
    g.build(out);
    set_values(a, x);
    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    const std::vector<float> y       = get_values(out);
    double                   max_rel = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double ref = std::tanh((double) x[i]);
        max_rel          = std::max(max_rel, std::fabs(y[i] - ref) / std::fabs(ref));
    }
    EXPECT_LT(max_rel, 5e-7);
}

} // namespace
} // namespace wsp::test
