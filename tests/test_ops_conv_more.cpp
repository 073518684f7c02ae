// The convolution family beyond conv_1d on the CPU backend against direct double-precision
// references: conv_1d_1s / _2s, depthwise 1-D (conv_1d_dw, _ph), conv_2d (and _sk_p0, _s1_ph),
// depthwise 2-D through im2col and direct (channels first and channels innermost), the
// transposed convolutions, and 1-D / 2-D pooling with padding; odd sizes, strided and permuted
// inputs, 1 to 3 threads.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cfloat>

namespace wsp::test {
namespace {

// logical values of a tensor with a 4-D shape (which may re-read a tensor's shape, e.g. a 1-D
// conv's [K, IC, OC] kernel as [K, 1, IC, OC]: the flat order is the same)
struct Arr {
    std::vector<float> v;
    int64_t            ne[4];

    double at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
        return v[(size_t) (((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0)];
    }
};

Arr arr(const wsp_ggml_tensor * t, std::vector<int64_t> ne = {}) {
    if (ne.empty()) {
        ne.assign(t->ne, t->ne + 4);
    }
    ne.resize(4, 1);
    Arr a{ get_values(t), { ne[0], ne[1], ne[2], ne[3] } };
    EXPECT_EQ((int64_t) a.v.size(), ne[0] * ne[1] * ne[2] * ne[3]);
    return a;
}

// a's values as they are after a round trip through `type` (im2col columns in the kernel's type)
Arr in_type(Arr a, wsp_ggml_type type) {
    a.v = round_trip(type, a.v);
    return a;
}

int64_t out_size(int64_t in, int64_t k, int s, int p, int d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

struct Conv {
    int s0, s1, p0, p1, d0, d1;
};

// w [KW, KH, IC, OC], x [W, H, IC, N] -> [OW, OH, OC, N]
std::vector<double> ref_conv2d(const Arr & w, const Arr & x, const Conv & c) {
    const int64_t       OW = out_size(x.ne[0], w.ne[0], c.s0, c.p0, c.d0);
    const int64_t       OH = out_size(x.ne[1], w.ne[1], c.s1, c.p1, c.d1);
    std::vector<double> out;
    for (int64_t n = 0; n < x.ne[3]; ++n) {
        for (int64_t oc = 0; oc < w.ne[3]; ++oc) {
            for (int64_t oh = 0; oh < OH; ++oh) {
                for (int64_t ow = 0; ow < OW; ++ow) {
                    double acc = 0.0;
                    for (int64_t ic = 0; ic < w.ne[2]; ++ic) {
                        for (int64_t ky = 0; ky < w.ne[1]; ++ky) {
                            for (int64_t kx = 0; kx < w.ne[0]; ++kx) {
                                const int64_t ix = ow * c.s0 + kx * c.d0 - c.p0, iy = oh * c.s1 + ky * c.d1 - c.p1;
                                if (ix >= 0 && ix < x.ne[0] && iy >= 0 && iy < x.ne[1]) {
                                    acc += w.at(kx, ky, ic, oc) * x.at(ix, iy, ic, n);
                                }
                            }
                        }
                    }
                    out.push_back(acc);
                }
            }
        }
    }
    return out;
}

// w [KW, KH, 1, C], x [W, H, C, N] -> [OW, OH, C, N]
std::vector<double> ref_depthwise(const Arr & w, const Arr & x, const Conv & c) {
    const int64_t       OW = out_size(x.ne[0], w.ne[0], c.s0, c.p0, c.d0);
    const int64_t       OH = out_size(x.ne[1], w.ne[1], c.s1, c.p1, c.d1);
    std::vector<double> out;
    for (int64_t n = 0; n < x.ne[3]; ++n) {
        for (int64_t ch = 0; ch < x.ne[2]; ++ch) {
            for (int64_t oh = 0; oh < OH; ++oh) {
                for (int64_t ow = 0; ow < OW; ++ow) {
                    double acc = 0.0;
                    for (int64_t ky = 0; ky < w.ne[1]; ++ky) {
                        for (int64_t kx = 0; kx < w.ne[0]; ++kx) {
                            const int64_t ix = ow * c.s0 + kx * c.d0 - c.p0, iy = oh * c.s1 + ky * c.d1 - c.p1;
                            if (ix >= 0 && ix < x.ne[0] && iy >= 0 && iy < x.ne[1]) {
                                acc += w.at(kx, ky, 0, ch) * x.at(ix, iy, ch, n);
                            }
                        }
                    }
                    out.push_back(acc);
                }
            }
        }
    }
    return out;
}

// w [KW, KH, OC, IC], x [W, H, IC, N] -> [(W-1)s + KW, (H-1)s + KH, OC, N]
std::vector<double> ref_conv_transpose(const Arr & w, const Arr & x, int s) {
    const int64_t       OW = (x.ne[0] - 1) * s + w.ne[0], OH = (x.ne[1] - 1) * s + w.ne[1];
    const int64_t       OC = w.ne[2], N = x.ne[3];
    std::vector<double> out((size_t) (OW * OH * OC * N), 0.0);
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t oc = 0; oc < OC; ++oc) {
            for (int64_t ic = 0; ic < x.ne[2]; ++ic) {
                for (int64_t y = 0; y < x.ne[1]; ++y) {
                    for (int64_t xx = 0; xx < x.ne[0]; ++xx) {
                        for (int64_t ky = 0; ky < w.ne[1]; ++ky) {
                            for (int64_t kx = 0; kx < w.ne[0]; ++kx) {
                                const int64_t ox = xx * s + kx, oy = y * s + ky;
                                out[(size_t) (((n * OC + oc) * OH + oy) * OW + ox)] +=
                                    w.at(kx, ky, oc, ic) * x.at(xx, y, ic, n);
                            }
                        }
                    }
                }
            }
        }
    }
    return out;
}

void run_and_check(Graph & g, wsp_ggml_tensor * out, const std::vector<double> & ref, double tol,
                   const std::string & what) {
    ASSERT_EQ((int64_t) ref.size(), wsp_ggml_nelements(out)) << what;
    for (int n_threads : { 1, 2, 3 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS) << what;
        const double e = nmse(get_values(out), ref);
        EXPECT_LT(e, tol) << what << " threads " << n_threads;
    }
}

// element by element (pooling: a window in the padding gives -FLT_MAX, which an NMSE would drown in)
void run_and_check_close(Graph & g, wsp_ggml_tensor * out, const std::vector<double> & ref, const std::string & what) {
    ASSERT_EQ((int64_t) ref.size(), wsp_ggml_nelements(out)) << what;
    for (int n_threads : { 1, 2, 3 }) {
        ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS) << what;
        EXPECT_TRUE(all_close(get_values(out), ref, 1e-6, 1e-6, what + " threads " + std::to_string(n_threads)));
    }
}

// tolerance of a float result whose inputs the reference already rounded
double tol_for(wsp_ggml_type out_type) {
    return out_type == WSP_GGML_TYPE_F32 ? 1e-10 : nmse_bound(out_type);
}

TEST(Conv1dShortForms, AreHalfPaddedConv1d) {
    for (wsp_ggml_type wt : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
        for (int s : { 1, 2 }) {
            Graph             g;
            wsp_ggml_tensor * w   = g.input(wt, { 5, 7, 11 });
            wsp_ggml_tensor * x   = g.input(WSP_GGML_TYPE_F32, { 37, 7, 1 }); // conv_1d: one batch, as whisper
            wsp_ggml_tensor * out = s == 1 ? wsp_ggml_conv_1d_1s(g.ctx(), w, x) : wsp_ggml_conv_1d_2s(g.ctx(), w, x);
            g.build(out);
            fill_inputs(g, 3);
            const wsp_ggml_type col = wt == WSP_GGML_TYPE_F32 ? WSP_GGML_TYPE_F32 : WSP_GGML_TYPE_F16;
            const Conv          c{ s, 1, 2, 0, 1, 1 };
            const auto          ref = ref_conv2d(arr(w, { 5, 1, 7, 11 }), in_type(arr(x, { 37, 1, 7, 1 }), col), c);
            EXPECT_EQ(out->ne[0], out_size(37, 5, s, 2, 1));
            run_and_check(g, out, ref, 1e-9, "conv_1d_" + std::to_string(s) + "s " + shape_str(w));
        }
    }
}

TEST(Conv1dDepthwise, MatchesPerChannelConvolution) {
    struct Case {
        int64_t K, C, L, N;
        int     s, p, d;
        bool    ph;
    };
    const Case cases[] = { { 3, 5, 17, 1, 1, 1, 1, false },
                           { 4, 1, 9, 3, 2, 0, 2, false },
                           { 7, 13, 31, 2, 3, 5, 1, false },
                           { 5, 6, 23, 1, 1, 0, 2, true },
                           { 1, 3, 1, 1, 1, 0, 1, false } };
    for (const Case & c : cases) {
        for (wsp_ggml_type wt : float_types()) {
            for (Layout lx : { Layout::Contiguous, Layout::Permuted }) {
                Graph             g;
                wsp_ggml_tensor * w   = g.input(wt, { c.K, 1, c.C });
                wsp_ggml_tensor * x   = make_operand(g, WSP_GGML_TYPE_F32, { c.L, c.C, c.N }, lx);
                wsp_ggml_tensor * out = c.ph ? wsp_ggml_conv_1d_dw_ph(g.ctx(), w, x, c.s, c.d)
                                             : wsp_ggml_conv_1d_dw(g.ctx(), w, x, c.s, c.p, c.d);
                g.build(out);
                fill_inputs(g, 5);
                const int  p = c.ph ? (int) (c.K / 2) : c.p;
                const Conv cv{ c.s, 1, p, 0, c.d, 1 };
                const auto ref =
                    ref_depthwise(arr(w, { c.K, 1, 1, c.C }), in_type(arr(x, { c.L, 1, c.C, c.N }), wt), cv);
                ASSERT_EQ(out->ne[0], out_size(c.L, c.K, c.s, p, c.d));
                ASSERT_EQ(out->ne[1], c.C);
                ASSERT_EQ(out->ne[2], c.N);
                run_and_check(g, out, ref, 1e-9,
                              "conv_1d_dw " + shape_str(w) + " over " + shape_str(x) + " " + layout_name(lx));
            }
        }
    }
}

struct Conv2dCase {
    int64_t KW, KH, IC, OC, W, H, N;
    Conv    c;
};

TEST(Conv2d, MatchesADirectConvolution) {
    const Conv2dCase cases[] = {
        { 3, 3, 2, 5, 9, 7, 2, { 1, 1, 1, 1, 1, 1 } },  { 2, 3, 3, 4, 11, 6, 1, { 2, 1, 0, 2, 1, 2 } },
        { 5, 1, 1, 7, 13, 3, 3, { 3, 1, 2, 0, 2, 1 } }, { 1, 1, 6, 3, 5, 5, 1, { 1, 1, 0, 0, 1, 1 } },
        { 4, 4, 3, 2, 4, 4, 1, { 1, 1, 0, 0, 1, 1 } }, // kernel as large as the input: 1x1 output
    };
    for (const Conv2dCase & k : cases) {
        for (wsp_ggml_type wt : float_types()) {
            Graph             g;
            wsp_ggml_tensor * w   = g.input(wt, { k.KW, k.KH, k.IC, k.OC });
            wsp_ggml_tensor * x   = make_operand(g, WSP_GGML_TYPE_F32, { k.W, k.H, k.IC, k.N }, Layout::Strided);
            wsp_ggml_tensor * out = wsp_ggml_conv_2d(g.ctx(), w, x, k.c.s0, k.c.s1, k.c.p0, k.c.p1, k.c.d0, k.c.d1);
            g.build(out);
            fill_inputs(g, 7);
            const auto ref = ref_conv2d(arr(w), in_type(arr(x), wt), k.c);
            ASSERT_EQ(out->ne[2], k.OC);
            ASSERT_EQ(out->ne[3], k.N);
            run_and_check(g, out, ref, 1e-9, "conv_2d " + shape_str(w) + " over " + shape_str(x));
        }
    }
}

TEST(Conv2d, ShortForms) {
    for (bool sk : { true, false }) {
        Graph             g;
        wsp_ggml_tensor * w   = g.input(WSP_GGML_TYPE_F16, { 3, 2, 4, 5 });
        wsp_ggml_tensor * x   = g.input(WSP_GGML_TYPE_F32, { 13, 8, 4, 2 });
        wsp_ggml_tensor * out = sk ? wsp_ggml_conv_2d_sk_p0(g.ctx(), w, x) : wsp_ggml_conv_2d_s1_ph(g.ctx(), w, x);
        g.build(out);
        fill_inputs(g, 9);
        const Conv c   = sk ? Conv{ 3, 2, 0, 0, 1, 1 } : Conv{ 1, 1, 1, 1, 1, 1 };
        const auto ref = ref_conv2d(arr(w), in_type(arr(x), WSP_GGML_TYPE_F16), c);
        ASSERT_EQ(out->ne[0], sk ? 4 : 13);
        ASSERT_EQ(out->ne[1], sk ? 4 : 9);
        run_and_check(g, out, ref, 1e-9, sk ? "conv_2d_sk_p0" : "conv_2d_s1_ph");
    }
}

struct DwCase {
    int64_t KW, KH, C, W, H, N;
    Conv    c;
};

const DwCase DW_CASES[] = {
    { 3, 3, 4, 8, 6, 1, { 1, 1, 1, 1, 1, 1 } }, { 5, 3, 17, 11, 9, 2, { 2, 1, 2, 0, 1, 2 } },
    { 1, 1, 3, 5, 4, 1, { 1, 1, 0, 0, 1, 1 } }, { 2, 4, 33, 7, 13, 1, { 3, 2, 1, 3, 2, 1 } },
    { 3, 3, 1, 1, 1, 1, { 1, 1, 1, 1, 1, 1 } }, // one pixel, all but the centre tap in the padding
};

TEST(Conv2dDepthwise, ThroughIm2col) {
    for (const DwCase & k : DW_CASES) {
        for (wsp_ggml_type wt : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
            Graph             g;
            wsp_ggml_tensor * w   = g.input(wt, { k.KW, k.KH, 1, k.C });
            wsp_ggml_tensor * x   = g.input(WSP_GGML_TYPE_F32, { k.W, k.H, k.C, k.N });
            wsp_ggml_tensor * out = wsp_ggml_conv_2d_dw(g.ctx(), w, x, k.c.s0, k.c.s1, k.c.p0, k.c.p1, k.c.d0, k.c.d1);
            g.build(out);
            fill_inputs(g, 11);
            const auto ref = ref_depthwise(arr(w), in_type(arr(x), wt), k.c);
            run_and_check(g, out, ref, 1e-9, "conv_2d_dw " + shape_str(w) + " over " + shape_str(x));
        }
    }
}

// x of shape [W, H, C, N]: channels first, or channels innermost (a permuted [C, W, H, N] input)
wsp_ggml_tensor * dw_input(Graph & g, wsp_ggml_type type, const DwCase & k, bool channels_last) {
    if (!channels_last) {
        return g.input(type, { k.W, k.H, k.C, k.N });
    }
    wsp_ggml_tensor * base = g.input(type, { k.C, k.W, k.H, k.N });
    return wsp_ggml_permute(g.ctx(), base, 2, 0, 1, 3);
}

TEST(Conv2dDepthwise, DirectBothLayouts) {
    for (const DwCase & k : DW_CASES) {
        for (wsp_ggml_type xt : float_types()) {
            for (bool cl : { false, true }) {
                Graph             g;
                wsp_ggml_tensor * w =
                    g.input(xt == WSP_GGML_TYPE_BF16 ? WSP_GGML_TYPE_F32 : xt, { k.KW, k.KH, 1, k.C });
                wsp_ggml_tensor * x = dw_input(g, xt, k, cl);
                wsp_ggml_tensor * out =
                    wsp_ggml_conv_2d_dw_direct(g.ctx(), w, x, k.c.s0, k.c.s1, k.c.p0, k.c.p1, k.c.d0, k.c.d1);
                ASSERT_EQ(out->type, xt);
                // the result keeps the input's layout
                EXPECT_EQ(out->nb[2] < out->nb[0], cl && k.C > 1) << shape_str(out);
                g.build(out);
                fill_inputs(g, 13);
                const auto ref = ref_depthwise(arr(w), arr(x), k.c);
                run_and_check(g, out, ref, tol_for(xt), "conv_2d_dw_direct " + shape_str(w) + " over " + shape_str(x));
            }
        }
    }
}

TEST(ConvTranspose1d, ScattersTheKernel) {
    struct Case {
        int64_t K, OC, IC, L;
        int     s;
    };
    const Case cases[] = { { 3, 2, 4, 7, 1 },
                           { 4, 5, 3, 9, 2 },
                           { 2, 3, 2, 5, 3 }, // stride past the kernel: gaps
                           { 1, 1, 1, 1, 1 },
                           { 16, 7, 33, 13, 8 } };
    for (const Case & c : cases) {
        for (wsp_ggml_type wt : float_types()) {
            Graph             g;
            wsp_ggml_tensor * w   = g.input(wt, { c.K, c.OC, c.IC });
            wsp_ggml_tensor * x   = make_operand(g, WSP_GGML_TYPE_F32, { c.L, c.IC }, Layout::Permuted);
            wsp_ggml_tensor * out = wsp_ggml_conv_transpose_1d(g.ctx(), w, x, c.s, 0, 1);
            ASSERT_EQ(out->ne[0], (c.L - 1) * c.s + c.K);
            ASSERT_EQ(out->ne[1], c.OC);
            g.build(out);
            fill_inputs(g, 15);
            const auto ref = ref_conv_transpose(arr(w, { c.K, 1, c.OC, c.IC }), arr(x, { c.L, 1, c.IC, 1 }), c.s);
            run_and_check(g, out, ref, 1e-10, "conv_transpose_1d " + shape_str(w) + " s " + std::to_string(c.s));
        }
    }
}

TEST(ConvTranspose2d, ScattersTheKernel) {
    struct Case {
        int64_t KW, KH, OC, IC, W, H, N;
        int     s;
    };
    const Case cases[] = { { 3, 3, 2, 3, 4, 5, 1, 1 },
                           { 2, 2, 4, 5, 7, 3, 2, 2 },
                           { 3, 1, 1, 2, 5, 6, 1, 3 },
                           { 1, 1, 3, 1, 1, 1, 2, 2 },
                           { 4, 3, 5, 17, 9, 8, 1, 5 } };
    for (const Case & c : cases) {
        for (wsp_ggml_type wt : float_types()) {
            Graph             g;
            wsp_ggml_tensor * w   = g.input(wt, { c.KW, c.KH, c.OC, c.IC });
            wsp_ggml_tensor * x   = make_operand(g, WSP_GGML_TYPE_F32, { c.W, c.H, c.IC, c.N }, Layout::Strided);
            wsp_ggml_tensor * out = wsp_ggml_conv_transpose_2d_p0(g.ctx(), w, x, c.s);
            g.build(out);
            fill_inputs(g, 17);
            run_and_check(g, out, ref_conv_transpose(arr(w), arr(x), c.s), 1e-10,
                          "conv_transpose_2d " + shape_str(w) + " s " + std::to_string(c.s));
        }
    }
}

// pool over dims 0-1 of x [W, H, C, N]: padded positions are no elements (Note [pooling padding])
std::vector<double> ref_pool(const Arr & x, bool avg, int k0, int k1, int s0, int s1, int p0, int p1, int64_t OW,
                             int64_t OH) {
    std::vector<double> out;
    for (int64_t c = 0; c < x.ne[2] * x.ne[3]; ++c) {
        for (int64_t oh = 0; oh < OH; ++oh) {
            for (int64_t ow = 0; ow < OW; ++ow) {
                double acc = avg ? 0.0 : -FLT_MAX;
                int    n   = 0;
                for (int64_t iy = oh * s1 - p1; iy < oh * s1 - p1 + k1; ++iy) {
                    for (int64_t ix = ow * s0 - p0; ix < ow * s0 - p0 + k0; ++ix) {
                        if (ix < 0 || ix >= x.ne[0] || iy < 0 || iy >= x.ne[1]) {
                            continue;
                        }
                        const double v = x.at(ix, iy, c % x.ne[2], c / x.ne[2]);
                        acc            = avg ? acc + v : std::max(acc, v);
                        ++n;
                    }
                }
                out.push_back(avg ? (n > 0 ? acc / n : 0.0) : acc);
            }
        }
    }
    return out;
}

TEST(Pool1d, MaxAndAverageWithPadding) {
    struct Case {
        int64_t W, R;
        int     k, s, p;
    };
    const Case cases[] = {
        { 10, 3, 2, 2, 0 }, { 17, 2, 3, 1, 1 }, { 31, 1, 5, 3, 2 }, { 1, 4, 1, 1, 0 }, { 6, 2, 2, 1, 2 }
    }; // the first and last windows lie in the padding
    for (const Case & c : cases) {
        for (wsp_ggml_type t : float_types()) {
            for (wsp_ggml_op_pool op : { WSP_GGML_OP_POOL_MAX, WSP_GGML_OP_POOL_AVG }) {
                Graph             g;
                wsp_ggml_tensor * x   = make_operand(g, t, { c.W, c.R, 2 }, Layout::Strided);
                wsp_ggml_tensor * out = wsp_ggml_pool_1d(g.ctx(), x, op, c.k, c.s, c.p);
                const int64_t     OW  = (c.W + 2 * c.p - c.k) / c.s + 1;
                ASSERT_EQ(out->ne[0], OW);
                g.build(out);
                fill_inputs(g, 19, -4.0f, 4.0f);
                const auto ref =
                    ref_pool(arr(x, { c.W, 1, c.R, 2 }), op == WSP_GGML_OP_POOL_AVG, c.k, 1, c.s, 1, c.p, 0, OW, 1);
                run_and_check_close(g, out, ref, "pool_1d " + shape_str(x) + " op " + std::to_string(op));
            }
        }
    }
}

TEST(Pool2d, MaxAndAverageWithPadding) {
    struct Case {
        int64_t W, H, C;
        int     k0, k1, s0, s1;
        float   p0, p1;
    };
    const Case cases[] = { { 8, 6, 3, 2, 2, 2, 2, 0, 0 },  { 9, 7, 2, 3, 3, 1, 1, 1, 1 },
                           { 13, 5, 1, 3, 1, 2, 1, 1, 0 }, { 5, 11, 4, 2, 3, 1, 2, 0, 1 },
                           { 1, 1, 2, 1, 1, 1, 1, 0, 0 },  { 7, 7, 1, 3, 3, 3, 3, 1.5f, 1 } };
    for (const Case & c : cases) {
        for (wsp_ggml_type t : float_types()) {
            for (wsp_ggml_op_pool op : { WSP_GGML_OP_POOL_MAX, WSP_GGML_OP_POOL_AVG }) {
                Graph             g;
                wsp_ggml_tensor * x   = make_operand(g, t, { c.W, c.H, c.C, 2 }, Layout::Permuted);
                wsp_ggml_tensor * out = wsp_ggml_pool_2d(g.ctx(), x, op, c.k0, c.k1, c.s0, c.s1, c.p0, c.p1);
                const int64_t     OW  = (int64_t) ((c.W + 2 * c.p0 - c.k0) / c.s0 + 1);
                const int64_t     OH  = (int64_t) ((c.H + 2 * c.p1 - c.k1) / c.s1 + 1);
                ASSERT_EQ(out->ne[0], OW);
                ASSERT_EQ(out->ne[1], OH);
                g.build(out);
                fill_inputs(g, 21, -4.0f, 4.0f);
                const auto ref = ref_pool(arr(x), op == WSP_GGML_OP_POOL_AVG, c.k0, c.k1, c.s0, c.s1, (int) c.p0,
                                          (int) c.p1, OW, OH);
                run_and_check_close(g, out, ref, "pool_2d " + shape_str(x) + " op " + std::to_string(op));
            }
        }
    }
}

} // namespace
} // namespace wsp::test
