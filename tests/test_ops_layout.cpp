// The CPU kernels of the ops that move elements by position against references computed here:
// REPEAT / repeat_4d, PAD, ROLL, WIN_PART / WIN_UNPART, GET_REL_POS, ADD_REL_POS (+ in place),
// UPSCALE (nearest, bilinear), ARANGE, TIMESTEP_EMBEDDING, ARGSORT and top_k, over sizes of 1,
// primes, permuted and strided operands, and the builders' shape checks.

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace wsp::test {
namespace {

const std::vector<Layout> LAYOUTS = { Layout::Contiguous, Layout::Permuted, Layout::Strided };

std::vector<int64_t> dims4(std::vector<int64_t> ne) {
    ne.resize(4, 1);
    return ne;
}

// logical index of (i0..i3) in an array of shape ne
size_t flat(const std::vector<int64_t> & ne, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (size_t) (((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0);
}

std::vector<int64_t> shape_of(const wsp_ggml_tensor * t) {
    return { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
}

// ref[i] = f(i0, i1, i2, i3) over the shape of t
template <typename F>
std::vector<double> reference(const wsp_ggml_tensor * t, F f) {
    std::vector<double> ref((size_t) wsp_ggml_nelements(t));
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    ref[flat_index(t, i0, i1, i2, i3)] = f(i0, i1, i2, i3);
                }
            }
        }
    }
    return ref;
}

std::string what(const char * op, wsp_ggml_type type, Layout layout, const wsp_ggml_tensor * t) {
    return std::string(op) + " " + wsp_ggml_type_name(type) + " " + layout_name(layout) + " " + shape_str(t);
}

// ---- REPEAT, PAD, ROLL

TEST(OpsLayout, RepeatTilesEveryDim) {
    struct Case {
        std::vector<int64_t> a, b;
    };
    const std::vector<Case> cases = { { { 1 }, { 5, 7 } },
                                      { { 3, 2 }, { 9, 4, 3, 2 } },
                                      { { 37, 5 }, { 74, 5, 2 } },
                                      { { 7, 3, 2, 1 }, { 7, 3, 2, 3 } } };
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_I32 }) {
        for (Layout layout : LAYOUTS) {
            for (const Case & c : cases) {
                Graph                      g;
                wsp_ggml_tensor *          a  = make_operand(g, type, c.a, layout);
                const std::vector<int64_t> nb = dims4(c.b);
                wsp_ggml_tensor *          b  = wsp_ggml_new_tensor(g.ctx(), WSP_GGML_TYPE_F32, 4, nb.data());
                wsp_ggml_tensor *          r  = wsp_ggml_repeat(g.ctx(), a, b);
                wsp_ggml_tensor *          r4 = wsp_ggml_repeat_4d(g.ctx(), a, nb[0], nb[1], nb[2], nb[3]);
                g.build(r, { r4 });
                fill_inputs(g, 3, -100.0f, 100.0f);
                ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
                const std::vector<float>   av  = get_values(a);
                const std::vector<int64_t> na  = shape_of(a);
                const auto                 ref = reference(r, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    return (double) av[flat(na, i0 % na[0], i1 % na[1], i2 % na[2], i3 % na[3])];
                });
                EXPECT_EQ(r->type, type);
                all_close(get_values(r), ref, 0.0, 0.0, what("repeat", type, layout, r));
                all_close(get_values(r4), ref, 0.0, 0.0, what("repeat_4d", type, layout, r4));
            }
        }
    }
}

TEST(OpsLayout, PadAppendsZerosAtTheEnd) {
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 4, 3, 2, 2 } };
    const int                               p[4]   = { 3, 1, 2, 1 };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                Graph             g;
                wsp_ggml_tensor * a = make_operand(g, type, ne, layout);
                wsp_ggml_tensor * r = wsp_ggml_pad(g.ctx(), a, p[0], p[1], p[2], p[3]);
                wsp_ggml_tensor * z = wsp_ggml_pad(g.ctx(), a, 0, 0, 0, 0);
                g.build(r, { z });
                fill_inputs(g, 5, 1.0f, 2.0f); // never zero: a zero inside must come from a
                ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                const std::vector<float>   av  = get_values(a);
                const std::vector<int64_t> na  = shape_of(a);
                const auto                 ref = reference(r, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    const bool in = i0 < na[0] && i1 < na[1] && i2 < na[2] && i3 < na[3];
                    return in ? (double) av[flat(na, i0, i1, i2, i3)] : 0.0;
                });
                EXPECT_EQ(r->ne[0], na[0] + 3);
                EXPECT_EQ(r->ne[3], na[3] + 1);
                all_close(get_values(r), ref, 0.0, 0.0, what("pad", type, layout, r));
                std::vector<double> same(av.begin(), av.end());
                all_close(get_values(z), same, 0.0, 0.0, what("pad 0", type, layout, z));
            }
        }
    }
}

TEST(OpsLayout, RollWrapsAroundInEveryDim) {
    struct Case {
        std::vector<int64_t> ne;
        int                  s[4];
    };
    const std::vector<Case> cases = {
        { { 1 }, { 0, 0, 0, 0 } },
        { { 37, 5, 3 }, { 5, -2, 1, 0 } },
        { { 7, 3, 2, 3 }, { -6, 2, -1, 2 } },
        { { 64, 2 }, { 63, 1, 0, 0 } },
    };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : { Layout::Contiguous, Layout::Strided }) {
            for (const Case & c : cases) {
                Graph             g;
                wsp_ggml_tensor * a = make_operand(g, type, c.ne, layout);
                wsp_ggml_tensor * r = wsp_ggml_roll(g.ctx(), a, c.s[0], c.s[1], c.s[2], c.s[3]);
                g.build(r);
                fill_inputs(g, 7);
                ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                const std::vector<float>   av = get_values(a);
                const std::vector<int64_t> na = shape_of(a);
                auto       src = [&](int64_t i, int d) { return ((i - c.s[d]) % na[d] + na[d]) % na[d]; };
                const auto ref = reference(r, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    return (double) av[flat(na, src(i0, 0), src(i1, 1), src(i2, 2), src(i3, 3))];
                });
                all_close(get_values(r), ref, 0.0, 0.0, what("roll", type, layout, r));
            }
        }
    }
}

// ---- WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS

TEST(OpsLayout, WindowPartitionPadsAndUnpartitionRestores) {
    struct Case {
        int64_t c, w0, h0;
        int     w;
    };
    for (const Case & k : { Case{ 3, 7, 5, 3 }, Case{ 1, 1, 1, 1 }, Case{ 5, 8, 4, 4 }, Case{ 2, 5, 11, 6 } }) {
        for (Layout layout : { Layout::Contiguous, Layout::Strided }) {
            Graph             g;
            wsp_ggml_tensor * a   = make_operand(g, WSP_GGML_TYPE_F32, { k.c, k.w0, k.h0 }, layout);
            wsp_ggml_tensor * p   = wsp_ggml_win_part(g.ctx(), a, k.w);
            wsp_ggml_tensor * u   = wsp_ggml_win_unpart(g.ctx(), p, (int) k.w0, (int) k.h0, k.w);
            const int64_t     npx = (k.w0 + k.w - 1) / k.w, npy = (k.h0 + k.w - 1) / k.w;
            ASSERT_EQ(p->ne[0], k.c);
            ASSERT_EQ(p->ne[1], k.w);
            ASSERT_EQ(p->ne[2], k.w);
            ASSERT_EQ(p->ne[3], npx * npy);
            g.build(u, { p });
            fill_inputs(g, 9, 1.0f, 2.0f);
            ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
            const std::vector<float>   av  = get_values(a);
            const std::vector<int64_t> na  = shape_of(a);
            const auto                 ref = reference(p, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                const int64_t x = (i3 % npx) * k.w + i1, y = (i3 / npx) * k.w + i2;
                return x < k.w0 && y < k.h0 ? (double) av[flat(na, i0, x, y, 0)] : 0.0;
            });
            all_close(get_values(p), ref, 0.0, 0.0, what("win_part", WSP_GGML_TYPE_F32, layout, p));
            all_close(get_values(u), std::vector<double>(av.begin(), av.end()), 0.0, 0.0,
                      what("win_unpart", WSP_GGML_TYPE_F32, layout, u));
        }
    }
}

TEST(OpsLayout, GetRelPosGathersByRelativeDistance) {
    for (wsp_ggml_type type : float_types()) {
        for (int64_t n : { 1, 5, 14 }) {
            for (Layout layout : { Layout::Contiguous, Layout::Strided }) {
                Graph             g;
                wsp_ggml_tensor * a = make_operand(g, type, { 7, 2 * n - 1 }, layout);
                wsp_ggml_tensor * r = wsp_ggml_get_rel_pos(g.ctx(), a, (int) n, (int) n);
                g.build(r);
                fill_inputs(g, 13);
                ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                ASSERT_EQ(r->ne[1], n);
                ASSERT_EQ(r->ne[2], n);
                const std::vector<float>   av  = get_values(a);
                const std::vector<int64_t> na  = shape_of(a);
                const auto                 ref = reference(r, [&](int64_t i0, int64_t k, int64_t q, int64_t) {
                    return (double) av[flat(na, i0, (n - 1) + q - k, 0, 0)];
                });
                all_close(get_values(r), ref, 0.0, 0.0, what("get_rel_pos", type, layout, r));
            }
        }
    }
}

TEST(OpsLayout, AddRelPosAddsBothAxesAndInPlace) {
    struct Case {
        int64_t k, qw, qh, b;
    };
    for (const Case & c : { Case{ 3, 2, 5, 2 }, Case{ 1, 1, 1, 1 }, Case{ 7, 7, 7, 3 } }) {
        for (bool inplace : { false, true }) {
            Graph             g;
            wsp_ggml_tensor * a  = g.input(WSP_GGML_TYPE_F32, { c.k * c.k, c.qw * c.qh, c.b });
            wsp_ggml_tensor * pw = g.input(WSP_GGML_TYPE_F32, { c.k, c.qw, c.qh, c.b });
            wsp_ggml_tensor * ph = g.input(WSP_GGML_TYPE_F32, { c.k, c.qw, c.qh, c.b });
            wsp_ggml_tensor * r =
                inplace ? wsp_ggml_add_rel_pos_inplace(g.ctx(), a, pw, ph) : wsp_ggml_add_rel_pos(g.ctx(), a, pw, ph);
            g.build(r);
            fill_inputs(g, 17);
            const std::vector<float> av = get_values(a), wv = get_values(pw), hv = get_values(ph);
            ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
            const auto ref = reference(r, [&](int64_t kk, int64_t q, int64_t b, int64_t) {
                const int64_t h = kk / c.k, w = kk % c.k;
                const size_t  row = (size_t) (b * c.qw * c.qh + q) * (size_t) c.k;
                return (double) av[flat(shape_of(a), kk, q, b, 0)] + wv[row + w] + hv[row + h];
            });
            all_close(get_values(r), ref, 1e-6, 1e-6,
                      std::string("add_rel_pos ") + (inplace ? "in place " : "") + shape_str(r));
            if (inplace) {
                EXPECT_EQ(r->data, a->data);
            }
        }
    }
}

// ---- UPSCALE, ARANGE, TIMESTEP_EMBEDDING

// upstream's coordinate maps: nearest takes i / sf; bilinear samples at (i + 0.5) / sf - 0.5
// between the two neighbours clamped to the edge (sf in float, as the kernels have it)
double upscale_ref(const std::vector<float> & av, const std::vector<int64_t> & na, const wsp_ggml_tensor * r,
                   bool bilinear, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float sf[4];
    for (int d = 0; d < 4; ++d) {
        sf[d] = (float) r->ne[d] / (float) na[d];
    }
    const int64_t j2 = (int64_t) ((float) i2 / sf[2]), j3 = (int64_t) ((float) i3 / sf[3]);
    if (!bilinear) {
        return av[flat(na, (int64_t) ((float) i0 / sf[0]), (int64_t) ((float) i1 / sf[1]), j2, j3)];
    }
    auto tap = [](int64_t i, float s, int64_t n, int64_t & lo, int64_t & hi) {
        const double x = ((double) i + 0.5) / (double) s - 0.5;
        lo             = std::clamp<int64_t>((int64_t) std::floor(x), 0, n - 1);
        hi             = std::clamp<int64_t>((int64_t) std::floor(x) + 1, 0, n - 1);
        return std::clamp(x - std::floor(x), 0.0, 1.0);
    };
    int64_t      x0, x1, y0, y1;
    const double dx = tap(i0, sf[0], na[0], x0, x1), dy = tap(i1, sf[1], na[1], y0, y1);
    return av[flat(na, x0, y0, j2, j3)] * (1 - dx) * (1 - dy) + av[flat(na, x1, y0, j2, j3)] * dx * (1 - dy) +
           av[flat(na, x0, y1, j2, j3)] * (1 - dx) * dy + av[flat(na, x1, y1, j2, j3)] * dx * dy;
}

TEST(OpsLayout, UpscaleNearestAndBilinear) {
    struct Case {
        std::vector<int64_t> a;
        std::vector<int64_t> to; // empty: upscale by 2
    };
    const std::vector<Case> cases = {
        { { 1, 1 }, {} }, { { 5, 3, 2 }, {} }, { { 5, 3, 2 }, { 7, 8, 3, 1 } }, { { 13, 7 }, { 13, 29, 1, 2 } }
    };
    for (wsp_ggml_type type : float_types()) {
        for (wsp_ggml_scale_mode mode : { WSP_GGML_SCALE_MODE_NEAREST, WSP_GGML_SCALE_MODE_BILINEAR }) {
            for (Layout layout : LAYOUTS) {
                for (const Case & c : cases) {
                    Graph             g;
                    wsp_ggml_tensor * a = make_operand(g, type, c.a, layout);
                    wsp_ggml_tensor * r = c.to.empty() ? wsp_ggml_upscale(g.ctx(), a, 2, mode)
                                                       : wsp_ggml_upscale_ext(g.ctx(), a, (int) c.to[0], (int) c.to[1],
                                                                              (int) c.to[2], (int) c.to[3], mode);
                    g.build(r);
                    fill_inputs(g, 19);
                    ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
                    const std::vector<float>   av  = get_values(a);
                    const std::vector<int64_t> na  = shape_of(a);
                    const auto                 ref = reference(r, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                        return upscale_ref(av, na, r, mode == WSP_GGML_SCALE_MODE_BILINEAR, i0, i1, i2, i3);
                    });
                    // the sample coordinate is a float: its rounding moves a weight by ~eps of the
                    // inputs' magnitude (|a| < 1)
                    const double tol = 2.0 * type_eps(type);
                    all_close(get_values(r), ref, 4.0 * tol, tol,
                              what(mode == WSP_GGML_SCALE_MODE_NEAREST ? "upscale nearest" : "upscale bilinear", type,
                                   layout, r));
                }
            }
        }
    }
}

TEST(OpsLayout, ArangeCountsAndValues) {
    struct Case {
        float start, stop, step;
    };
    for (const Case & c : { Case{ 0.0f, 10.0f, 1.0f }, Case{ -3.0f, 2.0f, 0.7f }, Case{ 1.5f, 1.6f, 1.0f } }) {
        Graph             g;
        wsp_ggml_tensor * r = wsp_ggml_arange(g.ctx(), c.start, c.stop, c.step);
        ASSERT_EQ(r->ne[0], (int64_t) std::ceil((c.stop - c.start) / c.step));
        g.build(r);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        std::vector<double> ref((size_t) r->ne[0]);
        for (size_t i = 0; i < ref.size(); ++i) {
            ref[i] = (double) c.start + (double) c.step * (double) i;
        }
        all_close(get_values(r), ref, 1e-6, 1e-6, "arange " + shape_str(r));
    }
}

TEST(OpsLayout, TimestepEmbeddingEvenAndOddDims) {
    for (int dim : { 1, 2, 7, 64, 321 }) {
        Graph             g;
        wsp_ggml_tensor * t = g.input(WSP_GGML_TYPE_F32, { 5 });
        wsp_ggml_tensor * r = wsp_ggml_timestep_embedding(g.ctx(), t, dim, 10000);
        ASSERT_EQ(r->ne[0], dim + dim % 2);
        ASSERT_EQ(r->ne[1], 5);
        g.build(r);
        fill_inputs(g, 23, 0.0f, 1000.0f);
        ASSERT_EQ(g.run(2), WSP_GGML_STATUS_SUCCESS);
        const std::vector<float> tv   = get_values(t);
        const int64_t            half = dim / 2;
        const auto               ref  = reference(r, [&](int64_t i0, int64_t n, int64_t, int64_t) {
            if (i0 >= 2 * half) {
                return 0.0;
            }
            const int64_t j    = i0 % half;
            const double  freq = std::exp(-std::log(10000.0) * (double) j / (double) half);
            return i0 < half ? std::cos(tv[n] * freq) : std::sin(tv[n] * freq);
        });
        all_close(get_values(r), ref, 1e-6, 0.0, "timestep_embedding dim " + std::to_string(dim));
    }
}

// ---- ARGSORT, top_k

// a stable sort of the row: the permutation the kernel must give (ties in index order)
std::vector<int32_t> sorted_indices(const std::vector<float> & v, size_t off, int64_t n, bool desc) {
    std::vector<int32_t> idx((size_t) n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int32_t x, int32_t y) { return desc ? v[off + x] > v[off + y] : v[off + x] < v[off + y]; });
    return idx;
}

TEST(OpsLayout, ArgsortBothOrdersWithTiesAndTopK) {
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 1000, 3 }, { 8, 2, 2, 2 } };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                Graph             g;
                wsp_ggml_tensor * a    = make_operand(g, type, ne, layout);
                wsp_ggml_tensor * asc  = wsp_ggml_argsort(g.ctx(), a, WSP_GGML_SORT_ORDER_ASC);
                wsp_ggml_tensor * desc = wsp_ggml_argsort(g.ctx(), a, WSP_GGML_SORT_ORDER_DESC);
                const int         k    = (int) std::min<int64_t>(ne[0], 5);
                wsp_ggml_tensor * top  = wsp_ggml_top_k(g.ctx(), a, k);
                g.build(asc, { desc, top });
                fill_inputs(g, 29, -8.0f, 8.0f);
                // whole numbers in [-8, 8]: many ties, which must keep their index order
                std::vector<float> av = get_values(a);
                for (float & x : av) {
                    x = std::round(x);
                }
                set_values(a, av);
                ASSERT_EQ(g.run(3), WSP_GGML_STATUS_SUCCESS);
                const std::vector<float> ra = get_values(asc), rd = get_values(desc), rt = get_values(top);
                std::vector<double>      ref_a, ref_d, ref_t;
                for (size_t off = 0; off < av.size(); off += (size_t) ne[0]) {
                    for (int32_t i : sorted_indices(av, off, ne[0], false)) {
                        ref_a.push_back(i);
                    }
                    const std::vector<int32_t> d = sorted_indices(av, off, ne[0], true);
                    for (size_t i = 0; i < d.size(); ++i) {
                        ref_d.push_back(d[i]);
                        if ((int) i < k) {
                            ref_t.push_back(d[i]);
                        }
                    }
                }
                EXPECT_EQ(asc->type, WSP_GGML_TYPE_I32);
                all_close(ra, ref_a, 0.0, 0.0, what("argsort asc", type, layout, asc));
                all_close(rd, ref_d, 0.0, 0.0, what("argsort desc", type, layout, desc));
                all_close(rt, ref_t, 0.0, 0.0, what("top_k", type, layout, top));
            }
        }
    }
}

TEST(OpsLayout, ArgsortPutsNanLast) {
    Graph             g;
    wsp_ggml_tensor * a    = g.input(WSP_GGML_TYPE_F32, { 5 });
    wsp_ggml_tensor * asc  = wsp_ggml_argsort(g.ctx(), a, WSP_GGML_SORT_ORDER_ASC);
    wsp_ggml_tensor * desc = wsp_ggml_argsort(g.ctx(), a, WSP_GGML_SORT_ORDER_DESC);
    g.build(asc, { desc });
    set_values(a, { 2.0f, NAN, -1.0f, 2.0f, 0.5f });
    ASSERT_EQ(g.run(1), WSP_GGML_STATUS_SUCCESS);
    all_close(get_values(asc), { 2, 4, 0, 3, 1 }, 0.0, 0.0, "argsort asc with NaN");
    all_close(get_values(desc), { 1, 0, 3, 4, 2 }, 0.0, 0.0, "argsort desc with NaN");
}

// ---- shape checks

class LayoutDeath : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ctx_ = wsp_ggml_init({ 64 * wsp_ggml_tensor_overhead(), nullptr, true });
    }
    void TearDown() override { wsp_ggml_free(ctx_); }

    wsp_ggml_tensor * t(wsp_ggml_type type, std::vector<int64_t> ne) {
        ne.resize(4, 1);
        return wsp_ggml_new_tensor(ctx_, type, 4, ne.data());
    }

    wsp_ggml_context * ctx_ = nullptr;
};

TEST_F(LayoutDeath, BuildersRejectBadShapes) {
    EXPECT_DEATH(wsp_ggml_repeat(ctx_, t(WSP_GGML_TYPE_F32, { 3, 2 }), t(WSP_GGML_TYPE_F32, { 7, 2 })),
                 "wsp_ggml_repeat: invalid arguments .*wsp_ggml_can_repeat");
    EXPECT_DEATH(wsp_ggml_repeat_4d(ctx_, t(WSP_GGML_TYPE_F32, { 3, 2 }), 6, 3, 1, 1), "wsp_ggml_repeat_4d");
    EXPECT_DEATH(wsp_ggml_pad(ctx_, t(WSP_GGML_TYPE_F32, { 3 }), -1, 0, 0, 0), "wsp_ggml_pad: .*p0 >= 0");
    EXPECT_DEATH(wsp_ggml_roll(ctx_, t(WSP_GGML_TYPE_F32, { 3 }), 3, 0, 0, 0), "wsp_ggml_roll");
    EXPECT_DEATH(wsp_ggml_win_part(ctx_, t(WSP_GGML_TYPE_F32, { 3, 4, 4, 2 }), 2), "wsp_ggml_win_part");
    EXPECT_DEATH(wsp_ggml_win_unpart(ctx_, t(WSP_GGML_TYPE_F32, { 3, 2, 2, 3 }), 4, 4, 2), "wsp_ggml_win_unpart");
    EXPECT_DEATH(wsp_ggml_get_rel_pos(ctx_, t(WSP_GGML_TYPE_F16, { 4, 9 }), 5, 4), "wsp_ggml_get_rel_pos: .*qh == kh");
    EXPECT_DEATH(wsp_ggml_get_rel_pos(ctx_, t(WSP_GGML_TYPE_F16, { 4, 8 }), 5, 5), "wsp_ggml_get_rel_pos");
    EXPECT_DEATH(wsp_ggml_add_rel_pos(ctx_, t(WSP_GGML_TYPE_F32, { 9, 10, 2 }), t(WSP_GGML_TYPE_F32, { 3, 2, 5, 2 }),
                                      t(WSP_GGML_TYPE_F32, { 3, 2, 4, 2 })),
                 "wsp_ggml_add_rel_pos: .*are_same_shape");
    EXPECT_DEATH(wsp_ggml_add_rel_pos(ctx_, t(WSP_GGML_TYPE_F32, { 8, 10, 2 }), t(WSP_GGML_TYPE_F32, { 3, 2, 5, 2 }),
                                      t(WSP_GGML_TYPE_F32, { 3, 2, 5, 2 })),
                 "wsp_ggml_add_rel_pos: .*pw->ne\\[0\\] \\* pw->ne\\[0\\] == a->ne\\[0\\]");
    EXPECT_DEATH(wsp_ggml_upscale_ext(ctx_, t(WSP_GGML_TYPE_F32, { 4, 4 }), 3, 4, 1, 1, WSP_GGML_SCALE_MODE_NEAREST),
                 "wsp_ggml_upscale_ext");
    EXPECT_DEATH(wsp_ggml_arange(ctx_, 2.0f, 1.0f, 1.0f), "wsp_ggml_arange: needs stop > start");
    EXPECT_DEATH(wsp_ggml_top_k(ctx_, t(WSP_GGML_TYPE_F32, { 4, 2 }), 5), "wsp_ggml_top_k");
    EXPECT_DEATH(wsp_ggml_timestep_embedding(ctx_, t(WSP_GGML_TYPE_F32, { 4, 2 }), 8, 10000),
                 "wsp_ggml_timestep_embedding");
}

} // namespace
} // namespace wsp::test
