// The happens-before checker (src/race) on its own, with agents driven by hand: accesses that a
// queue, an event or a synchronize orders pass; unordered conflicting ones are reported once
// each, naming both; reads do not conflict with reads; forgotten memory has no history; a
// tensor's byte ranges follow its strides.

#include "race/race.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace wsp::test {
namespace {

using race::Checker;
using race::Range;
using race::VectorClock;

race::What what(const char * s) {
    return race::text_label(s);
}

std::vector<Range> bytes(uintptr_t a, uintptr_t b) {
    return { { a, b } };
}

// two streams fed by this thread (the host)
struct TwoStreams {
    Checker c;
    int     s1 = c.new_stream_agent();
    int     s2 = c.new_stream_agent();
    int     host() { return c.host_agent(); }
    // queue a command on stream s: it starts with the host's clock
    void queue_and_start(int s) { c.begin_command(s, c.release_host()); }
};

TEST(Race, UnorderedWritesOnTwoStreamsAreReportedNamingBoth) {
    TwoStreams  t;
    std::string msg;
    t.queue_and_start(t.s1);
    t.queue_and_start(t.s2);
    EXPECT_TRUE(t.c.write(t.s1, bytes(100, 200), what("kernel A"), &msg));
    EXPECT_FALSE(t.c.write(t.s2, bytes(150, 160), what("kernel B"), &msg));
    EXPECT_NE(msg.find("kernel A"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kernel B"), std::string::npos) << msg;
    EXPECT_EQ(t.c.races(), 1u);
    // bytes next to the ones written are not shared
    t.queue_and_start(t.s2);
    EXPECT_TRUE(t.c.write(t.s2, bytes(200, 300), what("kernel C"), nullptr));
}

TEST(Race, ReadsDoNotConflictWithReads) {
    TwoStreams t;
    t.queue_and_start(t.s1);
    t.queue_and_start(t.s2);
    EXPECT_TRUE(t.c.read(t.s1, bytes(0, 64), what("a"), nullptr));
    EXPECT_TRUE(t.c.read(t.s2, bytes(0, 64), what("b"), nullptr));
    // but a write after both, ordered after neither, conflicts
    t.queue_and_start(t.s1);
    EXPECT_FALSE(t.c.write(t.s1, bytes(0, 8), what("c"), nullptr));
}

TEST(Race, AnEventRecordAndWaitOrdersTwoStreams) {
    TwoStreams t;
    t.queue_and_start(t.s1);
    EXPECT_TRUE(t.c.write(t.s1, bytes(0, 64), what("producer"), nullptr));
    const VectorClock recorded = t.c.clock_of(t.s1); // a record command after the producer
    t.queue_and_start(t.s2);
    t.c.acquire(t.s2, recorded); // the wait
    t.queue_and_start(t.s2);
    EXPECT_TRUE(t.c.read(t.s2, bytes(0, 64), what("consumer"), nullptr));
    // work of s1 after the record is not ordered before s2's
    t.queue_and_start(t.s1);
    EXPECT_FALSE(t.c.write(t.s1, bytes(0, 4), what("late writer"), nullptr));
    EXPECT_EQ(t.c.races(), 1u);
}

TEST(Race, TheHostOrdersWhatItQueuesAfterItsOwnAccessesAndSynchronizes) {
    TwoStreams t;
    // host write, then a queued command reads: ordered by the queue
    EXPECT_TRUE(t.c.write(t.host(), bytes(0, 32), what("host set"), nullptr));
    t.queue_and_start(t.s1);
    EXPECT_TRUE(t.c.read(t.s1, bytes(0, 32), what("kernel"), nullptr));
    EXPECT_TRUE(t.c.write(t.s1, bytes(32, 64), what("kernel"), nullptr));
    // host read of what the stream wrote: a race until the host synchronizes with the stream
    EXPECT_FALSE(t.c.read(t.host(), bytes(32, 40), what("host get too early"), nullptr));
    t.c.acquire(t.host(), t.c.clock_of(t.s1));
    EXPECT_TRUE(t.c.read(t.host(), bytes(32, 64), what("host get"), nullptr));
}

TEST(Race, ForgottenMemoryHasNoHistory) {
    TwoStreams t;
    t.queue_and_start(t.s1);
    EXPECT_TRUE(t.c.write(t.s1, bytes(0, 4096), what("old buffer"), nullptr));
    t.c.forget({ 1024, 2048 });
    t.queue_and_start(t.s2);
    EXPECT_TRUE(t.c.write(t.s2, bytes(1024, 2048), what("new buffer"), nullptr));
    EXPECT_FALSE(t.c.write(t.s2, bytes(2040, 2050), what("across the edge"), nullptr));
}

TEST(Race, ChecksOffRecordNothing) {
    TwoStreams t;
    t.queue_and_start(t.s1);
    t.queue_and_start(t.s2);
    t.c.set_enabled(false);
    EXPECT_TRUE(t.c.write(t.s1, bytes(0, 8), what("a"), nullptr));
    EXPECT_TRUE(t.c.write(t.s2, bytes(0, 8), what("b"), nullptr));
    t.c.set_enabled(true);
    EXPECT_EQ(t.c.races(), 0u);
}

// ranges of tensors, from their layout (data at a fake address: only metadata is read)
struct Layout {
    wsp_ggml_context * ctx = wsp_ggml_init({ 16 * wsp_ggml_tensor_overhead(), nullptr, true });
    ~Layout() { wsp_ggml_free(ctx); }
    wsp_ggml_tensor * at(wsp_ggml_tensor * t, uintptr_t base) {
        t->data = reinterpret_cast<void *>(base);
        return t;
    }
};

TEST(Race, TensorRangesFollowTheStrides) {
    Layout             l;
    std::vector<Range> r;
    // contiguous: one range
    wsp_ggml_tensor * a = l.at(wsp_ggml_new_tensor_2d(l.ctx, WSP_GGML_TYPE_F32, 8, 3), 4096);
    race::tensor_ranges(a, r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].begin, 4096u);
    EXPECT_EQ(r[0].end, 4096u + 96);
    // rows 2..5 of dim 0 of a [8, 3] tensor: three ranges of 16 bytes, 32 apart
    r.clear();
    wsp_ggml_tensor * v = wsp_ggml_view_2d(l.ctx, a, 4, 3, a->nb[1], 2 * sizeof(float));
    v->data             = reinterpret_cast<char *>(a->data) + 8;
    race::tensor_ranges(v, r);
    ASSERT_EQ(r.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(r[i].begin, 4096u + 8 + 32 * i);
        EXPECT_EQ(r[i].end, r[i].begin + 16);
    }
    // a transpose covers every element once: merged back into one range
    r.clear();
    race::tensor_ranges(wsp_ggml_transpose(l.ctx, a), r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].end - r[0].begin, 96u);
    // quantized rows: whole blocks
    r.clear();
    race::tensor_ranges(l.at(wsp_ggml_new_tensor_2d(l.ctx, WSP_GGML_TYPE_Q8_0, 64, 2), 1 << 20), r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].end - r[0].begin, 2 * 2 * 34u);
    // beyond MAX_PIECES pieces: the bounding range
    r.clear();
    wsp_ggml_tensor * big = l.at(wsp_ggml_new_tensor_2d(l.ctx, WSP_GGML_TYPE_F32, 2, race::MAX_PIECES + 1), 0x100000);
    wsp_ggml_tensor * col = wsp_ggml_view_2d(l.ctx, big, 1, big->ne[1], big->nb[1], 0);
    col->data             = big->data;
    race::tensor_ranges(col, r);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].end - r[0].begin, (size_t) race::MAX_PIECES * 8 + 4);
}

} // namespace
} // namespace wsp::test
