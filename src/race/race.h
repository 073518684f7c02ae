#pragma once

// Note [happens-before checker]: emulated devices (sim devices, the host target) report two
// accesses to the same device bytes, at least one a write, that nothing orders. Each agent (a
// stream, or a host thread) carries a vector clock. A command queued on a stream inherits the
// clock of the host thread that queued it; an event record captures the stream's clock when the
// stream reaches it, and a wait on that record (by a stream, or the host) joins it; a host
// synchronize with a stream joins the stream's clock. Every command's byte accesses are kept in
// a shadow map of device memory, per range the last write and the reads since (FastTrack); an
// access that the recorded one does not happen before is a race, whatever the timing of the run
// (the order of real execution does not matter, only what the program orders). Fresh or freed
// memory forgets its history. One process-wide checker serves every kind of emulated device, so
// orderings through the host between devices of different kinds count too.

#include "ggml.h"

#include "../core/log.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace wsp::race {

using Clock = uint64_t;

class WSP_INTERNAL_API VectorClock {
public:
    Clock get(int agent) const { return (size_t) agent < c_.size() ? c_[(size_t) agent] : 0; }
    void  set(int agent, Clock v);
    void  join(const VectorClock & other);

private:
    std::vector<Clock> c_;
};

// [begin, end) of device addresses
struct Range {
    uintptr_t begin, end;
};

// the bytes a tensor's elements occupy, appended to out: one range when they are contiguous, a
// range per row (or element) of a strided layout; beyond MAX_PIECES pieces, their bounding range
// (which can only report more races, never fewer)
constexpr int64_t     MAX_PIECES = 1 << 16;
WSP_INTERNAL_API void tensor_ranges(const wsp_ggml_tensor * t, std::vector<Range> & out);
// sorts ranges and merges those that overlap or touch
WSP_INTERNAL_API void normalize(std::vector<Range> & ranges);

// What made an access ("SIM1 stream 3: kernel MUL_MAT 'ffn_up' (f32 [..])"), for messages: the
// text is made only when a race is reported, so labelling every access costs next to nothing.
class WSP_INTERNAL_API Label {
public:
    virtual ~Label()                 = default;
    virtual std::string text() const = 0;
};
using What = std::shared_ptr<const Label>;

// a label of fixed text
WSP_INTERNAL_API What text_label(std::string text);

class WSP_INTERNAL_API Checker {
public:
    Checker();
    Checker(const Checker &)             = delete;
    Checker & operator=(const Checker &) = delete;

    // a new stream agent
    int new_stream_agent();

    // the calling thread's agent: host threads get one on first use
    int host_agent();

    // Ordering edges. release: the calling host thread hands its clock to a command it queues
    // (then ticks, so its later work is not ordered before the command).
    VectorClock release_host();
    // a stream starts a command queued with `queued`: joins it and ticks
    void begin_command(int stream, const VectorClock & queued);
    // the current clock of an agent (an event record, a synchronize)
    VectorClock clock_of(int agent);
    // an agent joins a clock (a stream waiting on an event, the host synchronizing)
    void acquire(int agent, const VectorClock & clock);

    // Accesses by `agent` at its current clock. Returns false, and the message in *conflict,
    // when an access races with a recorded one; every race is counted and logged.
    bool read(int agent, const Range * ranges, size_t n, const What & what, std::string * conflict);
    bool write(int agent, const Range * ranges, size_t n, const What & what, std::string * conflict);
    bool read(int agent, const std::vector<Range> & r, const What & what, std::string * conflict) {
        return read(agent, r.data(), r.size(), what, conflict);
    }
    bool write(int agent, const std::vector<Range> & r, const What & what, std::string * conflict) {
        return write(agent, r.data(), r.size(), what, conflict);
    }

    // memory that is (re)allocated or freed: its history ends
    void forget(Range r);

    // a test that observes work in flight on purpose (a host read of bytes a queued command
    // will write) turns access checks off around it; clocks are still kept
    void set_enabled(bool on) { enabled_.store(on); }
    bool enabled() const { return enabled_.load(); }

    size_t races() const;

private:
    struct Access {
        int   agent = -1;
        Clock clock = 0;
        What  what;
    };
    struct Segment {
        uintptr_t           end;
        Access              write;
        std::vector<Access> reads;
    };

    bool access(int agent, const Range * ranges, size_t n, bool is_write, const What & what, std::string * conflict);
    bool check_and_update(int agent, const VectorClock & vc, Range r, bool is_write, const What & what,
                          std::string & message);
    void split_at(uintptr_t p);

    VectorClock & clock_locked(int agent);

    const uint64_t               id_; // tells host threads' agents of different checkers apart
    mutable std::mutex           mutex_;
    std::vector<VectorClock>     clocks_; // by agent
    std::map<uintptr_t, Segment> shadow_; // begin -> segment; segments never overlap
    size_t                       races_ = 0;
    std::atomic<bool>            enabled_{ true };
};

// the process-wide checker
WSP_INTERNAL_API Checker & checker();

} // namespace wsp::race
