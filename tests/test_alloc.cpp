// Tensor placement: the bump allocator (tallocr) and allocation of a whole context
// (alloc_ctx_tensors), including a buffer type whose maximum size forces several buffers behind
// one multi-buffer. The graph allocator is tested in test_alloc_graph.cpp.

#include "test_util.h"

#include "alloc/first_fit.h"
#include "ggml-backend-impl.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace wsp::test {
namespace {

// the first-fit placement of the emulated devices' memory: aligned, first block that fits,
// freed blocks merged with both neighbours, NONE when nothing fits
TEST(FirstFit, PlacesAlignsMergesAndRefuses) {
    alloc::FirstFit ff(1000);
    EXPECT_EQ(ff.allocate(10, 1), 0u);
    EXPECT_EQ(ff.allocate(100, 64), 64u); // 10..63 stays free
    EXPECT_EQ(ff.allocate(20, 1), 10u);   // the first block that holds it
    EXPECT_EQ(ff.allocate(900, 1), alloc::FirstFit::NONE);
    EXPECT_EQ(ff.blocks(), 3u);
    EXPECT_EQ(ff.used(), 130u);
    EXPECT_EQ(ff.release(10), 20u);
    EXPECT_EQ(ff.release(10), 0u); // not taken any more
    EXPECT_EQ(ff.release(0), 10u);
    EXPECT_EQ(ff.release(64), 100u);
    EXPECT_EQ(ff.used(), 0u);
    EXPECT_EQ(ff.allocate(1000, 8), 0u); // everything merged back into one block
}

struct Ctx {
    explicit Ctx(size_t n_tensors) : ctx(wsp_ggml_init({ n_tensors * wsp_ggml_tensor_overhead(), nullptr, true })) {}
    ~Ctx() { wsp_ggml_free(ctx); }
    wsp_ggml_context * ctx;
};

TEST(Tallocr, PlacesTensorsInOrderAligned) {
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 1000);
    ASSERT_NE(buf, nullptr);
    wsp_ggml_tallocr talloc = wsp_ggml_tallocr_new(buf);
    EXPECT_EQ(talloc.buffer, buf);
    EXPECT_EQ(talloc.base, wsp_ggml_backend_buffer_get_base(buf));
    EXPECT_EQ(talloc.alignment, 32u);
    EXPECT_EQ(talloc.offset, 0u);

    Ctx          c(64);
    const char * base          = static_cast<const char *>(talloc.base);
    size_t       expect_offset = 0;
    int          n_placed      = 0;
    for (;;) {
        // 5 floats take 20 bytes and a 32-byte slot; every fourth tensor takes 100 bytes (128)
        const int64_t     n    = n_placed % 4 == 3 ? 25 : 5;
        wsp_ggml_tensor * t    = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, n);
        const size_t      slot = WSP_GGML_PAD((size_t) n * 4, 32);
        if (expect_offset + slot > 1000) {
            LogCapture log;
            EXPECT_EQ(wsp_ggml_tallocr_alloc(&talloc, t), WSP_GGML_STATUS_ALLOC_FAILED);
            EXPECT_TRUE(log.contains("not enough space")) << log.text();
            EXPECT_EQ(t->data, nullptr);
            EXPECT_EQ(t->buffer, nullptr);
            break;
        }
        ASSERT_EQ(wsp_ggml_tallocr_alloc(&talloc, t), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(static_cast<const char *>(t->data), base + expect_offset);
        EXPECT_EQ(t->buffer, buf);
        expect_offset += slot;
        EXPECT_EQ(talloc.offset, expect_offset);
        ++n_placed;
    }
    EXPECT_EQ(n_placed, 19); // four groups of 32+32+32+128 bytes, then three more 32-byte slots: 992
    wsp_ggml_backend_buffer_free(buf);
}

TEST(Tallocr, HonoursTheBufferTypeAlignment) {
    HostBufferType            host("Host128", 128, SIZE_MAX);
    wsp_ggml_backend_buffer_t buf    = wsp_ggml_backend_buft_alloc_buffer(host.buft(), 4096);
    wsp_ggml_tallocr          talloc = wsp_ggml_tallocr_new(buf);
    EXPECT_EQ(talloc.alignment, 128u);
    Ctx c(8);
    for (int i = 0; i < 5; ++i) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F16, 3 + 40 * i);
        ASSERT_EQ(wsp_ggml_tallocr_alloc(&talloc, t), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ((uintptr_t) t->data % 128, 0u);
    }
    wsp_ggml_backend_buffer_free(buf);
    EXPECT_EQ(host.n_freed(), 1);
}

// a context with tensors of several types, views, and a view of a view
struct MixedContext {
    Ctx                            c{ 64 };
    std::vector<wsp_ggml_tensor *> own;   // tensors that need memory
    std::vector<wsp_ggml_tensor *> views; // views of them

    MixedContext() {
        own.push_back(wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_F32, 33, 7));
        own.push_back(wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F16, 5));
        own.push_back(wsp_ggml_new_tensor_2d(c.ctx, WSP_GGML_TYPE_Q4_0, 64, 3));
        own.push_back(wsp_ggml_new_tensor_3d(c.ctx, WSP_GGML_TYPE_BF16, 9, 2, 2));
        own.push_back(wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_I32, 17));
        views.push_back(wsp_ggml_view_1d(c.ctx, own[0], 10, 33 * 4));
        views.push_back(wsp_ggml_view_1d(c.ctx, views[0], 4, 8)); // view of a view
        views.push_back(wsp_ggml_transpose(c.ctx, own[3]));
        own.push_back(wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 1000));
    }
};

void expect_placed_without_overlap(const std::vector<wsp_ggml_tensor *> & ts, const char * base, size_t size,
                                   size_t align) {
    for (size_t i = 0; i < ts.size(); ++i) {
        const char * d = static_cast<const char *>(ts[i]->data);
        ASSERT_NE(d, nullptr) << shape_str(ts[i]);
        EXPECT_GE(d, base);
        EXPECT_LE(d + wsp_ggml_nbytes(ts[i]), base + size);
        EXPECT_EQ((size_t) (d - base) % align, 0u);
        for (size_t j = 0; j < i; ++j) {
            const char * e = static_cast<const char *>(ts[j]->data);
            EXPECT_TRUE(d + wsp_ggml_nbytes(ts[i]) <= e || e + wsp_ggml_nbytes(ts[j]) <= d)
                << "tensors " << i << " and " << j << " overlap";
        }
    }
}

TEST(AllocCtxTensors, EveryTensorGetsMemoryAndViewsFollowTheirSource) {
    MixedContext              m;
    wsp_ggml_backend_t        cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors(m.c.ctx, cpu);
    ASSERT_NE(buf, nullptr);
    EXPECT_FALSE(wsp_ggml_backend_buffer_is_multi_buffer(buf));
    EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), "CPU");
    const char * base = static_cast<const char *>(wsp_ggml_backend_buffer_get_base(buf));
    size_t       need = 0;
    for (wsp_ggml_tensor * t : m.own) {
        EXPECT_EQ(t->buffer, buf);
        need += WSP_GGML_PAD(wsp_ggml_nbytes(t), 32);
    }
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), need);
    expect_placed_without_overlap(m.own, base, wsp_ggml_backend_buffer_get_size(buf), 32);
    EXPECT_EQ(m.views[0]->data, static_cast<char *>(m.own[0]->data) + 33 * 4);
    EXPECT_EQ(m.views[1]->data, static_cast<char *>(m.own[0]->data) + 33 * 4 + 8);
    EXPECT_EQ(m.views[2]->data, m.own[3]->data);
    for (wsp_ggml_tensor * v : m.views) {
        EXPECT_EQ(v->buffer, buf);
    }
    // everything is allocated now: a second call has nothing to do
    EXPECT_EQ(wsp_ggml_backend_alloc_ctx_tensors(m.c.ctx, cpu), nullptr);
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_backend_free(cpu);

    Ctx empty(4);
    EXPECT_EQ(wsp_ggml_backend_alloc_ctx_tensors_from_buft(empty.ctx, wsp_ggml_backend_cpu_buffer_type()), nullptr);
    // tensors without elements need no memory either; that is not an error
    wsp_ggml_tensor * e = wsp_ggml_new_tensor_2d(empty.ctx, WSP_GGML_TYPE_F32, 0, 3);
    LogCapture        log;
    EXPECT_EQ(wsp_ggml_backend_alloc_ctx_tensors_from_buft(empty.ctx, wsp_ggml_backend_cpu_buffer_type()), nullptr);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    EXPECT_EQ(e->data, nullptr);
}

TEST(AllocCtxTensors, SmallMaxSizeGivesAMultiBuffer) {
    HostBufferType                 host("Small", 64, 1024);
    Ctx                            c(64);
    std::vector<wsp_ggml_tensor *> ts;
    for (int i = 0; i < 12; ++i) { // 100..320 floats: 448..1280 bytes padded to 64, so two rarely share
        ts.push_back(wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 100 + 20 * (i % 7)));
    }
    wsp_ggml_tensor *         v   = wsp_ggml_view_1d(c.ctx, ts[5], 50, 40);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_alloc_ctx_tensors_from_buft(c.ctx, host.buft());
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_multi_buffer(buf));
    EXPECT_GT(host.allocations().size(), 3u);
    size_t total = 0;
    for (const auto & a : host.allocations()) {
        EXPECT_LE(a.size, 1024u);
        total += a.size;
    }
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), total);

    // each tensor lies in one of the parts, is owned by that part, and keeps its own data
    for (size_t i = 0; i < ts.size(); ++i) {
        const int part = host.allocation_of(ts[i]->data, wsp_ggml_nbytes(ts[i]));
        ASSERT_GE(part, 0) << "tensor " << i << " is outside every buffer";
        ASSERT_NE(ts[i]->buffer, nullptr);
        EXPECT_NE(ts[i]->buffer, buf);
        EXPECT_EQ(wsp_ggml_backend_buffer_get_base(ts[i]->buffer), host.allocations()[(size_t) part].base);
        EXPECT_EQ((uintptr_t) ts[i]->data % 64, 0u);
        std::vector<float> vals((size_t) ts[i]->ne[0], (float) i + 0.5f);
        wsp_ggml_backend_tensor_set(ts[i], vals.data(), 0, wsp_ggml_nbytes(ts[i]));
    }
    for (size_t i = 0; i < ts.size(); ++i) {
        std::vector<float> back((size_t) ts[i]->ne[0]);
        wsp_ggml_backend_tensor_get(ts[i], back.data(), 0, wsp_ggml_nbytes(ts[i]));
        for (float x : back) {
            ASSERT_EQ(x, (float) i + 0.5f) << "tensor " << i << " was overwritten";
        }
    }
    EXPECT_EQ(v->data, static_cast<char *>(ts[5]->data) + 40);
    EXPECT_EQ(v->buffer, ts[5]->buffer);

    // usage and clear reach every part; freeing the multi-buffer frees them all
    wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (wsp_ggml_tensor * t : ts) {
        EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(t->buffer), WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    wsp_ggml_backend_buffer_clear(buf, 0);
    for (wsp_ggml_tensor * t : ts) {
        EXPECT_EQ(static_cast<float *>(t->data)[0], 0.0f);
    }
    const size_t n_parts = host.allocations().size();
    wsp_ggml_backend_buffer_free(buf);
    EXPECT_EQ((size_t) host.n_freed(), n_parts);
}

TEST(AllocCtxTensors, TensorsLargerThanTheMaxSizeAreRefused) {
    HostBufferType                 host("Tiny", 32, 256);
    Ctx                            c(16);
    std::vector<wsp_ggml_tensor *> small;
    for (int i = 0; i < 10; ++i) { // 320 bytes: the first buffer is made before the big tensor is seen
        small.push_back(wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 8));
    }
    wsp_ggml_tensor * big = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 100);
    LogCapture        log;
    EXPECT_EQ(wsp_ggml_backend_alloc_ctx_tensors_from_buft(c.ctx, host.buft()), nullptr);
    EXPECT_TRUE(log.contains("maximum")) << log.text();
    EXPECT_GE(host.allocations().size(), 1u);
    for (wsp_ggml_tensor * t : small) { // nothing is left half-allocated
        EXPECT_EQ(t->data, nullptr);
        EXPECT_EQ(t->buffer, nullptr);
    }
    EXPECT_EQ(big->data, nullptr);
    EXPECT_EQ((size_t) host.n_freed(), host.allocations().size());
}

TEST(AllocCtxTensors, RefusesAContextThatOwnsItsData) {
    wsp_ggml_context * ctx = wsp_ggml_init({ 1 << 12, nullptr, false });
    wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 8);
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_cpu_buffer_type()), nullptr);
    EXPECT_TRUE(log.contains("no_alloc")) << log.text();
    wsp_ggml_free(ctx);
}

TEST(TensorAlloc, RefusesPlacementsOutsideTheBuffer) {
    wsp_ggml_backend_buffer_t buf  = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 256);
    char *                    base = static_cast<char *>(wsp_ggml_backend_buffer_get_base(buf));
    Ctx                       c(8);
    wsp_ggml_tensor *         t = wsp_ggml_new_tensor_1d(c.ctx, WSP_GGML_TYPE_F32, 16);
    LogCapture                log;
    EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf, t, base + 224), WSP_GGML_STATUS_FAILED);
    EXPECT_EQ(t->data, nullptr);
    EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf, t, base + 192), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf, t, base), WSP_GGML_STATUS_FAILED); // already placed
    wsp_ggml_tensor * v = wsp_ggml_view_1d(c.ctx, t, 4, 16);
    EXPECT_EQ(wsp_ggml_backend_view_init(v), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(v->data, base + 208);
    EXPECT_EQ(v->buffer, buf);
    wsp_ggml_backend_buffer_free(buf);
}

} // namespace
} // namespace wsp::test
