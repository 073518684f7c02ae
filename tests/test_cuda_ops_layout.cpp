// The CUDA kernels of the position ops against the CPU backend, node by node on every CUDA
// device: REPEAT, PAD, ROLL, WIN_PART / WIN_UNPART, GET_REL_POS, ADD_REL_POS, UPSCALE, ARANGE,
// TIMESTEP_EMBEDDING, ARGSORT / top_k and ROPE in every mode, over sizes of 1, primes, permuted
// and strided operands and in-place nodes. Without a GPU every case is skipped with the reason.

#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// F32 results agree to an NMSE of 1e-10 (see tests/test_cuda_ops.cpp, Note [tolerances]); I32
// results exactly
constexpr double F32_TOL = 1e-10;

using Build = std::function<std::vector<wsp_ggml_tensor *>(wsp_ggml_context *)>;
using Fill  = std::function<bool(wsp_ggml_tensor *, uint32_t seed)>;

wsp_ggml_tensor * named_input(wsp_ggml_context * ctx, wsp_ggml_type type, std::vector<int64_t> ne, const char * name) {
    ne.resize(4, 1);
    wsp_ggml_tensor * t = wsp_ggml_new_tensor(ctx, type, 4, ne.data());
    wsp_ggml_set_name(t, name);
    wsp_ggml_set_input(t);
    return t;
}

struct CompareCtx {
    double tol;
    int    checked;
};

bool check_node(int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * user_data) {
    auto * c = static_cast<CompareCtx *>(user_data);
    if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
        return true;
    }
    const std::string        what = "node " + std::to_string(i) + " " + wsp_ggml_op_desc(t1) + " " + shape_str(t1);
    const std::vector<float> gpu = device_values(t2), cpu = get_values(t1);
    if (t1->type == WSP_GGML_TYPE_I32) {
        EXPECT_EQ(gpu, cpu) << what;
    } else {
        const double tol = t1->type == WSP_GGML_TYPE_F32 ? c->tol : std::max(c->tol, nmse_bound(t1->type));
        EXPECT_LT(nmse(gpu, cpu), tol) << what;
    }
    ++c->checked;
    return true;
}

// inputs: fill(t, seed) where it says so, else uniform values in [lo, hi) (whole numbers for I32)
void fill_all(wsp_ggml_context * ctx, const Fill & fill, float lo, float hi) {
    uint32_t seed = 11;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (!(t->flags & WSP_GGML_TENSOR_FLAG_INPUT)) {
            continue;
        }
        ++seed;
        if (fill && fill(t, seed)) {
            continue;
        }
        const std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed, lo, hi);
        if (t->type == WSP_GGML_TYPE_I32) {
            std::vector<int32_t> k(v.size());
            for (size_t i = 0; i < v.size(); ++i) {
                k[i] = (int32_t) (v[i] * 1000.0f);
            }
            set_i32(t, k);
        } else {
            set_values(t, v);
        }
    }
}

// every node of build's graph computed on each CUDA device and on the CPU, then compared
void compare(const Build & build, const Fill & fill = nullptr, float lo = -1.0f, float hi = 1.0f) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph                          g(4096);
        std::vector<wsp_ggml_tensor *> outs = build(g.ctx());
        ASSERT_FALSE(outs.empty());
        g.build(outs[0], std::vector<wsp_ggml_tensor *>(outs.begin() + 1, outs.end()));
        fill_all(g.ctx(), fill, lo, hi);
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        ASSERT_NE(cuda, nullptr);
        for (wsp_ggml_tensor * o : outs) {
            EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, o)) << wsp_ggml_op_desc(o) << " " << shape_str(o);
        }
        CompareCtx c{ F32_TOL, 0 };
        EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.backend(), cuda, g.graph(), check_node, &c));
        EXPECT_GT(c.checked, 0);
        wsp_ggml_backend_free(cuda);
    }
}

std::string trace(wsp_ggml_type type, Layout layout, const std::vector<int64_t> & ne) {
    std::ostringstream s;
    s << wsp_ggml_type_name(type) << " " << layout_name(layout) << " ne";
    for (int64_t n : ne) {
        s << " " << n;
    }
    return s.str();
}

// ---- REPEAT, PAD, ROLL

TEST(CudaLayout, RepeatPadRollTypesAndLayouts) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 7, 3, 2, 2 } };
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_I32 }) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(trace(type, layout, ne));
                compare([&](wsp_ggml_context * ctx) {
                    std::vector<int64_t> n4 = ne;
                    n4.resize(4, 1);
                    wsp_ggml_tensor * a = operand(ctx, type, ne, layout);
                    // roll wants whole elements along dim 0 (as upstream): no permuted operand
                    const Layout roll_layout = layout == Layout::Permuted ? Layout::Contiguous : layout;
                    return std::vector<wsp_ggml_tensor *>{
                        wsp_ggml_repeat_4d(ctx, a, n4[0] * 2, n4[1] * 3, n4[2], n4[3] * 2),
                        wsp_ggml_pad(ctx, operand(ctx, type, ne, layout), 5, 1, 2, 1),
                        wsp_ggml_roll(ctx, operand(ctx, type, ne, roll_layout), (int) (n4[0] / 2), -(int) (n4[1] / 2),
                                      (int) (n4[2] - 1), 0),
                    };
                });
            }
        }
    }
}

// ---- WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS

TEST(CudaLayout, WindowsAndRelativePositions) {
    REQUIRE_GPU();
    struct Case {
        int64_t c, w0, h0;
        int     w;
    };
    for (const Case & k : { Case{ 3, 7, 5, 3 }, Case{ 1, 1, 1, 1 }, Case{ 33, 14, 14, 7 } }) {
        for (Layout layout : { Layout::Contiguous, Layout::Strided }) {
            SCOPED_TRACE(trace(WSP_GGML_TYPE_F32, layout, { k.c, k.w0, k.h0, k.w }));
            compare([&](wsp_ggml_context * ctx) {
                wsp_ggml_tensor * a = operand(ctx, WSP_GGML_TYPE_F32, { k.c, k.w0, k.h0 }, layout);
                wsp_ggml_tensor * p = wsp_ggml_win_part(ctx, a, k.w);
                return std::vector<wsp_ggml_tensor *>{ wsp_ggml_win_unpart(ctx, p, (int) k.w0, (int) k.h0, k.w), p };
            });
        }
    }
    for (wsp_ggml_type type : float_types()) {
        for (int64_t n : { 1, 5, 14 }) {
            SCOPED_TRACE(trace(type, Layout::Strided, { n }));
            compare([&](wsp_ggml_context * ctx) {
                return std::vector<wsp_ggml_tensor *>{ wsp_ggml_get_rel_pos(
                    ctx, operand(ctx, type, { 7, 2 * n - 1 }, Layout::Strided), (int) n, (int) n) };
            });
        }
    }
    for (int64_t k : { 1, 3, 14 }) {
        SCOPED_TRACE("add_rel_pos k " + std::to_string(k));
        compare([&](wsp_ggml_context * ctx) {
            auto in = [&](std::vector<int64_t> ne) { return operand(ctx, WSP_GGML_TYPE_F32, ne, Layout::Contiguous); };
            const int64_t qw = k, qh = k + 1, b = 2;
            return std::vector<wsp_ggml_tensor *>{
                wsp_ggml_add_rel_pos(ctx, in({ k * k, qw * qh, b }), in({ k, qw, qh, b }), in({ k, qw, qh, b })),
                wsp_ggml_add_rel_pos_inplace(ctx, in({ k * k, qw * qh, b }), in({ k, qw, qh, b }),
                                             in({ k, qw, qh, b })),
            };
        });
    }
}

// ---- UPSCALE, ARANGE, TIMESTEP_EMBEDDING

TEST(CudaLayout, UpscaleModesTypesAndLayouts) {
    REQUIRE_GPU();
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (wsp_ggml_scale_mode mode : { WSP_GGML_SCALE_MODE_NEAREST, WSP_GGML_SCALE_MODE_BILINEAR }) {
                SCOPED_TRACE(trace(type, layout, { (int64_t) mode }));
                compare([&](wsp_ggml_context * ctx) {
                    return std::vector<wsp_ggml_tensor *>{
                        wsp_ggml_upscale(ctx, operand(ctx, type, { 1, 1 }, layout), 3, mode),
                        wsp_ggml_upscale(ctx, operand(ctx, type, { 37, 5, 3 }, layout), 2, mode),
                        wsp_ggml_upscale_ext(ctx, operand(ctx, type, { 13, 7, 2 }, layout), 13, 29, 3, 2, mode),
                    };
                });
            }
        }
    }
}

TEST(CudaLayout, ArangeAndTimestepEmbedding) {
    REQUIRE_GPU();
    compare(
        [](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * t = named_input(ctx, WSP_GGML_TYPE_F32, { 37 }, "t");
            return std::vector<wsp_ggml_tensor *>{
                wsp_ggml_arange(ctx, -3.0f, 1000.0f, 0.7f),      wsp_ggml_arange(ctx, 0.0f, 1.0f, 1.0f),
                wsp_ggml_timestep_embedding(ctx, t, 320, 10000), wsp_ggml_timestep_embedding(ctx, t, 7, 10000),
                wsp_ggml_timestep_embedding(ctx, t, 1, 100),
            };
        },
        nullptr, 0.0f, 1000.0f);
}

// ---- ARGSORT, top_k

// whole numbers in a small range: many ties, which both backends order by index
bool tie_fill(wsp_ggml_tensor * t, uint32_t seed) {
    std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed, -20.0f, 20.0f);
    for (float & x : v) {
        x = std::round(x);
    }
    set_values(t, v);
    return true;
}

TEST(CudaLayout, ArgsortOrdersTiesAndTopK) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 1000, 3 }, { 4096, 2 }, { 2, 2, 2, 2 } };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(trace(type, layout, ne));
                compare(
                    [&](wsp_ggml_context * ctx) {
                        wsp_ggml_tensor * a = operand(ctx, type, ne, layout);
                        return std::vector<wsp_ggml_tensor *>{
                            wsp_ggml_argsort(ctx, a, WSP_GGML_SORT_ORDER_ASC),
                            wsp_ggml_argsort(ctx, a, WSP_GGML_SORT_ORDER_DESC),
                            wsp_ggml_top_k(ctx, a, (int) std::min<int64_t>(ne[0], 3)),
                        };
                    },
                    tie_fill);
            }
        }
    }
}

TEST(CudaLayout, ArgsortRowsPastTheLimitFallBack) {
    REQUIRE_GPU();
    wsp_ggml_context * ctx = wsp_ggml_init({ 8 * wsp_ggml_tensor_overhead(), nullptr, true });
    wsp_ggml_tensor *  ok =
        wsp_ggml_argsort(ctx, wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4096), WSP_GGML_SORT_ORDER_ASC);
    wsp_ggml_tensor * long_row =
        wsp_ggml_argsort(ctx, wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 4097), WSP_GGML_SORT_ORDER_ASC);
    wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(0);
    EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, ok));
    EXPECT_FALSE(wsp_ggml_backend_supports_op(cuda, long_row));
    wsp_ggml_backend_free(cuda);
    wsp_ggml_free(ctx);
}

// ---- ROPE

struct RopeCase {
    std::vector<int64_t> ne;
    int                  n_dims, mode;
    bool                 ff;
    float                freq_scale, ext_factor, attn_factor;
    int                  sections[4];
};

// positions spread over [-100, 1900); frequency factors in [0.5, 4)
bool rope_fill(wsp_ggml_tensor * t, uint32_t seed) {
    if (std::strcmp(t->name, "pos") == 0) {
        std::vector<int32_t> p((size_t) t->ne[0]);
        for (size_t i = 0; i < p.size(); ++i) {
            p[i] = (int32_t) ((i * 7919 + seed) % 2000) - 100;
        }
        set_i32(t, p);
        return true;
    }
    if (std::strcmp(t->name, "ff") == 0) {
        set_values(t, random_values((size_t) t->ne[0], seed, 0.5f, 4.0f));
        return true;
    }
    return false;
}

std::vector<wsp_ggml_tensor *> rope_graph(wsp_ggml_context * ctx, const RopeCase & c, wsp_ggml_type type,
                                          Layout layout) {
    const bool        multi   = (c.mode & WSP_GGML_ROPE_TYPE_MROPE) != 0;
    const int64_t     ne2     = c.ne.size() > 2 ? c.ne[2] : 1;
    wsp_ggml_tensor * pos     = named_input(ctx, WSP_GGML_TYPE_I32, { (multi ? 4 : 1) * ne2 }, "pos");
    const int         n_pairs = c.mode == WSP_GGML_ROPE_TYPE_VISION ? c.n_dims : c.n_dims / 2;
    wsp_ggml_tensor * ff      = c.ff ? named_input(ctx, WSP_GGML_TYPE_F32, { n_pairs }, "ff") : nullptr;
    if (multi) {
        int s[4] = { c.sections[0], c.sections[1], c.sections[2], c.sections[3] };
        return { wsp_ggml_rope_multi(ctx, operand(ctx, type, c.ne, layout), pos, ff, c.n_dims, s, c.mode, 4096,
                                     10000.0f, c.freq_scale, c.ext_factor, c.attn_factor, 32.0f, 1.0f) };
    }
    return {
        wsp_ggml_rope_ext(ctx, operand(ctx, type, c.ne, layout), pos, ff, c.n_dims, c.mode, 4096, 10000.0f,
                          c.freq_scale, c.ext_factor, c.attn_factor, 32.0f, 1.0f),
        wsp_ggml_rope_ext_inplace(ctx, operand(ctx, type, c.ne, Layout::Contiguous), pos, ff, c.n_dims, c.mode, 4096,
                                  10000.0f, c.freq_scale, c.ext_factor, c.attn_factor, 32.0f, 1.0f),
    };
}

TEST(CudaRope, EveryModeTypeAndLayout) {
    REQUIRE_GPU();
    const std::vector<RopeCase> cases = {
        { { 64, 4, 7 }, 64, 0, false, 1.0f, 0.0f, 1.0f, {} },
        { { 50, 3, 5, 2 }, 20, 0, true, 0.25f, 1.0f, 1.0f, {} },
        { { 50, 3, 5 }, 20, WSP_GGML_ROPE_TYPE_NEOX, false, 1.0f, 0.0f, 1.0f, {} },
        { { 128, 2, 9 }, 128, WSP_GGML_ROPE_TYPE_NEOX, true, 0.5f, 0.5f, 0.8f, {} },
        { { 40, 3, 5 }, 32, WSP_GGML_ROPE_TYPE_MROPE, false, 1.0f, 0.0f, 1.0f, { 4, 6, 6, 0 } },
        { { 32, 2, 4 }, 32, WSP_GGML_ROPE_TYPE_MROPE, true, 0.5f, 1.0f, 1.0f, { 3, 2, 2, 1 } },
        { { 32, 3, 5 }, 16, WSP_GGML_ROPE_TYPE_VISION, false, 1.0f, 0.0f, 1.0f, { 8, 8, 0, 0 } },
        { { 24, 2, 3 }, 12, WSP_GGML_ROPE_TYPE_VISION, true, 1.0f, 0.0f, 1.0f, { 4, 2, 0, 0 } },
    };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : { Layout::Contiguous, Layout::Strided }) {
            for (const RopeCase & c : cases) {
                SCOPED_TRACE(trace(type, layout, c.ne) + " mode " + std::to_string(c.mode));
                compare([&](wsp_ggml_context * ctx) { return rope_graph(ctx, c, type, layout); }, rope_fill);
            }
        }
    }
}

} // namespace
} // namespace wsp::test
