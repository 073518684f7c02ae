// Tensor data through the generic API on CPU and sim buffers: tensor_set / get / memset inside
// a tensor's bounds touch exactly the bytes asked for, and outside them are refused with a
// message and touch nothing (the bytes around the tensor are checked); tensor_copy between
// every pair of CPU and sim buffers; placement with tensor_alloc and view_init (success and
// each failure status); buffers over caller memory (cpu_buffer_from_ptr).

#include "backend_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace wsp::test {
namespace {

constexpr size_t  CANVAS_BYTES  = 256;
constexpr size_t  TENSOR_OFFSET = 64; // t lives at [64, 128) of the buffer
constexpr uint8_t SENTINEL      = 0xab;

// A 256-byte buffer of the given type holding a 16-float tensor t at offset 64 and a byte
// tensor `all` over the whole buffer, through which every byte can be checked on any device.
struct Canvas {
    TensorSet                   s;
    wsp_ggml_backend_buffer_ptr buf;
    wsp_ggml_tensor *           t   = nullptr;
    wsp_ggml_tensor *           all = nullptr;

    explicit Canvas(wsp_ggml_backend_buffer_type_t buft) : buf(wsp_ggml_backend_buft_alloc_buffer(buft, CANVAS_BYTES)) {
        EXPECT_NE(buf, nullptr);
        char * base = static_cast<char *>(wsp_ggml_backend_buffer_get_base(buf.get()));
        t           = s.f32({ 16 }, "t");
        all         = wsp_ggml_new_tensor_1d(s.ctx.get(), WSP_GGML_TYPE_I8, CANVAS_BYTES);
        EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf.get(), t, base + TENSOR_OFFSET), WSP_GGML_STATUS_SUCCESS);
        EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf.get(), all, base), WSP_GGML_STATUS_SUCCESS);
        wsp_ggml_backend_buffer_clear(buf.get(), SENTINEL);
    }

    std::vector<uint8_t> bytes() const {
        std::vector<uint8_t> b(CANVAS_BYTES);
        wsp_ggml_backend_tensor_get(all, b.data(), 0, b.size());
        return b;
    }

    // the buffer as expected: SENTINEL everywhere except `changed` bytes starting at buffer offset `at`
    void expect_only(size_t at, const std::vector<uint8_t> & changed) const {
        std::vector<uint8_t> want(CANVAS_BYTES, SENTINEL);
        std::copy(changed.begin(), changed.end(), want.begin() + (long) at);
        const std::vector<uint8_t> got = bytes();
        for (size_t i = 0; i < CANVAS_BYTES; ++i) {
            ASSERT_EQ(got[i], want[i]) << "byte " << i << " of the buffer";
        }
    }
};

std::vector<uint8_t> as_bytes(const std::vector<float> & v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

class TensorIo : public ::testing::TestWithParam<const char *> {
protected:
    wsp_ggml_backend_buffer_type_t buft() const {
        const std::string name = GetParam();
        return name == "CPU" ? wsp_ggml_backend_cpu_buffer_type() : wsp_ggml_backend_dev_buffer_type(sim_device(0));
    }
};

TEST_P(TensorIo, SetAndGetInRangeTouchExactlyTheRange) {
    Canvas c(buft());
    upload(c.t, filled(16, 1.0f, 1.0f));
    c.expect_only(TENSOR_OFFSET, as_bytes(filled(16, 1.0f, 1.0f)));
    EXPECT_EQ(download(c.t), filled(16, 1.0f, 1.0f));

    // part of the tensor: floats 2..4 (bytes 8..20)
    const std::vector<float> part = { -1.5f, -2.5f, -3.5f };
    wsp_ggml_backend_buffer_clear(c.buf.get(), SENTINEL);
    wsp_ggml_backend_tensor_set(c.t, part.data(), 8, 12);
    c.expect_only(TENSOR_OFFSET + 8, as_bytes(part));

    std::vector<float> got(5, 9.0f);
    wsp_ggml_backend_tensor_get(c.t, got.data() + 1, 8, 12);
    EXPECT_EQ(got, std::vector<float>({ 9.0f, -1.5f, -2.5f, -3.5f, 9.0f }));
}

TEST_P(TensorIo, MemsetInRangeTouchesExactlyTheRange) {
    Canvas c(buft());
    wsp_ggml_backend_tensor_memset(c.t, 0x11, 8, 16);
    c.expect_only(TENSOR_OFFSET + 8, std::vector<uint8_t>(16, 0x11));
    wsp_ggml_backend_tensor_memset(c.t, 0x22, 0, 64); // the whole tensor
    c.expect_only(TENSOR_OFFSET, std::vector<uint8_t>(64, 0x22));
}

TEST_P(TensorIo, OutOfRangeAccessIsRefusedAndTouchesNothing) {
    Canvas c(buft());
    // (offset, size) pairs that leave the tensor's 64 bytes, including an overflowing end
    const std::vector<std::pair<size_t, size_t>> bad = {
        { 60, 8 }, { 64, 1 }, { 0, 65 }, { 100, 4 }, { SIZE_MAX - 2, 4 }
    };
    std::vector<uint8_t> src(128, 0x5c);
    for (const auto & [offset, size] : bad) {
        SCOPED_TRACE("offset " + std::to_string(offset) + ", size " + std::to_string(size));
        LogCapture log;
        wsp_ggml_backend_tensor_set(c.t, src.data(), offset, size);
        wsp_ggml_backend_tensor_memset(c.t, 0x5c, offset, size);
        std::vector<uint8_t> dst(128, 0xcd);
        wsp_ggml_backend_tensor_get(c.t, dst.data(), offset, size);
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 3) << log.text();
        EXPECT_TRUE(log.contains("out of the bounds")) << log.text();
        EXPECT_EQ(std::count(dst.begin(), dst.end(), 0xcd), 128) << "get wrote into the destination";
        c.expect_only(0, {});
    }
    // a zero-size access anywhere is a silent no-op
    LogCapture log;
    wsp_ggml_backend_tensor_set(c.t, src.data(), 1000, 0);
    wsp_ggml_backend_tensor_memset(c.t, 0x5c, 1000, 0);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    c.expect_only(0, {});
}

TEST_P(TensorIo, ViewsWriteIntoTheirSource) {
    Canvas            c(buft());
    wsp_ggml_tensor * v = wsp_ggml_view_1d(c.s.ctx.get(), c.t, 4, 2 * sizeof(float)); // floats 2..5 of t
    ASSERT_EQ(wsp_ggml_backend_view_init(v), WSP_GGML_STATUS_SUCCESS);
    upload(c.t, std::vector<float>(16, 0.0f));
    upload(v, { 7, 8, 9, 10 });
    std::vector<float> want(16, 0.0f);
    std::copy_n(std::vector<float>({ 7, 8, 9, 10 }).begin(), 4, want.begin() + 2);
    EXPECT_EQ(download(c.t), want);
    // the view's own bounds apply: 4 floats, not the 14 that its source still has after it
    LogCapture         log;
    std::vector<float> five(5, 1.0f);
    wsp_ggml_backend_tensor_set(v, five.data(), 0, sizeof(float) * 5);
    EXPECT_TRUE(log.contains("out of the bounds")) << log.text();
    EXPECT_EQ(download(c.t), want);
}

INSTANTIATE_TEST_SUITE_P(CpuAndSim, TensorIo, ::testing::Values("CPU", "SIM0"),
                         [](const auto & info) { return std::string(info.param); });

TEST(TensorIoErrors, UnallocatedTensorIsRefused) {
    TensorSet          s;
    wsp_ggml_tensor *  t = s.f32({ 4 }, "loose");
    std::vector<float> v(4, 1.0f);
    LogCapture         log;
    wsp_ggml_backend_tensor_set(t, v.data(), 0, 16);
    wsp_ggml_backend_tensor_get(t, v.data(), 0, 16);
    wsp_ggml_backend_tensor_memset(t, 0, 0, 16);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 3) << log.text();
    EXPECT_TRUE(log.contains("not allocated")) << log.text();
    EXPECT_EQ(v, std::vector<float>(4, 1.0f));
}

//
// tensor_copy between buffers of every kind
//

struct CopyCase {
    const char * src;
    const char * dst;
};

wsp_ggml_backend_buffer_type_t buft_named(const std::string & name) {
    if (name == "CPU") {
        return wsp_ggml_backend_cpu_buffer_type();
    }
    return wsp_ggml_backend_dev_buffer_type(sim_device(name == "SIM0" ? 0 : 1));
}

class TensorCopy : public ::testing::TestWithParam<CopyCase> {};

TEST_P(TensorCopy, CopiesAllValues) {
    TensorSet         from, to;
    wsp_ggml_tensor * a = from.f32({ 13, 3 }, "a");
    wsp_ggml_tensor * b = to.f32({ 13, 3 }, "b");
    ASSERT_TRUE(from.alloc(buft_named(GetParam().src)));
    ASSERT_TRUE(to.alloc(buft_named(GetParam().dst)));
    const std::vector<float> values = random_values(39, 7);
    upload(a, values);
    upload(b, std::vector<float>(39, 0.0f));
    wsp_ggml_backend_tensor_copy(a, b);
    EXPECT_EQ(download(b), values);
    EXPECT_EQ(download(a), values) << "the source must not change";
}

TEST_P(TensorCopy, MismatchedLayoutIsRefused) {
    TensorSet         from, to;
    wsp_ggml_tensor * a = from.f32({ 13, 3 }, "a");
    wsp_ggml_tensor * b = to.f32({ 3, 13 }, "b"); // same size, other shape
    ASSERT_TRUE(from.alloc(buft_named(GetParam().src)));
    ASSERT_TRUE(to.alloc(buft_named(GetParam().dst)));
    upload(a, random_values(39, 8));
    upload(b, std::vector<float>(39, 0.0f));
    LogCapture log;
    wsp_ggml_backend_tensor_copy(a, b);
    EXPECT_TRUE(log.contains("differ in type or layout")) << log.text();
    EXPECT_EQ(download(b), std::vector<float>(39, 0.0f));
}

INSTANTIATE_TEST_SUITE_P(Pairs, TensorCopy,
                         ::testing::Values(CopyCase{ "CPU", "CPU" }, CopyCase{ "CPU", "SIM0" },
                                           CopyCase{ "SIM0", "CPU" }, CopyCase{ "SIM0", "SIM1" },
                                           CopyCase{ "SIM1", "SIM0" }, CopyCase{ "SIM0", "SIM0" }),
                         [](const auto & info) { return std::string(info.param.src) + "_to_" + info.param.dst; });

TEST(TensorCopyFaults, InjectedSimCopyFaultLeavesTheDestination) {
    TensorSet         from, to;
    wsp_ggml_tensor * a = from.f32({ 8 }, "a");
    wsp_ggml_tensor * b = to.f32({ 8 }, "b");
    ASSERT_TRUE(from.alloc(buft_named("SIM0")));
    ASSERT_TRUE(to.alloc(buft_named("SIM1")));
    upload(a, filled(8, 1.0f, 1.0f));
    upload(b, std::vector<float>(8, 0.0f));
    LogCapture log;
    wsp_ggml_backend_sim_inject_fault(sim_device(1), WSP_GGML_SIM_FAULT_COPY);
    wsp_ggml_backend_tensor_copy(a, b);
    EXPECT_TRUE(log.contains("injected copy fault")) << log.text();
    EXPECT_EQ(download(b), std::vector<float>(8, 0.0f));
    wsp_ggml_backend_tensor_copy(a, b); // the fault was used up
    EXPECT_EQ(download(b), filled(8, 1.0f, 1.0f));
}

//
// placement: tensor_alloc and view_init
//

TEST(TensorAlloc, PlacesATensorInsideTheBuffer) {
    wsp_ggml_backend_buffer_ptr buf(wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 256));
    char *                      base = static_cast<char *>(wsp_ggml_backend_buffer_get_base(buf.get()));
    TensorSet                   s;
    wsp_ggml_tensor *           t = s.f32({ 8 }, "t"); // 32 bytes
    // the last 32 bytes: fits exactly
    ASSERT_EQ(wsp_ggml_backend_tensor_alloc(buf.get(), t, base + 224), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(t->buffer, buf.get());
    EXPECT_EQ(t->data, base + 224);
    upload(t, filled(8, 0.5f, 0.5f));
    float last;
    std::memcpy(&last, base + 252, sizeof(float));
    EXPECT_EQ(last, 4.0f);
}

TEST(TensorAlloc, FailuresLeaveTheTensorUnplaced) {
    wsp_ggml_backend_buffer_ptr buf(wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_cpu_buffer_type(), 256));
    char *                      base = static_cast<char *>(wsp_ggml_backend_buffer_get_base(buf.get()));
    TensorSet                   s;
    wsp_ggml_tensor *           t = s.f32({ 8 }, "t");
    for (char * addr : { base + 225, base + 256, base - 32, base + 4096 }) {
        LogCapture log;
        EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf.get(), t, addr), WSP_GGML_STATUS_FAILED) << (addr - base);
        EXPECT_TRUE(log.contains("outside its buffer")) << log.text();
        EXPECT_EQ(t->buffer, nullptr);
        EXPECT_EQ(t->data, nullptr);
    }
    // placed once, it cannot be placed again, and a view cannot be placed at all
    ASSERT_EQ(wsp_ggml_backend_tensor_alloc(buf.get(), t, base), WSP_GGML_STATUS_SUCCESS);
    wsp_ggml_tensor * v = wsp_ggml_view_1d(s.ctx.get(), t, 2, 4); // a view of placed data points into it
    for (wsp_ggml_tensor * x : { t, v }) {
        LogCapture log;
        EXPECT_EQ(wsp_ggml_backend_tensor_alloc(buf.get(), x, base + 128), WSP_GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("already allocated or is a view")) << log.text();
    }
    EXPECT_EQ(t->data, base);
    EXPECT_EQ(v->data, base + 4);
}

TEST(ViewInit, PointsTheViewIntoItsSource) {
    TensorSet         s;
    wsp_ggml_tensor * src = s.f32({ 6, 4 }, "src");
    ASSERT_TRUE(s.alloc(wsp_ggml_backend_dev_buffer_type(sim_device(0))));
    wsp_ggml_tensor * row2 = wsp_ggml_view_1d(s.ctx.get(), src, 6, 2 * src->nb[1]);
    ASSERT_EQ(wsp_ggml_backend_view_init(row2), WSP_GGML_STATUS_SUCCESS);
    EXPECT_EQ(row2->buffer, src->buffer);
    EXPECT_EQ(row2->data, static_cast<char *>(src->data) + 2 * src->nb[1]);
    upload(src, filled(24, 0.0f, 1.0f));
    EXPECT_EQ(download(row2), filled(6, 12.0f, 1.0f));
}

TEST(ViewInit, FailsWithoutAnAllocatedSource) {
    TensorSet         s;
    wsp_ggml_tensor * plain = s.f32({ 4 }, "plain");
    wsp_ggml_tensor * view  = wsp_ggml_view_1d(s.ctx.get(), plain, 2, 4);
    for (wsp_ggml_tensor * x : { plain, view }) { // not a view; a view of an unallocated tensor
        LogCapture log;
        EXPECT_EQ(wsp_ggml_backend_view_init(x), WSP_GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("not a view of an allocated tensor")) << log.text();
        EXPECT_EQ(x->data, nullptr);
        EXPECT_EQ(x->buffer, nullptr);
    }
}

//
// buffers over caller memory
//

struct AlignedMemory {
    explicit AlignedMemory(size_t n) : p(static_cast<char *>(std::aligned_alloc(64, n))) {}
    ~AlignedMemory() { std::free(p); }
    char * p;
};

TEST(CpuBufferFromPtr, UsesTheCallersMemory) {
    AlignedMemory mem(256);
    std::memset(mem.p, 0, 256);
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_cpu_buffer_from_ptr(mem.p, 256);
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_base(buf), mem.p);
    EXPECT_EQ(wsp_ggml_backend_buffer_get_size(buf), 256u);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_host(buf));
    EXPECT_STREQ(wsp_ggml_backend_buffer_name(buf), "CPU_Mapped");
    EXPECT_EQ(wsp_ggml_backend_buft_get_device(wsp_ggml_backend_buffer_get_type(buf)), cpu_device());

    TensorSet         s;
    wsp_ggml_tensor * t = s.f32({ 4 }, "t");
    ASSERT_EQ(wsp_ggml_backend_tensor_alloc(buf, t, mem.p + 32), WSP_GGML_STATUS_SUCCESS);
    upload(t, { 1, 2, 3, 4 });
    float direct[4];
    std::memcpy(direct, mem.p + 32, sizeof(direct));
    EXPECT_EQ(std::vector<float>(direct, direct + 4), std::vector<float>({ 1, 2, 3, 4 }));
    const float changed = 42.0f; // and the caller's writes are what the tensor holds
    std::memcpy(mem.p + 36, &changed, sizeof(float));
    EXPECT_EQ(download(t), std::vector<float>({ 1, 42, 3, 4 }));

    wsp_ggml_backend_buffer_clear(buf, 0x7e);
    EXPECT_EQ(std::count(mem.p, mem.p + 256, (char) 0x7e), 256);
    wsp_ggml_backend_buffer_free(buf); // the memory stays the caller's: still usable, freed by ~AlignedMemory
    mem.p[0] = 1;
    EXPECT_EQ(mem.p[255], (char) 0x7e);
}

TEST(CpuBufferFromPtr, MisalignedOrNullPointersAreRefused) {
    AlignedMemory mem(256);
    for (size_t misalignment : { 1, 4, 16 }) { // tensors need 32-byte alignment
        LogCapture log;
        EXPECT_EQ(wsp_ggml_backend_cpu_buffer_from_ptr(mem.p + misalignment, 128), nullptr) << misalignment;
        EXPECT_TRUE(log.contains("not aligned")) << log.text();
    }
    LogCapture log;
    EXPECT_EQ(wsp_ggml_backend_cpu_buffer_from_ptr(nullptr, 128), nullptr);
    EXPECT_TRUE(log.contains("NULL")) << log.text();
}

} // namespace
} // namespace wsp::test
