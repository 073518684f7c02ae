// Buffer types and buffers through the generic API: what the CPU, sim and a test buffer type
// report (names, alignment, max size, alloc size, host memory, device), zero-size buffers,
// buffer accessors, clear, init_tensor / reset hooks and the multi-buffer that
// alloc_ctx_tensors returns when a context does not fit one buffer of its type.
// Tensor data access and placement are in test_backend_tensor_io.cpp.

#include "backend_util.h"
#include "test_util.h"

#include "ggml-backend-impl.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace wsp::test {
namespace {

// A host-memory buffer type whose optional hooks can be switched on, and which counts what the
// generic functions call: init_tensor marks each tensor's extra (and refuses tensors named
// "refuse"), reset and free are counted, get_alloc_size pads every tensor to 64 bytes.
class RecordingBufferType {
public:
    RecordingBufferType(size_t max_size, bool with_optional_hooks) : max_size_(max_size) {
        buft_ = {
            /* .iface = */ {
                /* .get_name       = */ get_name,
                /* .alloc_buffer   = */ alloc_buffer,
                /* .get_alignment  = */ get_alignment,
                /* .get_max_size   = */ with_optional_hooks ? get_max_size : nullptr,
                /* .get_alloc_size = */ with_optional_hooks ? get_alloc_size : nullptr,
                /* .is_host        = */ with_optional_hooks ? is_host : nullptr,
            },
            /* .device  = */ nullptr,
            /* .context = */ this,
        };
    }

    wsp_ggml_backend_buffer_type_t buft() { return &buft_; }

    int n_init   = 0;
    int n_reset  = 0;
    int n_freed  = 0;
    int n_allocs = 0;

    // what init_tensor stores in tensor->extra
    static void * marker() {
        static int m;
        return &m;
    }

private:
    static RecordingBufferType & of(wsp_ggml_backend_buffer_type_t b) {
        return *static_cast<RecordingBufferType *>(b->context);
    }

    static const char * get_name(wsp_ggml_backend_buffer_type_t) { return "Recording"; }
    static size_t       get_alignment(wsp_ggml_backend_buffer_type_t) { return 32; }
    static size_t       get_max_size(wsp_ggml_backend_buffer_type_t b) { return of(b).max_size_; }
    static bool         is_host(wsp_ggml_backend_buffer_type_t) { return true; }

    static size_t get_alloc_size(wsp_ggml_backend_buffer_type_t, const wsp_ggml_tensor * t) {
        return WSP_GGML_PAD(wsp_ggml_nbytes(t), 64);
    }

    static wsp_ggml_backend_buffer_t alloc_buffer(wsp_ggml_backend_buffer_type_t b, size_t size) {
        void * mem = std::aligned_alloc(64, WSP_GGML_PAD(size, 64));
        of(b).n_allocs++;
        return wsp_ggml_backend_buffer_init(b, iface(), mem, size);
    }

    static wsp_ggml_backend_buffer_i iface() {
        return {
            /* .free_buffer   = */ [](wsp_ggml_backend_buffer_t b) {
                of(b->buft).n_freed++;
                std::free(b->context);
            },
            /* .get_base      = */ [](wsp_ggml_backend_buffer_t b) { return b->context; },
            /* .init_tensor   = */
            [](wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t) {
                of(b->buft).n_init++;
                if (std::string(t->name) == "refuse") {
                    return WSP_GGML_STATUS_FAILED;
                }
                t->extra = marker();
                return WSP_GGML_STATUS_SUCCESS;
            },
            /* .memset_tensor = */
            [](wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, uint8_t v, size_t off, size_t n) {
                std::memset(static_cast<char *>(t->data) + off, v, n);
            },
            /* .set_tensor    = */
            [](wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, const void * d, size_t off, size_t n) {
                std::memcpy(static_cast<char *>(t->data) + off, d, n);
            },
            /* .get_tensor    = */
            [](wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * t, void * d, size_t off, size_t n) {
                std::memcpy(d, static_cast<const char *>(t->data) + off, n);
            },
            /* .cpy_tensor    = */ nullptr,
            /* .clear         = */ [](wsp_ggml_backend_buffer_t b, uint8_t v) { std::memset(b->context, v, b->size); },
            /* .reset         = */ [](wsp_ggml_backend_buffer_t b) { of(b->buft).n_reset++; },
        };
    }

    size_t                       max_size_;
    wsp_ggml_backend_buffer_type buft_{};
};

TEST(BufferType, CpuTypeDescribesHostMemory) {
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_cpu_buffer_type();
    // asked first, before anything else touches the registry: the type must know its device
    wsp_ggml_backend_dev_t dev = wsp_ggml_backend_buft_get_device(buft);
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(dev, cpu_device());
    EXPECT_STREQ(wsp_ggml_backend_dev_name(dev), "CPU");

    EXPECT_STREQ(wsp_ggml_backend_buft_name(buft), "CPU");
    EXPECT_EQ(wsp_ggml_backend_buft_get_alignment(buft), 32u);
    EXPECT_EQ(wsp_ggml_backend_buft_get_max_size(buft), SIZE_MAX);
    EXPECT_TRUE(wsp_ggml_backend_buft_is_host(buft));

    TensorSet         s;
    wsp_ggml_tensor * f = s.f32({ 7, 3 }, "f");
    wsp_ggml_tensor * q = wsp_ggml_new_tensor_2d(s.ctx.get(), WSP_GGML_TYPE_Q4_0, 64, 2);
    EXPECT_EQ(wsp_ggml_backend_buft_get_alloc_size(buft, f), 7u * 3u * 4u);
    EXPECT_EQ(wsp_ggml_backend_buft_get_alloc_size(buft, q), 2u * 2u * 18u); // two Q4_0 blocks per row
}

TEST(BufferType, SimTypeDescribesDeviceMemory) {
    for (int i = 0; i < API_SIM_DEVICES; ++i) {
        wsp_ggml_backend_dev_t dev = sim_device(i);
        ASSERT_NE(dev, nullptr);
        wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(dev);
        const std::string              name = "SIM" + std::to_string(i);
        EXPECT_EQ(wsp_ggml_backend_buft_name(buft), name);
        EXPECT_EQ(wsp_ggml_backend_buft_get_device(buft), dev);
        EXPECT_EQ(wsp_ggml_backend_buft_get_alignment(buft), 64u);
        EXPECT_EQ(wsp_ggml_backend_buft_get_max_size(buft), API_SIM_MEMORY_MB * 1024 * 1024);
        EXPECT_FALSE(wsp_ggml_backend_buft_is_host(buft));
        TensorSet s;
        EXPECT_EQ(wsp_ggml_backend_buft_get_alloc_size(buft, s.f32({ 5, 5 }, "t")), 100u);
    }
    EXPECT_NE(wsp_ggml_backend_dev_buffer_type(sim_device(0)), wsp_ggml_backend_dev_buffer_type(sim_device(1)));
}

TEST(BufferType, OptionalHooksAreCalledOrDefaulted) {
    RecordingBufferType with(4096, true);
    RecordingBufferType without(4096, false);
    TensorSet           s;
    wsp_ggml_tensor *   t = s.f32({ 5 }, "t"); // 20 bytes
    EXPECT_STREQ(wsp_ggml_backend_buft_name(with.buft()), "Recording");
    EXPECT_EQ(wsp_ggml_backend_buft_get_max_size(with.buft()), 4096u);
    EXPECT_EQ(wsp_ggml_backend_buft_get_alloc_size(with.buft(), t), 64u);
    EXPECT_TRUE(wsp_ggml_backend_buft_is_host(with.buft()));
    EXPECT_EQ(wsp_ggml_backend_buft_get_device(with.buft()), nullptr);
    // absent hooks: no size limit, nbytes, not host memory
    EXPECT_EQ(wsp_ggml_backend_buft_get_max_size(without.buft()), SIZE_MAX);
    EXPECT_EQ(wsp_ggml_backend_buft_get_alloc_size(without.buft(), t), 20u);
    EXPECT_FALSE(wsp_ggml_backend_buft_is_host(without.buft()));
}

TEST(BufferType, AllocBeyondMaxSizeIsRefused) {
    RecordingBufferType rec(4096, true);
    LogCapture          log;
    EXPECT_EQ(wsp_ggml_backend_buft_alloc_buffer(rec.buft(), 4097), nullptr);
    EXPECT_TRUE(log.contains("maximum buffer size is 4096")) << log.text();
    EXPECT_EQ(rec.n_allocs, 0);
    wsp_ggml_backend_buffer_t ok = wsp_ggml_backend_buft_alloc_buffer(rec.buft(), 4096);
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(ok), 4096u);
    wsp_ggml_backend_buffer_free(ok);
    EXPECT_EQ(rec.n_freed, 1);
}

TEST(Buffer, ZeroSizeBuffersAreValidWithNullBase) {
    RecordingBufferType                         rec(4096, true);
    std::vector<wsp_ggml_backend_buffer_type_t> types    = { wsp_ggml_backend_cpu_buffer_type(),
                                                             wsp_ggml_backend_dev_buffer_type(sim_device(0)), rec.buft() };
    const size_t                                sim_used = wsp_ggml_backend_sim_memory_used(sim_device(0));
    for (wsp_ggml_backend_buffer_type_t buft : types) {
        SCOPED_TRACE(wsp_ggml_backend_buft_name(buft));
        wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(buft, 0);
        ASSERT_NE(buf, nullptr);
        EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), 0u);
        EXPECT_EQ(wsp_ggml_backend_buffer_get_base(buf), nullptr);
        EXPECT_EQ(wsp_ggml_backend_buffer_get_type(buf), buft);
        EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), wsp_ggml_backend_buft_name(buft));
        wsp_ggml_backend_buffer_clear(buf, 0x7f); // nothing to clear, must not touch memory
        wsp_ggml_backend_buffer_free(buf);
    }
    EXPECT_EQ(rec.n_allocs, 0); // the type's allocator is not asked for nothing
    EXPECT_EQ(wsp_ggml_backend_sim_memory_used(sim_device(0)), sim_used);
}

TEST(Buffer, CpuBufferAccessorsAndClear) {
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_cpu_buffer_type();
    wsp_ggml_backend_buffer_t      buf  = wsp_ggml_backend_buft_alloc_buffer(buft, 1000);
    ASSERT_NE(buf, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), "CPU");
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), 1000u);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_type(buf), buft);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_alignment(buf), 32u);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_max_size(buf), SIZE_MAX);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_host(buf));
    auto * base = static_cast<uint8_t *>(wsp_ggml_backend_buffer_get_base(buf));
    ASSERT_NE(base, nullptr);
    EXPECT_EQ((uintptr_t) base % 32, 0u);

    TensorSet s;
    EXPECT_EQ(wsp_ggml_backend_buffer_get_alloc_size(buf, s.f32({ 3, 3 }, "t")), 36u);

    EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(buf), WSP_GGML_BACKEND_BUFFER_USAGE_ANY);
    for (auto usage : { WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS, WSP_GGML_BACKEND_BUFFER_USAGE_COMPUTE,
                        WSP_GGML_BACKEND_BUFFER_USAGE_ANY }) {
        wsp_ggml_backend_buffer_set_usage(buf, usage);
        EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(buf), usage);
    }

    for (uint8_t value : { 0x5a, 0x00, 0xff }) {
        wsp_ggml_backend_buffer_clear(buf, value);
        size_t n_other = 0;
        for (size_t i = 0; i < 1000; ++i) {
            n_other += base[i] != value ? 1 : 0;
        }
        EXPECT_EQ(n_other, 0u) << "clear(" << (int) value << ") left other bytes";
    }
    wsp_ggml_backend_buffer_free(buf);
    wsp_ggml_backend_buffer_free(nullptr); // freeing nothing is allowed
}

// Note [huge pages] (cpu_buffer.cpp): a large CPU buffer starts on a 2 MiB boundary (Linux) and
// holds what is written to it, end to end; the smaps line says whether the kernel gave huge pages
// (advice, which it may refuse: reported, not asserted)
TEST(Buffer, LargeCpuBuffersStartOnAHugePage) {
    const size_t              size = (size_t) 9 << 20; // not a multiple of 2 MiB
    wsp_ggml_backend_buffer_t buf  = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), size);
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), size);
    auto * base = static_cast<uint8_t *>(wsp_ggml_backend_buffer_get_base(buf));
#if defined(__linux__)
    const char * env = std::getenv("WSP_GGML_CPU_HUGE_PAGES");
    if (env == nullptr || std::atoi(env) != 0) {
        EXPECT_EQ((uintptr_t) base % ((uintptr_t) 2 << 20), 0u);
    }
#endif
    for (size_t i = 0; i < size; i += 4096) {
        base[i] = (uint8_t) (i >> 12);
    }
    base[size - 1] = 0xa5;
    size_t bad     = 0;
    for (size_t i = 0; i < size; i += 4096) {
        bad += base[i] != (uint8_t) (i >> 12) ? 1 : 0;
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(base[size - 1], 0xa5);
    wsp_ggml_backend_buffer_free(buf);
}

TEST(Buffer, SimBufferAccessorsAndClear) {
    wsp_ggml_backend_dev_t         dev  = sim_device(1);
    wsp_ggml_backend_buffer_type_t buft = wsp_ggml_backend_dev_buffer_type(dev);
    const size_t                   used = wsp_ggml_backend_sim_memory_used(dev);
    wsp_ggml_backend_buffer_t      buf  = wsp_ggml_backend_buft_alloc_buffer(buft, 1000);
    ASSERT_NE(buf, nullptr);
    EXPECT_GE(wsp_ggml_backend_sim_memory_used(dev), used + 1000);
    EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), "SIM1");
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), 1000u);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_type(buf), buft);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_alignment(buf), 64u);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_max_size(buf), API_SIM_MEMORY_MB * 1024 * 1024);
    EXPECT_FALSE(wsp_ggml_backend_buffer_is_host(buf));
    void * base = wsp_ggml_backend_buffer_get_base(buf);
    ASSERT_NE(base, nullptr);
    EXPECT_EQ((uintptr_t) base % 64, 0u);

    // device memory is read back through a byte tensor spanning the whole buffer
    TensorSet         s;
    wsp_ggml_tensor * all = wsp_ggml_new_tensor_1d(s.ctx.get(), WSP_GGML_TYPE_I8, 1000);
    ASSERT_EQ(wsp_ggml_backend_tensor_alloc(buf, all, base), WSP_GGML_STATUS_SUCCESS);
    for (uint8_t value : { 0x3c, 0x00 }) {
        wsp_ggml_backend_buffer_clear(buf, value);
        std::vector<uint8_t> bytes(1000, (uint8_t) ~value);
        wsp_ggml_backend_tensor_get(all, bytes.data(), 0, bytes.size());
        EXPECT_EQ(std::count(bytes.begin(), bytes.end(), value), 1000);
    }
    wsp_ggml_backend_buffer_set_usage(buf, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(buf), WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    wsp_ggml_backend_buffer_free(buf);
    EXPECT_EQ(wsp_ggml_backend_sim_memory_used(dev), used);
}

TEST(Buffer, InitTensorAndResetCallTheBufferHooks) {
    RecordingBufferType       rec(4096, true);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(rec.buft(), 512);
    ASSERT_NE(buf, nullptr);
    TensorSet         s;
    wsp_ggml_tensor * a = s.f32({ 4 }, "a");
    wsp_ggml_tensor * b = s.f32({ 4 }, "refuse");
    a->buffer           = buf;
    a->data             = wsp_ggml_backend_buffer_get_base(buf);
    EXPECT_EQ(wsp_ggml_backend_buffer_init_tensor(buf, a), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(a->extra, RecordingBufferType::marker());
    EXPECT_EQ(wsp_ggml_backend_buffer_init_tensor(buf, b), WSP_GGML_STATUS_FAILED);
    EXPECT_EQ(b->extra, nullptr);
    EXPECT_EQ(rec.n_init, 2);

    wsp_ggml_backend_buffer_reset(buf);
    wsp_ggml_backend_buffer_reset(buf);
    EXPECT_EQ(rec.n_reset, 2);
    wsp_ggml_backend_buffer_free(buf);
    EXPECT_EQ(rec.n_freed, 1);

    // the CPU buffer has neither hook: init succeeds without extras and reset keeps the data
    wsp_ggml_backend_buffer_t cpu = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 64);
    wsp_ggml_tensor *         c   = s.f32({ 4 }, "c");
    ASSERT_EQ(wsp_ggml_backend_tensor_alloc(cpu, c, wsp_ggml_backend_buffer_get_base(cpu)), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(wsp_ggml_backend_buffer_init_tensor(cpu, c), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(c->extra, nullptr);
    upload(c, { 1, 2, 3, 4 });
    wsp_ggml_backend_buffer_reset(cpu);
    EXPECT_EQ(download(c), std::vector<float>({ 1, 2, 3, 4 }));
    wsp_ggml_backend_buffer_free(cpu);
}

TEST(Buffer, AllocCtxTensorsSplitsIntoAMultiBufferAtTheMaxSize) {
    // 24 floats take 96 bytes, padded to 128 by the type: two tensors fit a 256-byte buffer
    RecordingBufferType            rec(256, true);
    TensorSet                      s;
    std::vector<wsp_ggml_tensor *> ts;
    for (int i = 0; i < 5; ++i) {
        ts.push_back(s.f32({ 24 }, ("t" + std::to_string(i)).c_str()));
    }
    wsp_ggml_backend_buffer_t multi = wsp_ggml_backend_alloc_ctx_tensors_from_buft(s.ctx.get(), rec.buft());
    ASSERT_NE(multi, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_multi_buffer(multi));
    EXPECT_EQ(rec.n_allocs, 3);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(multi), 256u + 256u + 128u);
    EXPECT_STREQ(wsp_ggml_backend_buffer_name(multi), "Recording");
    EXPECT_EQ(rec.n_init, 5); // every tensor was initialised in its part
    for (size_t i = 0; i < ts.size(); ++i) {
        ASSERT_NE(ts[i]->buffer, nullptr);
        EXPECT_NE(ts[i]->buffer, multi);
        EXPECT_FALSE(wsp_ggml_backend_buffer_is_multi_buffer(ts[i]->buffer));
        EXPECT_EQ(ts[i]->buffer, ts[i - i % 2]->buffer) << "tensors are packed two per part, in order";
        const char * base = static_cast<const char *>(wsp_ggml_backend_buffer_get_base(ts[i]->buffer));
        EXPECT_EQ(static_cast<const char *>(ts[i]->data), base + (i % 2) * 128);
    }

    wsp_ggml_backend_buffer_set_usage(multi, WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(multi), WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (wsp_ggml_tensor * t : ts) {
        EXPECT_EQ(wsp_ggml_backend_buffer_get_usage(t->buffer), WSP_GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }

    wsp_ggml_backend_buffer_clear(multi, 0x33);
    for (wsp_ggml_tensor * t : ts) {
        std::vector<uint8_t> bytes(wsp_ggml_nbytes(t));
        wsp_ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
        EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0x33), (long) bytes.size()) << t->name;
    }
    wsp_ggml_backend_buffer_free(multi);
    EXPECT_EQ(rec.n_freed, 3);
}

TEST(Buffer, AllocCtxTensorsRefusesATensorLargerThanTheMaxSize) {
    RecordingBufferType rec(256, true);
    TensorSet           s;
    wsp_ggml_tensor *   small = s.f32({ 8 }, "small");
    wsp_ggml_tensor *   big   = s.f32({ 100 }, "big"); // 400 bytes
    LogCapture          log;
    EXPECT_EQ(wsp_ggml_backend_alloc_ctx_tensors_from_buft(s.ctx.get(), rec.buft()), nullptr);
    EXPECT_TRUE(log.contains("more than the maximum")) << log.text();
    EXPECT_EQ(small->data, nullptr);
    EXPECT_EQ(big->data, nullptr);
    EXPECT_EQ(rec.n_allocs, rec.n_freed); // nothing leaks
}

} // namespace
} // namespace wsp::test
