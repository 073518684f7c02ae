// Core objects: the context arena (sizes, caller memory, no_alloc, enumeration, reset), tensor
// metadata (sizes, dims, contiguity, shapes, names), and views, reshapes and permutes, whose
// metadata must describe exactly the memory of their source.

#include "test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

namespace wsp::test {
namespace {

struct CtxDeleter {
    void operator()(wsp_ggml_context * c) const { wsp_ggml_free(c); }
};
using CtxPtr = std::unique_ptr<wsp_ggml_context, CtxDeleter>;

CtxPtr make_ctx(size_t size, bool no_alloc, void * mem = nullptr) {
    return CtxPtr(wsp_ggml_init({ size, mem, no_alloc }));
}

TEST(Context, NoAllocTensorsCostTheirOverhead) {
    CtxPtr ctx = make_ctx(64 * wsp_ggml_tensor_overhead(), true);
    ASSERT_NE(ctx, nullptr);
    EXPECT_TRUE(wsp_ggml_get_no_alloc(ctx.get()));
    EXPECT_EQ(wsp_ggml_used_mem(ctx.get()), 0u);
    for (int i = 1; i <= 10; ++i) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_2d(ctx.get(), WSP_GGML_TYPE_F32, 1000 * i, 7);
        EXPECT_EQ(t->data, nullptr);
        EXPECT_EQ(wsp_ggml_used_mem(ctx.get()), (size_t) i * wsp_ggml_tensor_overhead());
    }
    EXPECT_LE(wsp_ggml_used_mem(ctx.get()), wsp_ggml_get_mem_size(ctx.get()));
}

TEST(Context, TensorDataLivesInTheArena) {
    CtxPtr ctx = make_ctx(1 << 16, false);
    EXPECT_FALSE(wsp_ggml_get_no_alloc(ctx.get()));
    const char *      base = static_cast<const char *>(wsp_ggml_get_mem_buffer(ctx.get()));
    wsp_ggml_tensor * a    = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 13);
    const size_t      used = wsp_ggml_used_mem(ctx.get());
    EXPECT_EQ(used, wsp_ggml_tensor_overhead() + WSP_GGML_PAD(13 * 4, WSP_GGML_MEM_ALIGN));
    wsp_ggml_tensor * b = wsp_ggml_new_tensor_2d(ctx.get(), WSP_GGML_TYPE_F16, 5, 3);
    EXPECT_EQ(wsp_ggml_used_mem(ctx.get()), used + wsp_ggml_tensor_overhead() + WSP_GGML_PAD(30, WSP_GGML_MEM_ALIGN));
    for (wsp_ggml_tensor * t : { a, b }) {
        const char * d = static_cast<const char *>(t->data);
        ASSERT_NE(d, nullptr);
        EXPECT_GE(d, base);
        EXPECT_LE(d + wsp_ggml_nbytes(t), base + wsp_ggml_used_mem(ctx.get()));
        EXPECT_EQ((uintptr_t) d % WSP_GGML_MEM_ALIGN, 0u);
    }
    // the data of a ends before the header of b
    EXPECT_LE(static_cast<char *>(a->data) + wsp_ggml_nbytes(a), reinterpret_cast<char *>(b));
    void * raw = wsp_ggml_new_buffer(ctx.get(), 100);
    EXPECT_NE(raw, nullptr);
    EXPECT_EQ(wsp_ggml_get_max_tensor_size(ctx.get()), 52u);
}

TEST(Context, CallerMemoryIsUsedAndNotFreed) {
    const size_t size = 1 << 14;
    void *       mem  = std::aligned_alloc(64, size);
    std::memset(mem, 0x3c, size);
    {
        CtxPtr ctx = make_ctx(size, false, mem);
        EXPECT_EQ(wsp_ggml_get_mem_buffer(ctx.get()), mem);
        EXPECT_EQ(wsp_ggml_get_mem_size(ctx.get()), size);
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 100);
        EXPECT_GE((char *) t, (char *) mem);
        EXPECT_LE((char *) t->data + 400, (char *) mem + size);
        wsp_ggml_set_f32(t, 2.5f);
    }
    // still ours after wsp_ggml_free: writing to it must be fine (ASan/valgrind would flag a free)
    std::memset(mem, 0, size);
    std::free(mem);
}

TEST(Context, EnumerationAndLookupByName) {
    CtxPtr            ctx = make_ctx(32 * wsp_ggml_tensor_overhead() + wsp_ggml_graph_overhead(), true);
    wsp_ggml_tensor * ts[5];
    for (int i = 0; i < 5; ++i) {
        ts[i] = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, i + 1);
        wsp_ggml_format_name(ts[i], "t%d", i);
        if (i == 2) {
            wsp_ggml_new_graph(ctx.get()); // other objects in between are skipped
        }
    }
    int k = 0;
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ctx.get()); t != nullptr;
         t                   = wsp_ggml_get_next_tensor(ctx.get(), t)) {
        ASSERT_LT(k, 5);
        EXPECT_EQ(t, ts[k++]);
    }
    EXPECT_EQ(k, 5);
    EXPECT_EQ(wsp_ggml_get_tensor(ctx.get(), "t3"), ts[3]);
    EXPECT_EQ(wsp_ggml_get_tensor(ctx.get(), "t9"), nullptr);

    wsp_ggml_reset(ctx.get());
    EXPECT_EQ(wsp_ggml_used_mem(ctx.get()), 0u);
    EXPECT_EQ(wsp_ggml_get_first_tensor(ctx.get()), nullptr);
    EXPECT_EQ(wsp_ggml_get_tensor(ctx.get(), "t3"), nullptr);
    wsp_ggml_tensor * again = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 4);
    EXPECT_EQ(again, ts[0]); // the arena starts over
}

TEST(Context, NoAllocCanBeToggled) {
    CtxPtr ctx = make_ctx(1 << 14, true);
    wsp_ggml_set_no_alloc(ctx.get(), false);
    EXPECT_NE(wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 4)->data, nullptr);
    wsp_ggml_set_no_alloc(ctx.get(), true);
    EXPECT_EQ(wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 4)->data, nullptr);
    LogCapture log;
    EXPECT_EQ(wsp_ggml_new_buffer(ctx.get(), 16), nullptr);
    EXPECT_TRUE(log.contains("no_alloc"));
}

TEST(TensorMeta, SizesRowsAndDims) {
    CtxPtr            ctx = make_ctx(64 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * a   = wsp_ggml_new_tensor_4d(ctx.get(), WSP_GGML_TYPE_F32, 5, 4, 3, 2);
    EXPECT_EQ(wsp_ggml_nelements(a), 120);
    EXPECT_EQ(wsp_ggml_nrows(a), 24);
    EXPECT_EQ(wsp_ggml_nbytes(a), 480u);
    EXPECT_EQ(wsp_ggml_nbytes_pad(wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 5)), 32u);
    EXPECT_EQ(wsp_ggml_element_size(a), 4u);
    EXPECT_EQ(a->nb[0], 4u);
    EXPECT_EQ(a->nb[1], 20u);
    EXPECT_EQ(a->nb[2], 80u);
    EXPECT_EQ(a->nb[3], 240u);
    EXPECT_EQ(wsp_ggml_n_dims(a), 4);

    wsp_ggml_tensor * q = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_Q4_0, 64, 3, 2);
    EXPECT_EQ(q->nb[0], 18u);
    EXPECT_EQ(q->nb[1], 36u);
    EXPECT_EQ(wsp_ggml_nbytes(q), 6u * 36u);
    EXPECT_EQ(wsp_ggml_nrows(q), 6);
    wsp_ggml_tensor * qp = wsp_ggml_permute(ctx.get(), q, 0, 2, 1, 3); // rows swapped: same bytes
    EXPECT_EQ(wsp_ggml_nbytes(qp), wsp_ggml_nbytes(q));

    struct DimCase {
        std::vector<int64_t> ne;
        int                  n_dims;
        bool                 scalar, vector, matrix, is3d;
    };
    const DimCase cases[] = {
        { { 1 }, 1, true, true, true, true },
        { { 7 }, 1, false, true, true, true },
        { { 1, 3 }, 2, false, false, true, true },
        { { 4, 1, 2 }, 3, false, false, false, true },
        { { 4, 1, 1, 2 }, 4, false, false, false, false },
    };
    for (const DimCase & c : cases) {
        std::vector<int64_t> ne = c.ne;
        ne.resize(4, 1);
        wsp_ggml_tensor * t = wsp_ggml_new_tensor(ctx.get(), WSP_GGML_TYPE_F32, 4, ne.data());
        SCOPED_TRACE(shape_str(t));
        EXPECT_EQ(wsp_ggml_n_dims(t), c.n_dims);
        EXPECT_EQ(wsp_ggml_is_scalar(t), c.scalar);
        EXPECT_EQ(wsp_ggml_is_vector(t), c.vector);
        EXPECT_EQ(wsp_ggml_is_matrix(t), c.matrix);
        EXPECT_EQ(wsp_ggml_is_3d(t), c.is3d);
    }
    wsp_ggml_tensor * empty = wsp_ggml_new_tensor_2d(ctx.get(), WSP_GGML_TYPE_F32, 4, 0);
    EXPECT_TRUE(wsp_ggml_is_empty(empty));
    EXPECT_EQ(wsp_ggml_nbytes(empty), 0u);
    EXPECT_FALSE(wsp_ggml_is_empty(a));
}

TEST(TensorMeta, ContiguityOfViewsPermutesAndTransposes) {
    CtxPtr            ctx = make_ctx(64 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * a   = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F32, 4, 3, 2);
    struct Case {
        const char *      name;
        wsp_ggml_tensor * t;
        bool              c0, c1, c2, rows, transposed, permuted;
    };
    wsp_ggml_tensor * m       = wsp_ggml_new_tensor_2d(ctx.get(), WSP_GGML_TYPE_F32, 8, 5);
    const Case        cases[] = {
               { "fresh", a, true, true, true, true, false, false },
               { "transpose", wsp_ggml_transpose(ctx.get(), m), false, false, false, false, true, true },
               { "left half of rows", wsp_ggml_view_2d(ctx.get(), m, 4, 5, m->nb[1], 0), false, true, true, true, false,
                 false },
               { "swap dims 1 and 2", wsp_ggml_permute(ctx.get(), a, 0, 2, 1, 3), false, false, true, true, false, true },
               { "rows 1..2 of a", wsp_ggml_view_2d(ctx.get(), m, 8, 2, m->nb[1], m->nb[1]), true, true, true, true, false,
                 false },
               { "first half of row 0", wsp_ggml_view_2d(ctx.get(), m, 4, 1, m->nb[1], 0), true, true, true, true, false,
                 false },
               { "reshape", wsp_ggml_reshape_2d(ctx.get(), a, 12, 2), true, true, true, true, false, false },
    };
    for (const Case & c : cases) {
        SCOPED_TRACE(c.name + std::string(" ") + shape_str(c.t));
        EXPECT_EQ(wsp_ggml_is_contiguous(c.t), c.c0);
        EXPECT_EQ(wsp_ggml_is_contiguous_0(c.t), c.c0);
        EXPECT_EQ(wsp_ggml_is_contiguous_1(c.t), c.c1);
        EXPECT_EQ(wsp_ggml_is_contiguous_2(c.t), c.c2);
        EXPECT_EQ(wsp_ggml_is_contiguous_rows(c.t), c.rows);
        EXPECT_EQ(wsp_ggml_is_transposed(c.t), c.transposed);
        EXPECT_EQ(wsp_ggml_is_permuted(c.t), c.permuted);
    }
    // a strided 1-D view (every other element) is not contiguous
    wsp_ggml_tensor * strided =
        wsp_ggml_view_tensor(ctx.get(), wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 8));
    strided->ne[0] = 4;
    strided->nb[0] = 8;
    strided->nb[1] = strided->nb[2] = strided->nb[3] = 32;
    EXPECT_FALSE(wsp_ggml_is_contiguous(strided));
    EXPECT_FALSE(wsp_ggml_is_contiguous_rows(strided));
}

TEST(TensorMeta, SameShapeStrideAndRepeat) {
    CtxPtr            ctx = make_ctx(64 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * a   = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F32, 6, 4, 2);
    wsp_ggml_tensor * b   = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F16, 6, 4, 2);
    wsp_ggml_tensor * c   = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F32, 6, 4, 2);
    EXPECT_TRUE(wsp_ggml_are_same_shape(a, b));
    EXPECT_FALSE(wsp_ggml_are_same_stride(a, b));
    EXPECT_TRUE(wsp_ggml_are_same_stride(a, c));
    wsp_ggml_tensor * p = wsp_ggml_permute(ctx.get(), a, 1, 0, 2, 3);
    EXPECT_FALSE(wsp_ggml_are_same_shape(a, p));

    const std::pair<std::vector<int64_t>, bool> repeats[] = {
        { { 6, 4, 2, 1 }, true },  { { 1, 1, 1, 1 }, true },  { { 3, 4, 1, 1 }, true },  { { 2, 1, 2, 1 }, true },
        { { 4, 4, 2, 1 }, false }, { { 6, 3, 2, 1 }, false }, { { 6, 4, 2, 2 }, false }, { { 12, 4, 2, 1 }, false },
    };
    for (const auto & [ne, expect] : repeats) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor(ctx.get(), WSP_GGML_TYPE_F32, 4, ne.data());
        EXPECT_EQ(wsp_ggml_can_repeat(t, a), expect) << shape_str(t);
    }
    wsp_ggml_tensor * e1 = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 0);
    wsp_ggml_tensor * e2 = wsp_ggml_new_tensor_2d(ctx.get(), WSP_GGML_TYPE_F32, 3, 0);
    EXPECT_TRUE(wsp_ggml_can_repeat(e1, e2));
    EXPECT_FALSE(wsp_ggml_can_repeat(e1, a));
}

TEST(TensorMeta, UnravelIndexInvertsTheFlatIndex) {
    CtxPtr            ctx  = make_ctx(4 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * t    = wsp_ggml_new_tensor_4d(ctx.get(), WSP_GGML_TYPE_F32, 5, 3, 4, 2);
    int64_t           flat = 0;
    for (int64_t i3 = 0; i3 < 2; ++i3) {
        for (int64_t i2 = 0; i2 < 4; ++i2) {
            for (int64_t i1 = 0; i1 < 3; ++i1) {
                for (int64_t i0 = 0; i0 < 5; ++i0, ++flat) {
                    int64_t j0 = -1, j1 = -1, j2 = -1, j3 = -1;
                    wsp_ggml_unravel_index(t, flat, &j0, &j1, &j2, &j3);
                    ASSERT_EQ(j0, i0);
                    ASSERT_EQ(j1, i1);
                    ASSERT_EQ(j2, i2);
                    ASSERT_EQ(j3, i3);
                }
            }
        }
    }
    int64_t only2 = -1;
    wsp_ggml_unravel_index(t, 47, nullptr, nullptr, &only2, nullptr); // NULL outputs are skipped
    EXPECT_EQ(only2, 3);
}

TEST(TensorMeta, NamesAreTruncatedTo63Chars) {
    CtxPtr            ctx = make_ctx(4 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * t   = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 1);
    EXPECT_STREQ(wsp_ggml_get_name(t), "");
    EXPECT_EQ(wsp_ggml_set_name(t, "weights.0"), t);
    EXPECT_STREQ(wsp_ggml_get_name(t), "weights.0");
    const std::string long_name(100, 'x');
    wsp_ggml_set_name(t, (long_name + "tail").c_str());
    EXPECT_EQ(std::string(t->name), long_name.substr(0, 63));
    EXPECT_EQ(wsp_ggml_format_name(t, "layer_%d_%s", 12, long_name.c_str()), t);
    EXPECT_EQ(std::string(t->name), ("layer_12_" + long_name).substr(0, 63));
    EXPECT_EQ(std::strlen(t->name), 63u);
    wsp_ggml_format_name(t, "%s", "short");
    EXPECT_STREQ(t->name, "short");
}

TEST(TensorMeta, FlagsAndAccessors) {
    CtxPtr            ctx = make_ctx(1 << 12, false);
    wsp_ggml_tensor * t   = wsp_ggml_new_tensor_1d(ctx.get(), WSP_GGML_TYPE_F32, 6);
    EXPECT_EQ(t->flags, 0);
    wsp_ggml_set_input(t);
    EXPECT_EQ(t->flags, WSP_GGML_TENSOR_FLAG_INPUT);
    wsp_ggml_set_output(t);
    EXPECT_EQ(t->flags, WSP_GGML_TENSOR_FLAG_INPUT | WSP_GGML_TENSOR_FLAG_OUTPUT);
    EXPECT_EQ(wsp_ggml_get_data(t), t->data);
    EXPECT_EQ(wsp_ggml_get_data_f32(t), (float *) t->data);
    std::fill((float *) t->data, (float *) t->data + 6, 3.0f);
    wsp_ggml_set_zero(t);
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(((float *) t->data)[i], 0.0f);
    }
}

TEST(Views, ViewsOfViewsPointAtTheRootSource) {
    CtxPtr            ctx  = make_ctx(1 << 14, false);
    wsp_ggml_tensor * a    = wsp_ggml_new_tensor_2d(ctx.get(), WSP_GGML_TYPE_F32, 10, 6);
    wsp_ggml_tensor * v1   = wsp_ggml_view_2d(ctx.get(), a, 10, 4, a->nb[1], 2 * a->nb[1]);
    wsp_ggml_tensor * v2   = wsp_ggml_view_1d(ctx.get(), v1, 5, 3 * sizeof(float));
    wsp_ggml_tensor * v3   = wsp_ggml_view_tensor(ctx.get(), v2);
    char *            base = static_cast<char *>(a->data);
    EXPECT_EQ(v1->view_src, a);
    EXPECT_EQ(v1->view_offs, 2 * a->nb[1]);
    EXPECT_EQ(v2->view_src, a);
    EXPECT_EQ(v2->view_offs, 2 * a->nb[1] + 12);
    EXPECT_EQ(v3->view_src, a);
    EXPECT_EQ(v3->view_offs, v2->view_offs);
    EXPECT_EQ(v1->data, base + 80);
    EXPECT_EQ(v2->data, base + 92);
    EXPECT_EQ(v3->data, v2->data);
    EXPECT_EQ(v1->op, WSP_GGML_OP_VIEW);
    EXPECT_EQ(v2->src[0], v1);
    size_t offs = 0;
    std::memcpy(&offs, v2->op_params, sizeof(offs));
    EXPECT_EQ(offs, 12u); // the op parameter is the offset into the direct parent
    EXPECT_EQ(wsp_ggml_nbytes(v2), 20u);

    wsp_ggml_tensor * v4 = wsp_ggml_view_3d(ctx.get(), a, 3, 2, 2, a->nb[1], 3 * a->nb[1], 4);
    EXPECT_EQ(v4->nb[1], a->nb[1]);
    EXPECT_EQ(v4->nb[2], 3 * a->nb[1]);
    EXPECT_EQ(v4->nb[3], 6 * a->nb[1]);
    wsp_ggml_tensor * v5 = wsp_ggml_view_4d(ctx.get(), a, 2, 2, 2, 2, 8, 40, 120, 0);
    EXPECT_EQ(v5->nb[3], 120u);
    EXPECT_EQ(wsp_ggml_nelements(v5), 16);

    // in a no_alloc context views have no data until their source is placed
    CtxPtr            meta = make_ctx(16 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * b    = wsp_ggml_new_tensor_1d(meta.get(), WSP_GGML_TYPE_F32, 8);
    EXPECT_EQ(wsp_ggml_view_1d(meta.get(), b, 4, 16)->data, nullptr);
    EXPECT_EQ(wsp_ggml_used_mem(meta.get()), 2 * wsp_ggml_tensor_overhead());
}

TEST(Views, ReshapePermuteTransposeMetadata) {
    CtxPtr            ctx = make_ctx(1 << 14, false);
    wsp_ggml_tensor * a   = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F32, 6, 4, 2);
    wsp_ggml_set_name(a, "a");
    const size_t used = wsp_ggml_used_mem(ctx.get());

    wsp_ggml_tensor * r = wsp_ggml_reshape_2d(ctx.get(), a, 12, 4);
    EXPECT_EQ(wsp_ggml_used_mem(ctx.get()), used + wsp_ggml_tensor_overhead()); // no data of its own
    EXPECT_EQ(r->op, WSP_GGML_OP_RESHAPE);
    EXPECT_EQ(r->src[0], a);
    EXPECT_EQ(r->view_src, a);
    EXPECT_EQ(r->data, a->data);
    EXPECT_EQ(r->ne[0], 12);
    EXPECT_EQ(r->ne[1], 4);
    EXPECT_EQ(r->nb[1], 48u);
    EXPECT_STREQ(r->name, "a (reshaped)");
    wsp_ggml_tensor * like = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F16, 2, 3, 8);
    wsp_ggml_tensor * r2   = wsp_ggml_reshape(ctx.get(), a, like);
    EXPECT_EQ(r2->type, WSP_GGML_TYPE_F32);
    EXPECT_EQ(r2->ne[2], 8);
    EXPECT_EQ(wsp_ggml_reshape_1d(ctx.get(), a, 48)->ne[0], 48);
    EXPECT_EQ(wsp_ggml_reshape_4d(ctx.get(), a, 2, 3, 2, 4)->nb[3], 48u);

    wsp_ggml_tensor * p = wsp_ggml_permute(ctx.get(), a, 2, 0, 1, 3); // axis i of a goes to axis p[i]
    EXPECT_EQ(p->op, WSP_GGML_OP_PERMUTE);
    EXPECT_EQ(p->ne[0], 4);
    EXPECT_EQ(p->ne[1], 2);
    EXPECT_EQ(p->ne[2], 6);
    EXPECT_EQ(p->nb[0], a->nb[1]);
    EXPECT_EQ(p->nb[1], a->nb[2]);
    EXPECT_EQ(p->nb[2], a->nb[0]);
    EXPECT_EQ(p->data, a->data);
    EXPECT_EQ(p->op_params[0], 2);
    EXPECT_EQ(p->op_params[1], 0);
    EXPECT_EQ(p->op_params[2], 1);
    EXPECT_EQ(p->op_params[3], 3);

    wsp_ggml_tensor * t = wsp_ggml_transpose(ctx.get(), a);
    EXPECT_EQ(t->op, WSP_GGML_OP_TRANSPOSE);
    EXPECT_EQ(t->ne[0], 4);
    EXPECT_EQ(t->ne[1], 6);
    EXPECT_EQ(t->nb[0], a->nb[1]);
    EXPECT_EQ(t->nb[1], a->nb[0]);
    EXPECT_EQ(t->nb[2], a->nb[2]);
    // element (i, j) of the transpose is element (j, i) of a
    for (int i = 0; i < 48; ++i) {
        ((float *) a->data)[i] = (float) i;
    }
    EXPECT_EQ(wsp_ggml_get_f32_nd(t, 3, 5, 1, 0), wsp_ggml_get_f32_nd(a, 5, 3, 1, 0));
    EXPECT_EQ(wsp_ggml_get_f32_nd(p, 1, 1, 4, 0), wsp_ggml_get_f32_nd(a, 4, 1, 1, 0));
}

TEST(Views, ContShapes) {
    CtxPtr            ctx = make_ctx(32 * wsp_ggml_tensor_overhead(), true);
    wsp_ggml_tensor * a   = wsp_ggml_new_tensor_3d(ctx.get(), WSP_GGML_TYPE_F16, 6, 4, 2);
    wsp_ggml_tensor * p   = wsp_ggml_permute(ctx.get(), a, 1, 0, 2, 3);
    wsp_ggml_tensor * c   = wsp_ggml_cont(ctx.get(), p);
    EXPECT_EQ(c->op, WSP_GGML_OP_CONT);
    EXPECT_EQ(c->type, WSP_GGML_TYPE_F16);
    EXPECT_TRUE(wsp_ggml_are_same_shape(c, p));
    EXPECT_TRUE(wsp_ggml_is_contiguous(c));
    EXPECT_EQ(c->view_src, nullptr);
    EXPECT_EQ(c->src[0], p);
    wsp_ggml_tensor * c2 = wsp_ggml_cont_2d(ctx.get(), p, 12, 4);
    EXPECT_EQ(c2->ne[0], 12);
    EXPECT_EQ(c2->ne[1], 4);
    EXPECT_EQ(c2->ne[2], 1);
    EXPECT_EQ(wsp_ggml_cont_1d(ctx.get(), p, 48)->ne[0], 48);
    wsp_ggml_tensor * c3 = wsp_ggml_cont_3d(ctx.get(), p, 2, 3, 8);
    EXPECT_EQ(c3->ne[2], 8);
    wsp_ggml_tensor * c4 = wsp_ggml_cont_4d(ctx.get(), p, 2, 2, 3, 4);
    EXPECT_EQ(c4->ne[3], 4);
    EXPECT_TRUE(wsp_ggml_is_contiguous(c4));
    wsp_ggml_tensor * d = wsp_ggml_dup_tensor(ctx.get(), p);
    EXPECT_TRUE(wsp_ggml_are_same_shape(d, p));
    EXPECT_TRUE(wsp_ggml_is_contiguous(d));
}

TEST(Misc, StatusNamesTimeAndGuids) {
    EXPECT_NE(std::string(wsp_ggml_status_to_string(WSP_GGML_STATUS_SUCCESS)).find("success"), std::string::npos);
    EXPECT_NE(std::string(wsp_ggml_status_to_string(WSP_GGML_STATUS_ABORTED)).find("abort"), std::string::npos);
    EXPECT_NE(std::string(wsp_ggml_status_to_string(WSP_GGML_STATUS_ALLOC_FAILED)).find("allocate"), std::string::npos);
    EXPECT_NE(std::string(wsp_ggml_status_to_string(WSP_GGML_STATUS_FAILED)).find("fail"), std::string::npos);
    wsp_ggml_time_init();
    int64_t prev = wsp_ggml_time_us();
    for (int i = 0; i < 20000; ++i) {
        const int64_t now = wsp_ggml_time_us();
        ASSERT_GE(now, prev);
        prev = now;
    }
    const int64_t t0 = wsp_ggml_time_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GE(wsp_ggml_time_ms() - t0, 19);
    EXPECT_GE(wsp_ggml_time_us(), 1000 * t0);
    wsp_ggml_guid g1 = { 1, 2, 3 }, g2 = { 1, 2, 3 }, g3 = { 1, 2, 4 };
    EXPECT_TRUE(wsp_ggml_guid_matches(&g1, &g2));
    EXPECT_FALSE(wsp_ggml_guid_matches(&g1, &g3));
    EXPECT_STREQ(wsp_ggml_op_name(WSP_GGML_OP_MUL_MAT), "MUL_MAT");
    EXPECT_STREQ(wsp_ggml_op_name(WSP_GGML_OP_FLASH_ATTN_EXT), "FLASH_ATTN_EXT");
    EXPECT_STREQ(wsp_ggml_op_symbol(WSP_GGML_OP_ADD), "x+y");
    EXPECT_STREQ(wsp_ggml_unary_op_name(WSP_GGML_UNARY_OP_GELU), "GELU");
}

} // namespace
} // namespace wsp::test
