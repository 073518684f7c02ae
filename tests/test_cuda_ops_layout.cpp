// The CUDA kernels of the position ops against the CPU backend, node by node on every CUDA
// device: REPEAT, PAD, ROLL, WIN_PART / WIN_UNPART, GET_REL_POS, ADD_REL_POS, UPSCALE, ARANGE,
// TIMESTEP_EMBEDDING, ARGSORT / top_k and ROPE in every mode, over sizes of 1, primes, permuted
// and strided operands and in-place nodes; and the copies of cpy.cu (word copies, vector
// conversions, mat-mul activations, views past 2 GiB) bit for bit. Without a GPU every case is
// skipped with the reason.

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

// ---- CPY / CONT / DUP: word copies and vector conversions (cpy.cu), mat-mul activations

// Copies and conversions must equal the CPU's bit for bit: the bytes of every element (every
// block of a quantized type) of the result, each side read with its own strides.
bool check_bytes(int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * user_data) {
    auto * c = static_cast<CompareCtx *>(user_data);
    if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
        return true;
    }
    std::vector<uint8_t> raw(wsp_ggml_nbytes(t2));
    wsp_ggml_backend_tensor_get(t2, raw.data(), 0, raw.size());
    const size_t  es  = wsp_ggml_type_size(t1->type);
    const int64_t n0  = t1->ne[0] / wsp_ggml_blck_size(t1->type);
    int64_t       bad = 0, first = -1, flat = 0;
    for (int64_t i3 = 0; i3 < t1->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < t1->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < t1->ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < n0; ++i0, ++flat) {
                    const size_t oc = i0 * t1->nb[0] + i1 * t1->nb[1] + i2 * t1->nb[2] + i3 * t1->nb[3];
                    const size_t og = i0 * t2->nb[0] + i1 * t2->nb[1] + i2 * t2->nb[2] + i3 * t2->nb[3];
                    if (std::memcmp(static_cast<const char *>(t1->data) + oc, raw.data() + og, es) != 0) {
                        first = first < 0 ? flat : first;
                        ++bad;
                    }
                }
            }
        }
    }
    EXPECT_EQ(bad, 0) << "node " << i << " " << wsp_ggml_op_desc(t1) << " " << shape_str(t1) << " "
                      << wsp_ggml_type_name(t1->type) << ": elements differ, the first at flat index " << first;
    ++c->checked;
    return true;
}

void compare_bytes(const Build & build) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph                          g(4096);
        std::vector<wsp_ggml_tensor *> outs = build(g.ctx());
        ASSERT_FALSE(outs.empty());
        g.build(outs[0], std::vector<wsp_ggml_tensor *>(outs.begin() + 1, outs.end()));
        fill_all(g.ctx(), nullptr, -3.0f, 3.0f);
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        ASSERT_NE(cuda, nullptr);
        for (wsp_ggml_tensor * o : outs) {
            EXPECT_TRUE(wsp_ggml_backend_supports_op(cuda, o)) << wsp_ggml_op_desc(o) << " " << shape_str(o);
        }
        CompareCtx c{ 0.0, 0 };
        EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.backend(), cuda, g.graph(), check_bytes, &c));
        EXPECT_GE(c.checked, (int) outs.size());
        wsp_ggml_backend_free(cuda);
    }
}

// a new input of logical shape ne whose rows sit `pad` elements apart beyond ne0, the first one
// `offset` bytes into the input
wsp_ggml_tensor * padded(wsp_ggml_context * ctx, wsp_ggml_type type, std::vector<int64_t> ne, int64_t pad,
                         size_t offset) {
    ne.resize(4, 1);
    wsp_ggml_tensor * base = wsp_ggml_new_tensor_4d(ctx, type, ne[0] + pad, ne[1], ne[2], ne[3]);
    wsp_ggml_set_input(base);
    return wsp_ggml_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3], offset);
}

// copies of the same shape into a new tensor of `type`, from x and from its permutations
std::vector<wsp_ggml_tensor *> copies_of(wsp_ggml_context * ctx, wsp_ggml_tensor * x, wsp_ggml_type type) {
    auto into = [&](wsp_ggml_tensor * s) { return wsp_ggml_cpy(ctx, s, wsp_ggml_new_tensor(ctx, type, 4, s->ne)); };
    return { into(x), into(wsp_ggml_permute(ctx, x, 0, 2, 1, 3)), into(wsp_ggml_transpose(ctx, x)) };
}

// Note [word copies]: 16-byte words where rows, pointers and strides allow, narrower words down to
// bytes where they do not (rows of odd byte length, views one element or two bytes in), elements
// one by one from transposed sources; large and small, F32 / F16 / BF16 / I32 and blocks.
TEST(CudaCpy, SameTypeWordsAndTheirFallbacks) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1 },        { 3, 2 },    { 4, 4, 2 }, { 37, 5, 3 },
                                                       { 64, 7, 2 }, { 1031, 3 }, { 1280, 24 } };
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_I32 }) {
        for (const auto & ne : shapes) {
            SCOPED_TRACE(trace(type, Layout::Contiguous, ne));
            const size_t es = wsp_ggml_type_size(type);
            compare_bytes([&](wsp_ggml_context * ctx) {
                std::vector<wsp_ggml_tensor *> outs;
                for (Layout layout : LAYOUTS) {
                    outs.push_back(wsp_ggml_cont(ctx, operand(ctx, type, ne, layout)));
                }
                // rows 4 or 8 elements apart: aligned rows of any length, their tails narrower
                for (int64_t pad : { 4, 8 }) {
                    for (wsp_ggml_tensor * c : copies_of(ctx, padded(ctx, type, ne, pad, 0), type)) {
                        outs.push_back(c);
                    }
                }
                // one element in, two bytes in: words no wider than the element, then bytes
                outs.push_back(wsp_ggml_cont(ctx, padded(ctx, type, ne, 4, es)));
                outs.push_back(wsp_ggml_cont(ctx, padded(ctx, type, ne, 5, es == 2 ? 1 : 2)));
                outs.push_back(wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, padded(ctx, type, ne, 3, es))));
                // into rows that sit apart: a strided destination
                wsp_ggml_tensor * x   = operand(ctx, type, ne, Layout::Contiguous);
                wsp_ggml_tensor * big = wsp_ggml_new_tensor_4d(ctx, type, x->ne[0] + 4, x->ne[1], x->ne[2], x->ne[3]);
                outs.push_back(wsp_ggml_cpy(ctx, x,
                                            wsp_ggml_view_4d(ctx, big, x->ne[0], x->ne[1], x->ne[2], x->ne[3],
                                                             big->nb[1], big->nb[2], big->nb[3], 0)));
                return outs;
            });
        }
    }
    // blocks: 34-byte (Q8_0) and 20-byte (Q4_1) words of every other row
    for (wsp_ggml_type q : { WSP_GGML_TYPE_Q8_0, WSP_GGML_TYPE_Q4_1 }) {
        SCOPED_TRACE(wsp_ggml_type_name(q));
        compare_bytes([&](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * x = operand(ctx, q, { 96, 14, 3 }, Layout::Contiguous);
            return std::vector<wsp_ggml_tensor *>{
                wsp_ggml_cont(ctx, wsp_ggml_view_3d(ctx, x, 96, 7, 3, 2 * x->nb[1], x->nb[2], 0)),
                wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, x, 0, 2, 1, 3)),
            };
        });
    }
}

// Note [vector conversion]: the vector path (whole contiguous tensors, aligned rows with and
// without a tail, rows reordered) and the element path (views one element in, transposes) of every
// pair of float types, and whisper's activation (1280 x 1500) in F32 to F16 and BF16.
TEST(CudaCpy, ConversionsVectorPathAndFallbacks) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1 },        { 3 },        { 4, 3 },   { 5, 2 },
                                                       { 37, 5, 3 }, { 64, 7, 2 }, { 1031, 3 } };
    for (wsp_ggml_type from : float_types()) {
        for (wsp_ggml_type to : float_types()) {
            if (from == to) {
                continue;
            }
            for (const auto & ne : shapes) {
                SCOPED_TRACE(std::string(wsp_ggml_type_name(from)) + " -> " + wsp_ggml_type_name(to) + " ne0 " +
                             std::to_string(ne[0]));
                const size_t es = wsp_ggml_type_size(from);
                compare_bytes([&](wsp_ggml_context * ctx) {
                    std::vector<wsp_ggml_tensor *> outs;
                    for (Layout layout : LAYOUTS) {
                        outs.push_back(wsp_ggml_cast(ctx, operand(ctx, from, ne, layout), to));
                    }
                    // rows a multiple of 4 elements apart (aligned: vectors, and tails where ne0 % 4)
                    // or not (2 apart, one element in: elements one by one)
                    const int64_t aligned_pad = 4 + (4 - ne[0] % 4) % 4;
                    for (wsp_ggml_tensor * c : copies_of(ctx, padded(ctx, from, ne, aligned_pad, 0), to)) {
                        outs.push_back(c);
                    }
                    // both sides in aligned rows: vectors and a tail in every row
                    wsp_ggml_tensor * pd = padded(ctx, to, ne, aligned_pad, 0);
                    outs.push_back(wsp_ggml_cpy(ctx, padded(ctx, from, ne, aligned_pad, 0), pd));
                    outs.push_back(wsp_ggml_cast(ctx, padded(ctx, from, ne, 2, 0), to));
                    outs.push_back(wsp_ggml_cast(ctx, padded(ctx, from, ne, aligned_pad, es), to));
                    // into a destination one element in
                    wsp_ggml_tensor * x   = operand(ctx, from, ne, Layout::Contiguous);
                    wsp_ggml_tensor * big = wsp_ggml_new_tensor_1d(ctx, to, wsp_ggml_nelements(x) + 1);
                    outs.push_back(
                        wsp_ggml_cpy(ctx, x,
                                     wsp_ggml_view_4d(ctx, big, x->ne[0], x->ne[1], x->ne[2], x->ne[3],
                                                      x->ne[0] * big->nb[0], x->ne[0] * x->ne[1] * big->nb[0],
                                                      x->ne[0] * x->ne[1] * x->ne[2] * big->nb[0], big->nb[0])));
                    return outs;
                });
            }
        }
    }
    for (wsp_ggml_type to : { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16 }) {
        compare_bytes([&](wsp_ggml_context * ctx) {
            return std::vector<wsp_ggml_tensor *>{ wsp_ggml_cast(
                ctx, operand(ctx, WSP_GGML_TYPE_F32, { 1280, 1500 }, Layout::Contiguous), to) };
        });
    }
}

// mul_mat converts activations that are not of the weight's type into contiguous scratch
// (kernels.cuh convert_contiguous): contiguous (vectors and a tail: K * 15 % 4 == 3 for K = 37),
// in aligned rows (vectors where K % 4 == 0, elements otherwise: the scratch's rows are K long),
// permuted, one element in; against the CPU (which rounds them to the weight's type as well;
// cuBLAS sums in another order)
TEST(CudaCpy, MulMatActivationsConverted) {
    REQUIRE_GPU();
    struct Case {
        wsp_ggml_type w, x;
    };
    for (const Case c :
         { Case{ WSP_GGML_TYPE_F16, WSP_GGML_TYPE_F32 }, Case{ WSP_GGML_TYPE_BF16, WSP_GGML_TYPE_F32 },
           Case{ WSP_GGML_TYPE_F16, WSP_GGML_TYPE_BF16 }, Case{ WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 } }) {
        for (int64_t K : { 37, 64, 1280 }) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(c.w)) + " x " + wsp_ggml_type_name(c.x) + " K " +
                         std::to_string(K));
            const int n = wsp_ggml_backend_cuda_get_device_count();
            for (int d = 0; d < n; ++d) {
                Graph                          g(256);
                wsp_ggml_context *             ctx = g.ctx();
                wsp_ggml_tensor *              w   = wsp_ggml_new_tensor_2d(ctx, c.w, K, 19);
                std::vector<wsp_ggml_tensor *> outs;
                wsp_ggml_set_input(w);
                for (Layout layout : LAYOUTS) {
                    outs.push_back(wsp_ggml_mul_mat(ctx, w, operand(ctx, c.x, { K, 5, 3 }, layout)));
                }
                const int64_t pad = 4 + (4 - K % 4) % 4;
                outs.push_back(wsp_ggml_mul_mat(ctx, w, padded(ctx, c.x, { K, 5, 3 }, pad, 0)));
                outs.push_back(wsp_ggml_mul_mat(ctx, w, padded(ctx, c.x, { K, 5, 3 }, pad, wsp_ggml_type_size(c.x))));
                g.build(outs[0], std::vector<wsp_ggml_tensor *>(outs.begin() + 1, outs.end()));
                fill_all(ctx, nullptr, -1.0f, 1.0f);
                wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
                ASSERT_NE(cuda, nullptr);
                CompareCtx cc{ 1e-5, 0 };
                EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.backend(), cuda, g.graph(), check_node, &cc));
                EXPECT_GE(cc.checked, (int) outs.size());
                wsp_ggml_backend_free(cuda);
            }
        }
    }
}

// Note [index width]: views whose rows lie 1 GiB apart (3 rows: past 2^31 bytes) take the 64-bit
// instances: word copies, rows and elements, the vector conversion and the elementwise kernels.
// On one device, against values computed here; skipped where the device cannot hold 2 GiB.
TEST(CudaCpy, ViewsPast2GiBTakeWideIndices) {
    REQUIRE_GPU();
    constexpr int64_t  NE0 = 64, ROWS = 3;
    constexpr size_t   ROW_STRIDE = (size_t) 1 << 30;
    wsp_ggml_backend_t cuda       = wsp_ggml_backend_cuda_init(0);
    ASSERT_NE(cuda, nullptr);
    wsp_ggml_init_params params = { 64 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), nullptr, true };
    wsp_ggml_context *   ctx    = wsp_ggml_init(params);
    wsp_ggml_tensor *    base =
        wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, (int64_t) ((ROWS - 1) * ROW_STRIDE / 4 + NE0));
    wsp_ggml_tensor *                    v    = wsp_ggml_view_2d(ctx, base, NE0, ROWS, ROW_STRIDE, 0);
    const std::vector<wsp_ggml_tensor *> outs = {
        wsp_ggml_cont(ctx, v),                                              // 16-byte words
        wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, v)),                     // elements
        wsp_ggml_cast(ctx, v, WSP_GGML_TYPE_F16),                           // vectors
        wsp_ggml_cast(ctx, wsp_ggml_transpose(ctx, v), WSP_GGML_TYPE_BF16), // elements
        wsp_ggml_neg(ctx, v),                                               // unary
        wsp_ggml_add(ctx, v, v),                                            // binary
        wsp_ggml_scale(ctx, v, 0.5f),                                       // scale
    };
    wsp_ggml_cgraph * graph = wsp_ggml_new_graph(ctx);
    for (wsp_ggml_tensor * o : outs) {
        wsp_ggml_build_forward_expand(graph, o);
    }
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors(ctx, cuda);
    if (buf == nullptr) {
        wsp_ggml_free(ctx);
        wsp_ggml_backend_free(cuda);
        GTEST_SKIP() << "cannot allocate 2 GiB on " << wsp_ggml_backend_name(cuda);
    }
    const std::vector<float> x = random_values((size_t) (NE0 * ROWS), 7, -2.0f, 2.0f);
    for (int64_t r = 0; r < ROWS; ++r) {
        wsp_ggml_backend_tensor_set(base, x.data() + r * NE0, r * ROW_STRIDE, NE0 * sizeof(float));
    }
    ASSERT_EQ(wsp_ggml_backend_graph_compute(cuda, graph), WSP_GGML_STATUS_SUCCESS);
    auto               at = [&](int64_t i0, int64_t i1) { return x[(size_t) (i1 * NE0 + i0)]; };
    std::vector<float> same(x), neg(x.size()), twice(x.size()), half(x.size()), tr(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        neg[i]   = -x[i];
        twice[i] = x[i] + x[i];
        half[i]  = x[i] * 0.5f;
    }
    for (int64_t i1 = 0; i1 < ROWS; ++i1) {
        for (int64_t i0 = 0; i0 < NE0; ++i0) {
            tr[(size_t) (i0 * ROWS + i1)] = at(i0, i1);
        }
    }
    EXPECT_EQ(device_values(outs[0]), same);
    EXPECT_EQ(device_values(outs[1]), tr);
    EXPECT_EQ(device_values(outs[2]), round_trip(WSP_GGML_TYPE_F16, x));
    EXPECT_EQ(device_values(outs[3]), round_trip(WSP_GGML_TYPE_BF16, tr));
    EXPECT_EQ(device_values(outs[4]), neg);
    EXPECT_EQ(device_values(outs[5]), twice);
    EXPECT_EQ(device_values(outs[6]), half);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_free(ctx);
    wsp_ggml_backend_free(cuda);
}

} // namespace
} // namespace wsp::test
