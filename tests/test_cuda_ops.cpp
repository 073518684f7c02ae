// The CUDA kernels of part 2 against the CPU backend, node by node on every CUDA device: UNARY
// (every function), SQR, SQRT, NORM, SOFT_MAX, MEAN, GET_ROWS, quantizing and dequantizing CPY,
// IM2COL and PAD_REFLECT_1D, over shapes of 1, primes, lengths that are not multiples of 32,
// permuted and strided operands, in-place nodes, broadcast masks and whisper's shapes. Without a
// GPU every case is skipped with the reason; scripts/gpu-check.sh runs them on one.

#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace wsp::test {
namespace {

// Note [tolerances]: F32 results must agree to an NMSE of 1e-10. The GPU's expf / tanhf / erfcf
// are within a few ulp, the CPU's vector exp within 3e-7 relative, and sums run in another
// order: relative differences of ~1e-7 give NMSE ~1e-13, while a single wrong element in a row
// of n gives ~1/n. F16 / BF16 results are the same float rounded on both sides; where the two
// floats differ by an ulp the rounding can flip one step of 2^-11 / 2^-8, so nmse_bound (1e-6,
// 1e-4) applies. Quantized results are compared byte for byte (quant.cuh, Note [quantizer
// rounding]); I32 results exactly. Non-finite values (inf, NaN) must match exactly everywhere.
constexpr double F32_TOL = 1e-10;

using Build = std::function<std::vector<wsp_ggml_tensor *>(wsp_ggml_context *)>;
// sets an input tensor and returns true, or returns false to leave it to the default fill
using Fill = std::function<bool(wsp_ggml_tensor *, uint32_t seed)>;

// the node `op` computed in place over a: a view of a, as the _inplace builders make it
wsp_ggml_tensor * in_place(wsp_ggml_context * ctx, wsp_ggml_op op, wsp_ggml_tensor * a, const void * params,
                           size_t params_size, wsp_ggml_tensor * src1 = nullptr) {
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, a);
    r->op               = op;
    r->src[0]           = a;
    r->src[1]           = src1;
    std::memcpy(r->op_params, params, params_size);
    return r;
}

// quantized results: the bytes of every row (rows may sit apart in a view)
void expect_same_blocks(const wsp_ggml_tensor * cpu, const std::vector<uint8_t> & gpu, const std::string & what) {
    const size_t row = wsp_ggml_row_size(cpu->type, cpu->ne[0]);
    int64_t      bad = 0, first = -1;
    for (int64_t i3 = 0; i3 < cpu->ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < cpu->ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < cpu->ne[1]; ++i1) {
                const size_t off = i1 * cpu->nb[1] + i2 * cpu->nb[2] + i3 * cpu->nb[3];
                if (std::memcmp(static_cast<const char *>(cpu->data) + off, gpu.data() + off, row) != 0) {
                    first = first < 0 ? (int64_t) (off / row) : first;
                    ++bad;
                }
            }
        }
    }
    EXPECT_EQ(bad, 0) << what << ": rows differ in their bytes, the first at byte offset " << first * (int64_t) row;
}

struct CompareCtx {
    double f32_tol;
    int    checked;
};

bool check_node(int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * user_data) {
    auto * c = static_cast<CompareCtx *>(user_data);
    if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
        return true;
    }
    std::vector<uint8_t> raw(wsp_ggml_nbytes(t2));
    wsp_ggml_backend_tensor_get(t2, raw.data(), 0, raw.size());
    const std::string what = "node " + std::to_string(i) + " " + wsp_ggml_op_desc(t1) + " " + shape_str(t1);
    if (wsp_ggml_is_quantized(t1->type)) {
        expect_same_blocks(t1, raw, what);
    } else {
        wsp_ggml_tensor host = *t2; // the device result viewed with its own strides
        host.data            = raw.data();
        host.buffer          = nullptr;
        host.view_src        = nullptr;
        const double tol     = t1->type == WSP_GGML_TYPE_F32   ? c->f32_tol
                               : t1->type == WSP_GGML_TYPE_I32 ? 0.0
                                                               : std::max(c->f32_tol, nmse_bound(t1->type));
        if (tol == 0.0) {
            EXPECT_EQ(get_values(&host), get_values(t1)) << what;
        } else {
            expect_close(get_values(&host), get_values(t1), tol, what);
        }
    }
    ++c->checked;
    return true;
}

// inputs: fill(t, seed) where it says so, else uniform values in [lo, hi) (random ints for I32)
void fill_all(wsp_ggml_context * ctx, const Fill & fill, float lo, float hi) {
    uint32_t seed = 11;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx); t != nullptr; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (!(t->flags & WSP_GGML_TENSOR_FLAG_INPUT)) {
            continue;
        }
        ++seed;
        if ((fill && fill(t, seed)) || fill_random_blocks(t, seed)) {
            continue;
        }
        const std::vector<float> v = random_values((size_t) wsp_ggml_nelements(t), seed, lo, hi);
        if (t->type == WSP_GGML_TYPE_I32) {
            std::vector<int32_t> k(v.size());
            for (size_t i = 0; i < v.size(); ++i) {
                k[i] = (int32_t) (v[i] * 100000.0f);
            }
            set_i32(t, k);
        } else {
            set_values(t, v);
        }
    }
}

// every node of build's graph computed on each CUDA device and on the CPU, then compared
void compare(const Build & build, const Fill & fill = nullptr, float lo = -1.0f, float hi = 1.0f,
             double f32_tol = F32_TOL) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph                          g(4096);
        std::vector<wsp_ggml_tensor *> outs = build(g.ctx());
        ASSERT_FALSE(outs.empty());
        g.build(outs[0], std::vector<wsp_ggml_tensor *>(outs.begin() + 1, outs.end()));
        fill_all(g.ctx(), fill, lo, hi);
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        ASSERT_NE(cuda, nullptr);
        CompareCtx c{ f32_tol, 0 };
        EXPECT_TRUE(wsp_ggml_backend_compare_graph_backend(g.backend(), cuda, g.graph(), check_node, &c));
        EXPECT_GT(c.checked, 0);
        wsp_ggml_backend_free(cuda);
    }
}

// ---- UNARY, SQR, SQRT

constexpr int FN_SQR  = WSP_GGML_UNARY_OP_COUNT;
constexpr int FN_SQRT = WSP_GGML_UNARY_OP_COUNT + 1;

wsp_ggml_tensor * apply_fn(wsp_ggml_context * ctx, wsp_ggml_tensor * x, int f, bool inplace) {
    if (f == FN_SQR || f == FN_SQRT) {
        const wsp_ggml_op op = f == FN_SQR ? WSP_GGML_OP_SQR : WSP_GGML_OP_SQRT;
        return inplace ? in_place(ctx, op, x, nullptr, 0)
                       : (f == FN_SQR ? wsp_ggml_sqr(ctx, x) : wsp_ggml_sqrt(ctx, x));
    }
    const auto op = (wsp_ggml_unary_op) f;
    return inplace ? wsp_ggml_unary_inplace(ctx, x, op) : wsp_ggml_unary(ctx, x, op);
}

TEST(CudaUnary, EveryFunctionTypeLayoutAndInPlace) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 1031, 3 }, { 7, 3, 2, 5 } };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " " + layout_name(layout) + " ne0 " +
                             std::to_string(ne[0]));
                // SQRT sees negative inputs too: NaN on both sides is part of the comparison
                compare(
                    [&](wsp_ggml_context * ctx) {
                        std::vector<wsp_ggml_tensor *> outs;
                        for (int f = 0; f <= FN_SQRT; ++f) {
                            outs.push_back(apply_fn(ctx, operand(ctx, type, ne, layout), f, false));
                            outs.push_back(apply_fn(ctx, operand(ctx, type, ne, layout), f, true));
                        }
                        return outs;
                    },
                    nullptr, -4.0f, 4.0f);
            }
        }
    }
}

// a node of `op` over x whose result has another type (the builders keep x's type; both
// backends accept any pair of float types)
wsp_ggml_tensor * retyped(wsp_ggml_context * ctx, wsp_ggml_op op, wsp_ggml_tensor * x, wsp_ggml_type type,
                          const void * params, size_t params_size) {
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, type, 4, x->ne);
    r->op               = op;
    r->src[0]           = x;
    std::memcpy(r->op_params, params, params_size);
    return r;
}

TEST(CudaUnary, MixedInputAndOutputTypes) {
    REQUIRE_GPU();
    for (wsp_ggml_type in : float_types()) {
        for (wsp_ggml_type out : float_types()) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(in)) + " -> " + wsp_ggml_type_name(out));
            compare(
                [&](wsp_ggml_context * ctx) {
                    std::vector<wsp_ggml_tensor *> outs;
                    for (int32_t f : { (int32_t) WSP_GGML_UNARY_OP_GELU, (int32_t) WSP_GGML_UNARY_OP_NEG }) {
                        wsp_ggml_tensor * x = operand(ctx, in, { 67, 5 }, Layout::Permuted);
                        outs.push_back(retyped(ctx, WSP_GGML_OP_UNARY, x, out, &f, sizeof(f)));
                    }
                    const float eps = 1e-5f, sm[2] = { 0.5f, 0.0f };
                    outs.push_back(retyped(ctx, WSP_GGML_OP_NORM, operand(ctx, in, { 67, 5 }, Layout::Strided), out,
                                           &eps, sizeof(eps)));
                    outs.push_back(retyped(ctx, WSP_GGML_OP_SOFT_MAX, operand(ctx, in, { 67, 5 }, Layout::Contiguous),
                                           out, sm, sizeof(sm)));
                    return outs;
                },
                nullptr, -4.0f, 4.0f);
        }
    }
}

// ---- NORM

TEST(CudaNorm, ShapesTypesLayoutsAndInPlace) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = {
        { 1, 3 }, { 37, 5, 3 }, { 384, 7 }, { 1280, 3, 2 }, { 4099, 2 }
    };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " " + layout_name(layout) + " ne0 " +
                             std::to_string(ne[0]));
                compare([&](wsp_ggml_context * ctx) {
                    return std::vector<wsp_ggml_tensor *>{
                        wsp_ggml_norm(ctx, operand(ctx, type, ne, layout), 1e-5f),
                        wsp_ggml_norm_inplace(ctx, operand(ctx, type, ne, layout), 1e-1f),
                    };
                });
            }
        }
    }
}

// the CPU suite's hard case: mean 1000, spread 0.01 (the float spacing at 1000 is 6e-5)
TEST(CudaNorm, LargeMeanSmallSpreadKeepsPrecision) {
    REQUIRE_GPU();
    compare(
        [](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * x = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 1280, 16);
            wsp_ggml_set_input(x);
            return std::vector<wsp_ggml_tensor *>{ wsp_ggml_norm(ctx, x, 1e-5f) };
        },
        nullptr, 1000.0f - 0.01f, 1000.0f + 0.01f);
}

// ---- SOFT_MAX

struct SoftMaxCase {
    std::vector<int64_t> ne;
    wsp_ggml_type        mask_type; // WSP_GGML_TYPE_COUNT: no mask
    int64_t              m2, m3;    // mask dims 2-3, broadcast by modulo
    float                max_bias;
};

// mask values: a fifth of the entries -inf, row 1 of every slice entirely -inf, small negative
// biases elsewhere
bool fill_mask(wsp_ggml_tensor * t, uint32_t seed) {
    if (std::strcmp(t->name, "mask") != 0) {
        return false;
    }
    std::vector<float> u = random_values((size_t) wsp_ggml_nelements(t), seed, 0.0f, 1.0f);
    for (size_t k = 0; k < u.size(); ++k) {
        const int64_t row = (int64_t) (k / (size_t) t->ne[0]) % t->ne[1];
        u[k]              = (row == 1 || u[k] < 0.2f) ? -INFINITY : -2.0f * u[k];
    }
    set_values(t, u);
    return true;
}

std::vector<wsp_ggml_tensor *> soft_max_graph(wsp_ggml_context * ctx, wsp_ggml_type type, const SoftMaxCase & c) {
    std::vector<int64_t> ne = c.ne;
    ne.resize(4, 1);
    wsp_ggml_tensor * mask = nullptr;
    if (c.mask_type != WSP_GGML_TYPE_COUNT) {
        mask = wsp_ggml_new_tensor_4d(ctx, c.mask_type, ne[0], ne[1] + 2, c.m2, c.m3); // padded rows
        wsp_ggml_set_name(mask, "mask");
        wsp_ggml_set_input(mask);
    }
    const float       params[2] = { 0.125f, c.max_bias };
    wsp_ggml_tensor * a         = operand(ctx, type, ne, Layout::Contiguous);
    wsp_ggml_tensor * b         = operand(ctx, type, ne, Layout::Contiguous);
    return { wsp_ggml_soft_max_ext(ctx, a, mask, params[0], params[1]),
             in_place(ctx, WSP_GGML_OP_SOFT_MAX, b, params, sizeof(params), mask) };
}

TEST(CudaSoftMax, MasksBroadcastAlibiLongRowsAndInPlace) {
    REQUIRE_GPU();
    const wsp_ggml_type            none  = WSP_GGML_TYPE_COUNT;
    const std::vector<SoftMaxCase> cases = {
        { { 1, 1 }, none, 1, 1, 0.0f },
        { { 37, 5, 3, 2 }, none, 1, 1, 0.0f },
        { { 37, 5, 3, 2 }, WSP_GGML_TYPE_F16, 1, 1, 0.0f },
        { { 37, 5, 6, 2 }, WSP_GGML_TYPE_F32, 3, 2, 8.0f },  // broadcast over heads, ALiBi on both branches
        { { 1500, 4, 6 }, WSP_GGML_TYPE_F16, 1, 1, 0.0f },   // whisper's encoder rows
        { { 1500, 3, 20 }, WSP_GGML_TYPE_F32, 20, 1, 5.0f }, // 20 heads: n_head_log2 = 16
        { { 9001, 2, 1 }, WSP_GGML_TYPE_F16, 1, 1, 0.0f },   // past the shared-memory cache
        { { 9001, 2, 3 }, none, 1, 1, 0.0f },
    };
    for (wsp_ggml_type type : float_types()) {
        for (const SoftMaxCase & c : cases) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " ne0 " + std::to_string(c.ne[0]) + " mask " +
                         (c.mask_type == none ? "none" : wsp_ggml_type_name(c.mask_type)) + " max_bias " +
                         std::to_string(c.max_bias));
            compare([&](wsp_ggml_context * ctx) { return soft_max_graph(ctx, type, c); }, fill_mask, -4.0f, 4.0f);
        }
    }
}

// ---- MEAN

TEST(CudaMean, ShapesTypesAndLayouts) {
    REQUIRE_GPU();
    const std::vector<std::vector<int64_t>> shapes = { { 1 }, { 37, 5, 3 }, { 1500, 80 }, { 5003, 2, 1, 2 } };
    for (wsp_ggml_type type : float_types()) {
        for (Layout layout : LAYOUTS) {
            for (const auto & ne : shapes) {
                SCOPED_TRACE(std::string(wsp_ggml_type_name(type)) + " " + layout_name(layout) + " ne0 " +
                             std::to_string(ne[0]));
                compare([&](wsp_ggml_context * ctx) {
                    return std::vector<wsp_ggml_tensor *>{ wsp_ggml_mean(ctx, operand(ctx, type, ne, layout)) };
                });
            }
        }
    }
}

// ---- GET_ROWS

// indices in [0, rows) with two out of range (-1 and rows), which must give zero rows
Fill index_fill(int64_t rows) {
    return [rows](wsp_ggml_tensor * t, uint32_t seed) {
        if (std::strcmp(t->name, "idx") != 0) {
            return false;
        }
        const std::vector<float> u = random_values((size_t) wsp_ggml_nelements(t), seed, 0.0f, 1.0f);
        std::vector<int32_t>     k(u.size());
        for (size_t i = 0; i < u.size(); ++i) {
            k[i] = std::min<int32_t>((int32_t) (u[i] * (float) rows), (int32_t) rows - 1);
        }
        if (k.size() > 3) {
            k[1]            = -1;
            k[k.size() - 2] = (int32_t) rows;
        }
        set_i32(t, k);
        return true;
    };
}

TEST(CudaGetRows, EveryTypeBroadcastStridedAndOutOfRange) {
    REQUIRE_GPU();
    std::vector<wsp_ggml_type> types = float_types();
    for (wsp_ggml_type q : quant_types()) {
        types.push_back(q);
    }
    types.push_back(WSP_GGML_TYPE_I32);
    for (wsp_ggml_type type : types) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        compare(
            [&](wsp_ggml_context * ctx) {
                // a [96, 11, 3, 2], b [7, 3, 4]: dim 3 of a broadcast over b's dim 2 (i12 % 2)
                wsp_ggml_tensor * a = wsp_ggml_new_tensor_4d(ctx, type, 96, 11, 3, 2);
                wsp_ggml_tensor * b = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_I32, 7, 3, 4);
                wsp_ggml_set_input(a);
                wsp_ggml_set_input(b);
                wsp_ggml_set_name(b, "idx");
                std::vector<wsp_ggml_tensor *> outs = { wsp_ggml_get_rows(ctx, a, b) };
                // rows of 64 inside rows of 96 (strided rows, blocks still packed)
                wsp_ggml_tensor * v =
                    wsp_ggml_view_4d(ctx, a, 64, 11, 3, 2, a->nb[1], a->nb[2], a->nb[3], wsp_ggml_row_size(type, 32));
                outs.push_back(wsp_ggml_get_rows(ctx, v, b));
                return outs;
            },
            index_fill(11));
    }
    // whisper's token embedding: one row per token out of a large F16 / Q8_0 table
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F16, WSP_GGML_TYPE_Q8_0 }) {
        compare(
            [&](wsp_ggml_context * ctx) {
                wsp_ggml_tensor * a = wsp_ggml_new_tensor_2d(ctx, type, 384, 5003);
                wsp_ggml_tensor * b = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, 9);
                wsp_ggml_set_input(a);
                wsp_ggml_set_input(b);
                wsp_ggml_set_name(b, "idx");
                return std::vector<wsp_ggml_tensor *>{ wsp_ggml_get_rows(ctx, a, b) };
            },
            index_fill(5003));
    }
}

// ---- CPY / CONT / DUP with quantized sides

wsp_ggml_tensor * copy_to(wsp_ggml_context * ctx, wsp_ggml_tensor * src, wsp_ggml_type type, std::vector<int64_t> ne) {
    ne.resize(4, 1);
    return wsp_ggml_cpy(ctx, src, wsp_ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]));
}

// the K-quants' rows (a whisper K-quant model's token embedding), and IQ4_NL's, IQ4_XS's,
// TQ1_0's, TQ2_0's and the grid i-quants' (random blocks, where the build read the client's
// codebooks), read element by element bit for bit as the CPU's to_float
TEST(CudaGetRows, KQuantRows) {
    REQUIRE_GPU();
    for (wsp_ggml_type type :
         { WSP_GGML_TYPE_Q2_K, WSP_GGML_TYPE_Q3_K, WSP_GGML_TYPE_Q4_K, WSP_GGML_TYPE_Q5_K, WSP_GGML_TYPE_Q6_K,
           WSP_GGML_TYPE_IQ4_NL, WSP_GGML_TYPE_IQ4_XS, WSP_GGML_TYPE_TQ1_0, WSP_GGML_TYPE_TQ2_0, WSP_GGML_TYPE_IQ2_XXS,
           WSP_GGML_TYPE_IQ2_XS, WSP_GGML_TYPE_IQ2_S, WSP_GGML_TYPE_IQ3_XXS, WSP_GGML_TYPE_IQ3_S, WSP_GGML_TYPE_IQ1_S,
           WSP_GGML_TYPE_IQ1_M }) {
        if (wsp_ggml_get_type_traits(type)->to_float == nullptr) {
            continue; // a grid i-quant in a build without the codebooks
        }
        SCOPED_TRACE(wsp_ggml_type_name(type));
        compare(
            [&](wsp_ggml_context * ctx) {
                wsp_ggml_tensor * a = wsp_ggml_new_tensor_4d(ctx, type, 512, 11, 3, 2);
                wsp_ggml_tensor * b = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_I32, 7, 3, 4);
                wsp_ggml_set_input(a);
                wsp_ggml_set_input(b);
                wsp_ggml_set_name(b, "idx");
                return std::vector<wsp_ggml_tensor *>{ wsp_ggml_get_rows(ctx, a, b) };
            },
            index_fill(11));
    }
}
TEST(CudaCpy, QuantizeAndDequantizeBitExact) {
    REQUIRE_GPU();
    for (wsp_ggml_type q : quant_types()) {
        for (const std::vector<int64_t> & ne : { std::vector<int64_t>{ 32 }, { 96, 7, 3 }, { 1280, 37 } }) {
            SCOPED_TRACE(std::string(wsp_ggml_type_name(q)) + " ne0 " + std::to_string(ne[0]));
            compare([&](wsp_ggml_context * ctx) {
                std::vector<wsp_ggml_tensor *> outs;
                for (wsp_ggml_type f : float_types()) {
                    for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
                        outs.push_back(copy_to(ctx, operand(ctx, f, ne, layout), q, ne)); // quantize
                    }
                    // dequantize, into a contiguous and into a permuted destination
                    wsp_ggml_tensor * src = operand(ctx, q, ne, Layout::Contiguous);
                    outs.push_back(copy_to(ctx, src, f, ne));
                    wsp_ggml_tensor * tr =
                        wsp_ggml_new_tensor_4d(ctx, f, ne.size() > 1 ? ne[1] : 1, ne[0], ne.size() > 2 ? ne[2] : 1, 1);
                    outs.push_back(wsp_ggml_cpy(ctx, src, wsp_ggml_permute(ctx, tr, 1, 0, 2, 3)));
                }
                // reshaped destination, another block type, and the same type between strided rows
                const int64_t     rows = wsp_ggml_nelements(outs[0]) / ne[0];
                wsp_ggml_tensor * x    = operand(ctx, WSP_GGML_TYPE_F32, ne, Layout::Contiguous);
                outs.push_back(copy_to(ctx, x, q, { ne[0], rows }));
                wsp_ggml_tensor *   xq    = operand(ctx, q, { ne[0], 2 * rows }, Layout::Contiguous);
                const wsp_ggml_type other = q == WSP_GGML_TYPE_Q8_0 ? WSP_GGML_TYPE_Q4_1 : WSP_GGML_TYPE_Q8_0;
                outs.push_back(copy_to(ctx, xq, other, { ne[0], 2 * rows }));
                wsp_ggml_tensor * every_other = wsp_ggml_view_2d(ctx, xq, ne[0], rows, 2 * xq->nb[1], 0);
                outs.push_back(copy_to(ctx, every_other, q, { ne[0], rows }));
                return outs;
            });
        }
    }
}

TEST(CudaCpy, SameTypeByteCopiesAndI32) {
    REQUIRE_GPU();
    compare([](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * f = operand(ctx, WSP_GGML_TYPE_F16, { 37, 5 }, Layout::Contiguous);
        wsp_ggml_tensor * i = operand(ctx, WSP_GGML_TYPE_I32, { 13, 6 }, Layout::Permuted);
        wsp_ggml_tensor * q = operand(ctx, WSP_GGML_TYPE_Q4_0, { 64, 6 }, Layout::Contiguous);
        return std::vector<wsp_ggml_tensor *>{
            copy_to(ctx, f, WSP_GGML_TYPE_F16, { 185 }), // contiguous, reshaped: one device copy
            wsp_ggml_cont(ctx, i),                       // raw 4-byte elements from a permuted view
            copy_to(ctx, q, WSP_GGML_TYPE_Q4_0, { 128, 3 }),
        };
    });
}

// ---- IM2COL

struct Im2ColCase {
    int64_t IW, IH, IC, N, KW, KH;
    int     s0, s1, p0, p1, d0, d1;
    bool    is_2d;
};

TEST(CudaIm2Col, OneAndTwoDimensionsTypesAndWhisperShapes) {
    REQUIRE_GPU();
    const std::vector<Im2ColCase> cases = {
        { 3000, 1, 80, 1, 3, 1, 1, 0, 1, 0, 1, 0, false },  // whisper conv1 (mel bins in)
        { 3000, 1, 384, 1, 3, 1, 2, 0, 1, 0, 1, 0, false }, // whisper conv2, stride 2
        { 37, 1, 7, 2, 5, 1, 3, 0, 2, 0, 2, 0, false },     { 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, false },
        { 17, 11, 5, 2, 3, 2, 2, 1, 1, 2, 1, 2, true },
    };
    for (const Im2ColCase & c : cases) {
        for (wsp_ggml_type src_type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16 }) {
            for (wsp_ggml_type dst_type : float_types()) {
                for (Layout layout : { Layout::Contiguous, Layout::Permuted }) {
                    SCOPED_TRACE(std::to_string(c.IW) + "x" + std::to_string(c.IC) + " " +
                                 wsp_ggml_type_name(src_type) + " -> " + wsp_ggml_type_name(dst_type) + " " +
                                 layout_name(layout));
                    compare([&](wsp_ggml_context * ctx) {
                        wsp_ggml_tensor * k = c.is_2d
                                                  ? wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F16, c.KW, c.KH, c.IC, 4)
                                                  : wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F16, c.KW, c.IC, 4);
                        wsp_ggml_set_input(k);
                        const std::vector<int64_t> ne = c.is_2d ? std::vector<int64_t>{ c.IW, c.IH, c.IC, c.N }
                                                                : std::vector<int64_t>{ c.IW, c.IC, c.N };
                        wsp_ggml_tensor *          b  = operand(ctx, src_type, ne, layout);
                        return std::vector<wsp_ggml_tensor *>{ wsp_ggml_im2col(ctx, k, b, c.s0, c.s1, c.p0, c.p1, c.d0,
                                                                               c.d1, c.is_2d, dst_type) };
                    });
                }
            }
        }
    }
}

// conv_1d is im2col + mul_mat: whisper's first convolution end to end
TEST(CudaIm2Col, WhisperConvFrontEnd) {
    REQUIRE_GPU();
    compare(
        [](wsp_ggml_context * ctx) {
            wsp_ggml_tensor * w   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F16, 3, 80, 384);
            wsp_ggml_tensor * mel = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, 3000, 80);
            wsp_ggml_set_input(w);
            wsp_ggml_set_input(mel);
            wsp_ggml_tensor * y = wsp_ggml_conv_1d_ph(ctx, w, mel, 1, 1);
            return std::vector<wsp_ggml_tensor *>{ wsp_ggml_gelu(ctx, y) };
        },
        nullptr, -1.0f, 1.0f, 1e-6); // cuBLAS sums the 240 F16 products of a dot in another order
}

// ---- PAD_REFLECT_1D

TEST(CudaPadReflect, PadsUpToTheRowLength) {
    REQUIRE_GPU();
    struct Case {
        std::vector<int64_t> ne;
        int                  p0, p1;
    };
    for (const Case & c : std::vector<Case>{
             { { 5, 3 }, 2, 4 }, { { 1, 1 }, 0, 0 }, { { 37, 5, 3, 2 }, 36, 1 }, { { 400, 80 }, 200, 199 } }) {
        SCOPED_TRACE("ne0 " + std::to_string(c.ne[0]) + " p0 " + std::to_string(c.p0) + " p1 " + std::to_string(c.p1));
        compare([&](wsp_ggml_context * ctx) {
            return std::vector<wsp_ggml_tensor *>{ wsp_ggml_pad_reflect_1d(
                ctx, operand(ctx, WSP_GGML_TYPE_F32, c.ne, Layout::Contiguous), c.p0, c.p1) };
        });
    }
}

// ---- empty tensors

// empty nodes are skipped; MEAN of empty rows is a non-empty result of zeros
TEST(CudaOps, EmptyRowsAndEmptyNodes) {
    REQUIRE_GPU();
    compare([](wsp_ggml_context * ctx) {
        wsp_ggml_tensor * x = operand(ctx, WSP_GGML_TYPE_F32, { 0, 3 }, Layout::Contiguous);
        return std::vector<wsp_ggml_tensor *>{
            wsp_ggml_mean(ctx, x),
            wsp_ggml_unary(ctx, x, WSP_GGML_UNARY_OP_GELU),
            wsp_ggml_norm(ctx, x, 1e-5f),
            wsp_ggml_soft_max(ctx, x),
        };
    });
}

} // namespace
} // namespace wsp::test
