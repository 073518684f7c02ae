// Sim streams and events (see stream.h).

#include "stream.h"

#include "../core/log.h"

#include <chrono>

namespace wsp::sim {

Stream::Stream(std::string name, int index, const Delays & delays)
    : name_(std::move(name)), index_(index), agent_(race::checker().new_stream_agent()), delays_(delays),
      jitter_(delays.seed.load(), index), jitter_seed_(delays.seed.load()), worker_([this] { run(); }) {}

Stream::~Stream() {
    {
        std::unique_lock<std::mutex> lock(mutex_);
        idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
        stop_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
}

void Stream::enqueue(Command cmd) {
    Queued q{ std::move(cmd), race::checker().release_host() };
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(q));
        pending_.fetch_add(1);
    }
    work_cv_.notify_one();
}

bool Stream::run_if_idle(const std::function<void()> & fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!queue_.empty() || busy_) {
        return false;
    }
    // as a command queued now that starts at once: the queuing thread's clock, then a tick
    race::checker().begin_command(agent_, race::checker().release_host());
    fn();
    return true;
}

wsp_ggml_status Stream::synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
    race::checker().acquire(race::checker().host_agent(), race::checker().clock_of(agent_));
    if (error_.empty()) {
        return WSP_GGML_STATUS_SUCCESS;
    }
    WSP_LOG_ERROR("%s: %s\n", name_.c_str(), error_.c_str());
    error_.clear();
    return WSP_GGML_STATUS_FAILED;
}

// Note [seeded delays]: a fixed delay makes a stream lag behind the host; a random one, drawn
// from the device's seed and the stream's index, reorders the streams against each other
// differently for every seed, and the same way again for the same seed.
void Stream::sleep_before_command() {
    int       us     = delays_.fixed_us.load(std::memory_order_relaxed);
    const int jitter = delays_.jitter_us.load(std::memory_order_relaxed);
    if (jitter > 0) {
        const uint32_t seed = delays_.seed.load(std::memory_order_relaxed);
        if (seed != jitter_seed_) {
            jitter_seed_ = seed;
            jitter_      = DelaySequence(seed, index_);
        }
        us += jitter_.next(jitter);
    }
    if (us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
}

void Stream::run() {
    for (;;) {
        Queued q;
        spin_until([&] { return !idle(); }); // more work is often on its way (Note [spin before sleep])
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) {
                return; // stop requested and nothing left
            }
            q = std::move(queue_.front());
            queue_.pop_front();
            busy_ = true;
        }
        sleep_before_command();
        race::checker().begin_command(agent_, q.clock);
        std::string err;
        const bool  ok = q.cmd(err);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!ok && error_.empty()) {
                error_ = err; // the first failure since the last synchronize is the one reported
            }
            busy_ = false;
            pending_.fetch_sub(1);
            if (queue_.empty()) {
                idle_cv_.notify_all();
            }
        }
    }
}

void Event::record(Stream & stream) {
    auto slot = std::make_shared<Slot>();
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        state_->latest = slot;
    }
    auto      state    = state_;
    const int agent    = stream.agent();
    auto      complete = [state, slot, agent] {
        race::VectorClock clock = race::checker().clock_of(agent);
        {
            std::lock_guard<std::mutex> lock(state->mutex);
            slot->clock = std::move(clock);
            slot->done  = true;
        }
        state->cv.notify_all();
    };
    if (!stream.run_if_idle(complete)) {
        stream.enqueue([complete](std::string &) {
            complete();
            return true;
        });
    }
}

void Event::wait(Stream & stream) {
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        slot = state_->latest;
    }
    if (slot == nullptr) {
        return; // never recorded: nothing to wait for
    }
    auto      state = state_;
    const int agent = stream.agent();
    // already complete and the stream idle: the stream's clock joins now
    const bool joined = stream.run_if_idle([&] {
        race::VectorClock clock;
        {
            std::lock_guard<std::mutex> lock(state->mutex);
            if (!slot->done.load()) {
                return;
            }
            clock = slot->clock;
        }
        race::checker().acquire(agent, clock);
        slot = nullptr;
    });
    if (joined && slot == nullptr) {
        return;
    }
    stream.enqueue([state, slot, agent](std::string &) {
        spin_until([&] { return slot->done.load(); }); // Note [spin before sleep]
        race::VectorClock clock;
        {
            std::unique_lock<std::mutex> lock(state->mutex);
            state->cv.wait(lock, [&] { return slot->done.load(); });
            clock = slot->clock;
        }
        race::checker().acquire(agent, clock);
        return true;
    });
}

void Event::synchronize() {
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        slot = state_->latest;
    }
    if (slot == nullptr) {
        return;
    }
    race::VectorClock clock;
    {
        std::unique_lock<std::mutex> lock(state_->mutex);
        state_->cv.wait(lock, [&] { return slot->done.load(); });
        clock = slot->clock;
    }
    race::checker().acquire(race::checker().host_agent(), clock);
}

} // namespace wsp::sim
