#pragma once

// A sim stream: a worker thread running a FIFO of commands, like a GPU stream. Commands run in
// order, each after the device's fixed delay plus a seeded random one; a failing command records
// its error, later commands still run (so events complete), and synchronize() reports the
// failure once. Events order streams and the host: a wait sees the last record issued before it.
// Every stream is an agent of the happens-before checker (Note [happens-before checker]): a
// command inherits the clock of the host thread that queued it, records, waits and synchronize
// carry clocks as they order work.

#include "ggml.h"

#include "../core/log.h"
#include "../race/race.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>

namespace wsp::sim {

// Note [spin before sleep]: a GPU stream waiting on an event, or for its next command, sees it
// within microseconds; a thread asleep on a condition variable wakes tens of microseconds later,
// more on a loaded machine, which would make the sims' overlap look worse than a device's. So a
// stream's worker first polls (yielding the core) for up to SPIN_US, then sleeps. The host does
// not poll: its core is the one the streams compute on.
constexpr int SPIN_US = 200;

// polls pred for up to SPIN_US, yielding; true if it held
template <typename Pred>
bool spin_until(Pred pred) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(SPIN_US);
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= until) {
            return false;
        }
        std::this_thread::yield();
    }
    return true;
}

// the per-command delays of a device's streams
struct Delays {
    std::atomic<int>      fixed_us{ 0 };  // before every command
    std::atomic<int>      jitter_us{ 0 }; // plus a random 0..jitter_us, from the seed
    std::atomic<uint32_t> seed{ 0 };
};

// the random delays before the commands of one stream: a sequence fixed by the device's seed
// and the stream's index (Note [seeded delays])
class WSP_INTERNAL_API DelaySequence {
public:
    DelaySequence(uint32_t seed, int stream_index) : rng_(seed * 2654435761u + (uint32_t) stream_index * 40503u + 1u) {}
    int next(int max_us) { return max_us > 0 ? (int) (rng_() % (uint32_t) (max_us + 1)) : 0; }

private:
    std::mt19937 rng_;
};

class Stream {
public:
    // returns false and sets the message on failure
    using Command = std::function<bool(std::string & error)>;

    // `index` tells the streams of one device apart in names and random delays
    Stream(std::string name, int index, const Delays & delays);
    ~Stream();

    Stream(const Stream &)             = delete;
    Stream & operator=(const Stream &) = delete;

    void            enqueue(Command cmd);
    wsp_ggml_status synchronize();

    // runs fn on the calling thread if the stream has nothing queued or running, and returns true;
    // the stream starts nothing meanwhile (event records and waits complete at once on an idle
    // stream, as on a GPU, without a round trip through the worker)
    bool run_if_idle(const std::function<void()> & fn);

    const std::string & name() const { return name_; }
    int                 agent() const { return agent_; } // in race::checker()

private:
    struct Queued {
        Command           cmd;
        race::VectorClock clock; // the queuing host thread's
    };

    void run();
    void sleep_before_command();
    bool idle() const { return pending_.load() == 0; }

    std::string             name_;
    int                     index_;
    int                     agent_;
    const Delays &          delays_;
    DelaySequence           jitter_{ 0, 0 };
    uint32_t                jitter_seed_ = 0;
    std::mutex              mutex_;
    std::condition_variable work_cv_;
    std::condition_variable idle_cv_;
    std::deque<Queued>      queue_;
    bool                    busy_ = false;
    std::atomic<int>        pending_{ 0 }; // queued or running, for polling without the lock
    bool                    stop_ = false;
    std::string             error_;
    std::thread             worker_;
};

class Event {
public:
    // complete this record when the stream reaches it
    void record(Stream & stream);
    // the stream waits (in order) for the last record issued so far
    void wait(Stream & stream);
    // the host waits for the last record issued so far
    void synchronize();

private:
    // one record: done when the stream reached it, with the stream's clock then
    struct Slot {
        std::atomic<bool> done{ false }; // set under the state's mutex, polled without it
        race::VectorClock clock;
    };
    struct State {
        std::mutex              mutex;
        std::condition_variable cv;
        std::shared_ptr<Slot>   latest; // the last record issued; NULL before the first
    };
    std::shared_ptr<State> state_ = std::make_shared<State>();
};

} // namespace wsp::sim
