// IM2COL (1-D and 2-D, stride / padding / dilation, F32 and F16 columns), CONV_1D and
// CONV_1D_PH at whisper's front-end shapes against a direct convolution, PAD_REFLECT_1D and
// CONCAT along each dim, with 1 and 2 threads.

#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>

namespace wsp::test {
namespace {

double stored(wsp_ggml_type type, float v) {
    if (type == WSP_GGML_TYPE_F16) {
        return ieee_fp16_value(ieee_fp16_bits(v));
    }
    if (type == WSP_GGML_TYPE_BF16) {
        const uint32_t u = (uint32_t) ieee_bf16_bits(v) << 16;
        float          f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    return v;
}

struct Im2colCase {
    bool    is_2d;
    int64_t IW, IH, IC, N, KW, KH;
    int     s0, s1, p0, p1, d0, d1;
};

int64_t out_size(int64_t in, int64_t k, int s, int p, int d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// column element (ic, kh, kw) of output position (ow, oh, n): the input under the kernel tap, or 0
std::vector<double> ref_im2col(const Im2colCase & c, const std::vector<float> & x, wsp_ggml_type dst) {
    const int64_t       OW = out_size(c.IW, c.KW, c.s0, c.p0, c.d0);
    const int64_t       OH = c.is_2d ? out_size(c.IH, c.KH, c.s1, c.p1, c.d1) : 1;
    const int64_t       KH = c.is_2d ? c.KH : 1, IH = c.is_2d ? c.IH : 1;
    std::vector<double> out;
    for (int64_t n = 0; n < c.N; ++n) {
        for (int64_t oh = 0; oh < OH; ++oh) {
            for (int64_t ow = 0; ow < OW; ++ow) {
                for (int64_t ic = 0; ic < c.IC; ++ic) {
                    for (int64_t kh = 0; kh < KH; ++kh) {
                        for (int64_t kw = 0; kw < c.KW; ++kw) {
                            const int64_t iw = ow * c.s0 + kw * c.d0 - c.p0;
                            const int64_t ih = c.is_2d ? oh * c.s1 + kh * c.d1 - c.p1 : 0;
                            const bool    in = iw >= 0 && iw < c.IW && ih >= 0 && ih < IH;
                            out.push_back(in ? stored(dst, x[(size_t) (((n * c.IC + ic) * IH + ih) * c.IW + iw)])
                                             : 0.0);
                        }
                    }
                }
            }
        }
    }
    return out;
}

TEST(Im2col, OneAndTwoDimensions) {
    const Im2colCase cases[] = {
        { false, 17, 1, 3, 1, 3, 1, 1, 0, 1, 0, 1, 0 }, { false, 30, 1, 4, 2, 5, 1, 2, 0, 2, 0, 2, 0 },
        { false, 8, 1, 1, 1, 8, 1, 1, 0, 0, 0, 1, 0 }, // kernel as wide as the input: one column
        { true, 9, 7, 2, 2, 3, 2, 2, 1, 1, 0, 1, 2 },   { true, 6, 6, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1 },
    };
    for (const Im2colCase & c : cases) {
        for (wsp_ggml_type src : float_types()) {
            for (wsp_ggml_type dst : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
                Graph                      g;
                wsp_ggml_tensor *          k = c.is_2d ? g.input(WSP_GGML_TYPE_F16, { c.KW, c.KH, c.IC, 5 })
                                                       : g.input(WSP_GGML_TYPE_F16, { c.KW, c.IC, 5 });
                const std::vector<int64_t> xne =
                    c.is_2d ? std::vector<int64_t>{ c.IW, c.IH, c.IC, c.N } : std::vector<int64_t>{ c.IW, c.IC, c.N };
                wsp_ggml_tensor * x = make_operand(g, src, xne, Layout::Strided);
                wsp_ggml_tensor * out =
                    wsp_ggml_im2col(g.ctx(), k, x, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, c.is_2d, dst);
                g.build(out);
                fill_inputs(g, 41, -3.0f, 3.0f);
                const std::vector<double> ref = ref_im2col(c, get_values(x), dst);
                ASSERT_EQ((int64_t) ref.size(), wsp_ggml_nelements(out));
                for (int n_threads : { 1, 2 }) {
                    ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                    all_close(get_values(out), ref, 0.0, 0.0,
                              "im2col " + shape_str(x) + " -> " + shape_str(out) + " threads " +
                                  std::to_string(n_threads));
                }
            }
        }
    }
}

// out[ol, oc] = sum over ic, k of w[k, ic, oc] * x[ol * s + k * d - p, ic], with x as the
// columns hold it (rounded to f16 when the kernel is f16)
std::vector<double> ref_conv1d(const std::vector<float> & w, const std::vector<float> & x, int64_t K, int64_t IC,
                               int64_t OC, int64_t L, int s, int p, int d, wsp_ggml_type col_type) {
    const int64_t       OL = out_size(L, K, s, p, d);
    std::vector<double> xs(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        xs[i] = stored(col_type, x[i]);
    }
    std::vector<double> out((size_t) (OL * OC), 0.0);
    for (int64_t oc = 0; oc < OC; ++oc) {
        for (int64_t ic = 0; ic < IC; ++ic) {
            for (int64_t k = 0; k < K; ++k) {
                const double wv = w[(size_t) ((oc * IC + ic) * K + k)];
                for (int64_t ol = 0; ol < OL; ++ol) {
                    const int64_t il = ol * s + k * d - p;
                    if (il >= 0 && il < L) {
                        out[(size_t) (oc * OL + ol)] += wv * xs[(size_t) (ic * L + il)];
                    }
                }
            }
        }
    }
    return out;
}

struct ConvCase {
    wsp_ggml_type wtype;
    int64_t       K, IC, OC, L;
    int           s, d;
    bool          half_padding; // conv_1d_ph, else conv_1d with padding p
    int           p;
};

TEST(Conv1d, MatchesADirectConvolution) {
    const ConvCase cases[] = {
        { WSP_GGML_TYPE_F16, 3, 80, 384, 300, 1, 1, true, 0 },  // whisper conv1
        { WSP_GGML_TYPE_F16, 3, 384, 384, 300, 2, 1, true, 0 }, // whisper conv2
        { WSP_GGML_TYPE_F16, 3, 80, 64, 300, 1, 1, false, 0 },  { WSP_GGML_TYPE_F16, 5, 7, 11, 41, 2, 2, false, 3 },
        { WSP_GGML_TYPE_F32, 4, 6, 9, 29, 1, 2, false, 1 },     { WSP_GGML_TYPE_F32, 3, 5, 8, 17, 2, 1, true, 0 },
    };
    for (const ConvCase & c : cases) {
        Graph             g;
        wsp_ggml_tensor * w   = g.input(c.wtype, { c.K, c.IC, c.OC });
        wsp_ggml_tensor * x   = g.input(WSP_GGML_TYPE_F32, { c.L, c.IC });
        const int         p   = c.half_padding ? (int) (c.K / 2) : c.p;
        wsp_ggml_tensor * out = c.half_padding ? wsp_ggml_conv_1d_ph(g.ctx(), w, x, c.s, c.d)
                                               : wsp_ggml_conv_1d(g.ctx(), w, x, c.s, p, c.d);
        g.build(out);
        fill_inputs(g, 51);
        const int64_t OL = out_size(c.L, c.K, c.s, p, c.d);
        ASSERT_EQ(out->ne[0], OL);
        ASSERT_EQ(out->ne[1], c.OC);
        const wsp_ggml_type       col = c.wtype == WSP_GGML_TYPE_F32 ? WSP_GGML_TYPE_F32 : WSP_GGML_TYPE_F16;
        const std::vector<double> ref =
            ref_conv1d(get_values(w), get_values(x), c.K, c.IC, c.OC, c.L, c.s, p, c.d, col);
        for (int n_threads : { 1, 2 }) {
            ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
            const double e = nmse(get_values(out), ref);
            EXPECT_LT(e, 1e-6) << "conv_1d " << shape_str(w) << " over " << shape_str(x) << " s " << c.s << " p " << p
                               << " d " << c.d << " threads " << n_threads;
        }
    }
}

TEST(PadReflect1d, MirrorsWithoutTheEdge) {
    struct Case {
        std::vector<int64_t> ne;
        int                  p0, p1;
    };
    const Case cases[] = {
        { { 5, 3 }, 2, 4 }, { { 10, 2, 2 }, 0, 9 }, { { 1, 4 }, 0, 0 }, { { 37 }, 36, 1 }, { { 64, 3, 1, 2 }, 7, 7 }
    };
    for (const Case & c : cases) {
        Graph             g;
        wsp_ggml_tensor * a   = g.input(WSP_GGML_TYPE_F32, c.ne);
        wsp_ggml_tensor * out = wsp_ggml_pad_reflect_1d(g.ctx(), a, c.p0, c.p1);
        g.build(out);
        fill_inputs(g, 61);
        const std::vector<float> va  = get_values(a);
        const int64_t            ne0 = a->ne[0], n0 = ne0 + c.p0 + c.p1;
        std::vector<double>      ref;
        for (int64_t r = 0; r < wsp_ggml_nrows(a); ++r) {
            for (int64_t i = 0; i < n0; ++i) {
                int64_t j = i - c.p0;
                j         = j < 0 ? -j : j >= ne0 ? 2 * (ne0 - 1) - j : j;
                ref.push_back(va[(size_t) (r * ne0 + j)]);
            }
        }
        for (int n_threads : { 1, 2 }) {
            ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
            all_close(get_values(out), ref, 0.0, 0.0, "pad_reflect_1d " + shape_str(a));
        }
    }
}

TEST(Concat, AlongEachDimForEachType) {
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_I32 }) {
        for (int dim = 0; dim < 4; ++dim) {
            std::vector<int64_t> na = { 7, 3, 2, 2 }, nb = na;
            nb[(size_t) dim] = dim == 0 ? 5 : 1;
            Graph             g;
            wsp_ggml_tensor * a   = make_operand(g, type, na, Layout::Permuted);
            wsp_ggml_tensor * b   = make_operand(g, type, nb, dim % 2 ? Layout::Strided : Layout::Contiguous);
            wsp_ggml_tensor * out = wsp_ggml_concat(g.ctx(), a, b, dim);
            g.build(out);
            fill_inputs(g, 71, -100.0f, 100.0f);
            const std::vector<float> va = get_values(a), vb = get_values(b);
            std::vector<double>      ref((size_t) wsp_ggml_nelements(out));
            for (size_t f = 0; f < ref.size(); ++f) {
                int64_t i[4];
                wsp_ggml_unravel_index(out, (int64_t) f, &i[0], &i[1], &i[2], &i[3]);
                if (i[dim] < a->ne[dim]) {
                    ref[f] = va[flat_index(a, i[0], i[1], i[2], i[3])];
                } else {
                    i[dim] -= a->ne[dim];
                    ref[f] = vb[flat_index(b, i[0], i[1], i[2], i[3])];
                }
            }
            for (int n_threads : { 1, 2 }) {
                ASSERT_EQ(g.run(n_threads), WSP_GGML_STATUS_SUCCESS);
                all_close(get_values(out), ref, 0.0, 0.0,
                          std::string("concat ") + wsp_ggml_type_name(type) + " dim " + std::to_string(dim));
            }
        }
    }
}

} // namespace
} // namespace wsp::test
