// Streams and events: each stream is a worker thread running its commands in order; events
// capture a stream's position and order other streams and the host after it. Every stream is an
// agent of the happens-before checker (Note [happens-before checker] in src/race/race.h): a
// command carries the clock of the host thread that queued it, a record the stream's clock when
// reached, and waits and synchronizes join them.

#include "runtime_impl.h"

#include <chrono>

namespace wsp::host_target {

namespace {

template <typename Pred>
void spin_for(Pred pred) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(SPIN_US);
    while (!pred() && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
    }
}

CUevent_st * event_of(cudaEvent_t event) {
    std::lock_guard<std::mutex> lock(rt().mutex);
    return rt().events.count(event) != 0 ? event : nullptr;
}

std::shared_ptr<Capture> capture_of(CUstream_st & s) {
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.capture;
}

// Work on the legacy stream would wait for the device's blocking streams; while one of them
// captures, that dependency cannot exist (cudaErrorStreamCaptureImplicit, the capture is lost).
cudaError_t check_legacy_implicit(const CUstream_st & legacy) {
    for (const auto & s : streams_of(legacy.device)) {
        if (s.get() == &legacy || (s->flags & cudaStreamNonBlocking) != 0) {
            continue;
        }
        if (auto c = capture_of(*s); c != nullptr) {
            invalidate(c, "the legacy stream was used");
            return cudaErrorStreamCaptureImplicit;
        }
    }
    return cudaSuccess;
}

} // namespace

void Slot::complete(race::VectorClock c) {
    {
        std::lock_guard<std::mutex> lock(mutex);
        clock = std::move(c);
        done.store(true);
    }
    cv.notify_all();
}

race::VectorClock Slot::wait(bool spin) {
    if (spin) {
        spin_for([&] { return done.load(); });
    }
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return done.load(); });
    return clock;
}

bool report_accesses(int agent, const std::vector<race::Range> & reads, const std::vector<race::Range> & writes,
                     const race::What & what, std::string & message) {
    if (reads.empty() && writes.empty()) {
        return true;
    }
    std::string conflict;
    const bool  reads_ok  = race::checker().read(agent, reads, what, &conflict);
    const bool  writes_ok = race::checker().write(agent, writes, what, &conflict);
    if (!reads_ok || !writes_ok) {
        message = "race: " + conflict;
        return false;
    }
    return true;
}

} // namespace wsp::host_target

using namespace wsp::host_target;
namespace race = wsp::race;

CUstream_st::CUstream_st(int device_, unsigned flags_, std::string name_)
    : device(device_), flags(flags_), agent(wsp::race::checker().new_stream_agent()), name(std::move(name_)),
      worker_([this] { run(); }) {}

CUstream_st::~CUstream_st() {
    {
        std::unique_lock<std::mutex> lock(mutex);
        idle_cv_.wait(lock, [&] { return pending_.load() == 0; });
        stop_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
}

cudaError_t CUstream_st::submit(Command cmd) {
    if (flags == 0 && is_legacy(this)) {
        if (const cudaError_t e = check_legacy_implicit(*this); e != cudaSuccess) {
            return e;
        }
    }
    std::unique_lock<std::mutex> lock(mutex);
    if (capture != nullptr) {
        std::lock_guard<std::mutex> capture_lock(capture->mutex);
        if (capture->invalidated) {
            return cudaErrorStreamCaptureInvalidated;
        }
        capture->nodes.push_back(std::move(cmd));
        return cudaSuccess;
    }
    queue_.push_back(Queued{ std::move(cmd), wsp::race::checker().release_host() });
    pending_.fetch_add(1);
    lock.unlock();
    work_cv_.notify_one();
    return cudaSuccess;
}

cudaError_t CUstream_st::wait_idle(bool report) {
    std::unique_lock<std::mutex> lock(mutex);
    idle_cv_.wait(lock, [&] { return pending_.load() == 0; });
    wsp::race::Checker & c = wsp::race::checker();
    c.acquire(c.host_agent(), c.clock_of(agent));
    if (!report) {
        return cudaSuccess;
    }
    const cudaError_t e = error_;
    error_              = cudaSuccess;
    return e;
}

bool CUstream_st::idle() {
    return pending_.load() == 0;
}

cudaError_t CUstream_st::take_error() {
    std::lock_guard<std::mutex> lock(mutex);
    const cudaError_t           e = error_;
    error_                        = cudaSuccess;
    return e;
}

void CUstream_st::run() {
    for (;;) {
        spin_for([&] { return pending_.load() > 0; }); // Note [spin before sleep]
        Queued q;
        {
            std::unique_lock<std::mutex> lock(mutex);
            work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) {
                return;
            }
            q = std::move(queue_.front());
            queue_.pop_front();
        }
        wsp::race::checker().begin_command(agent, q.clock);
        std::string       message;
        const cudaError_t e = q.cmd.run(Exec{ device, agent }, message);
        if (e != cudaSuccess) {
            WSP_LOG_ERROR("host target: %s: %s failed: %s (%s)\n", name.c_str(), q.cmd.what.c_str(), message.c_str(),
                          cudaGetErrorName(e));
        }
        std::function<void()> settled = std::move(q.cmd.settled);
        q = Queued{}; // what the command holds (graph memory, staging) goes before the stream idles
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (e != cudaSuccess && error_ == cudaSuccess) {
                error_ = e; // the first failure since the last synchronize is the one reported
            }
            if (pending_.fetch_sub(1) == 1) {
                idle_cv_.notify_all();
            }
        }
        if (settled) {
            settled();
        }
    }
}

namespace wsp::host_target {

int stream_device(cudaStream_t stream) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    return s != nullptr ? s->device : -1;
}

cudaError_t enqueue(cudaStream_t stream, std::string what, Work work, std::vector<race::Range> reads,
                    std::vector<race::Range> writes) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    race::normalize(reads);
    race::normalize(writes);
    race::What label = race::text_label(s->name + ": " + what);
    Run        run   = [work = std::move(work), reads = std::move(reads), writes = std::move(writes),
               label](const Exec & exec, std::string & message) {
        const bool        ordered = report_accesses(exec.agent, reads, writes, label, message);
        std::string       work_message;
        const cudaError_t e = work(work_message);
        if (e != cudaSuccess) {
            message = work_message;
            return e;
        }
        return ordered ? cudaSuccess : cudaErrorLaunchFailure;
    };
    return set_last(s->submit({ std::move(what), std::move(run) }));
}

cudaError_t note_accesses(cudaStream_t stream, std::vector<race::Range> reads, std::vector<race::Range> writes,
                          race::What what) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    // ownership per range as named (each within one tensor's allocation), before normalize merges
    // ranges that touch across allocations
    for (const std::vector<race::Range> * ranges : { &reads, &writes }) {
        for (const race::Range & r : *ranges) {
            std::string message;
            if (check_access(s->device, (const void *) r.begin, r.end - r.begin, &message) != cudaSuccess) {
                return fail(cudaErrorIllegalAddress, "%s on %s: %s", what ? what->text().c_str() : "kernels",
                            s->name.c_str(), message.c_str());
            }
        }
    }
    race::normalize(reads);
    race::normalize(writes);
    Run run = [reads = std::move(reads), writes = std::move(writes), what](const Exec & exec, std::string & message) {
        return report_accesses(exec.agent, reads, writes, what, message) ? cudaSuccess : cudaErrorLaunchFailure;
    };
    return set_last(s->submit({ "accesses of the next kernels", std::move(run) }));
}

} // namespace wsp::host_target

cudaError_t cudaStreamCreate(cudaStream_t * stream) {
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t * stream, unsigned int flags) {
    if (stream == nullptr || (flags & ~(unsigned) cudaStreamNonBlocking) != 0) {
        return set_last(cudaErrorInvalidValue);
    }
    Runtime &               r      = rt();
    const int               device = current_device();
    static std::atomic<int> next{ 0 };
    auto                    s = std::make_shared<CUstream_st>(
        device, flags, "device " + std::to_string(device) + " stream " + std::to_string(next.fetch_add(1)));
    std::lock_guard<std::mutex> lock(r.mutex);
    r.streams.emplace(s.get(), s);
    *stream = s.get();
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    Runtime &                    r = rt();
    std::shared_ptr<CUstream_st> s;
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        auto                        it = r.streams.find(stream);
        if (it == r.streams.end()) {
            return set_last(cudaErrorInvalidResourceHandle);
        }
        s = std::move(it->second);
        r.streams.erase(it);
    }
    if (auto c = capture_of(*s); c != nullptr) {
        invalidate(c, "a capturing stream was destroyed");
    }
    // CUDA returns at once and finishes the work; the last owner's destructor does that here
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (auto c = capture_of(*s); c != nullptr) {
        invalidate(c, "cudaStreamSynchronize on the capturing stream");
        return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize(%s) while it captures", s->name.c_str());
    }
    if (const cudaError_t e = check_capture_safe("cudaStreamSynchronize"); e != cudaSuccess) {
        return e;
    }
    return set_last(s->wait_idle(true));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (auto c = capture_of(*s); c != nullptr) {
        invalidate(c, "cudaStreamQuery on the capturing stream");
        return fail(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery(%s) while it captures", s->name.c_str());
    }
    // a command whose effect the host already saw (an event it synchronized with) may still be
    // finishing on the worker: give it the time a spinning worker takes to pick up work
    spin_for([&] { return s->idle(); });
    if (!s->idle()) {
        return cudaErrorNotReady; // not an error: the last error stays
    }
    return set_last(s->wait_idle(true));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void * user_data) {
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    if (fn == nullptr) {
        return set_last(cudaErrorInvalidValue);
    }
    return set_last(s->submit({ "host function", [fn, user_data](const Exec &, std::string &) {
                                   fn(user_data);
                                   return cudaSuccess;
                               } }));
}

cudaError_t cudaEventCreate(cudaEvent_t * event) {
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t * event, unsigned int flags) {
    if (event == nullptr || (flags & ~3u) != 0) {
        return set_last(cudaErrorInvalidValue);
    }
    Runtime & r = rt();
    auto      e = std::unique_ptr<CUevent_st>(new CUevent_st{ current_device(), flags, {}, {}, {}, false });
    std::lock_guard<std::mutex> lock(r.mutex);
    *event = e.get();
    r.events.emplace(e.get(), std::move(e));
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    Runtime &                   r = rt();
    std::lock_guard<std::mutex> lock(r.mutex);
    // records in flight hold their slots, not the event
    return r.events.erase(event) != 0 ? cudaSuccess : set_last(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    CUevent_st * e   = event_of(event);
    cudaError_t  err = cudaSuccess;
    auto         s   = resolve(stream, &err);
    if (e == nullptr || s == nullptr) {
        return set_last(e == nullptr ? cudaErrorInvalidResourceHandle : err);
    }
    if (auto c = capture_of(*s); c != nullptr) {
        // a record in a capture only marks a point of it (Note [capture])
        std::lock_guard<std::mutex> lock(e->mutex);
        e->captured   = c;
        e->in_capture = true;
        e->latest     = nullptr;
        return cudaSuccess;
    }
    auto      slot  = std::make_shared<Slot>();
    auto      clock = std::make_shared<race::VectorClock>(); // the stream's when it reached the record
    const int agent = s->agent;
    if (const cudaError_t r = s->submit({ "event record",
                                          [clock, agent](const Exec &, std::string &) {
                                              *clock = race::checker().clock_of(agent);
                                              return cudaSuccess;
                                          },
                                          [slot, clock] { slot->complete(*clock); } });
        r != cudaSuccess) {
        return set_last(r);
    }
    std::lock_guard<std::mutex> lock(e->mutex);
    e->latest     = slot;
    e->in_capture = false;
    e->captured.reset();
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    CUevent_st * e   = event_of(event);
    cudaError_t  err = cudaSuccess;
    auto         s   = resolve(stream, &err);
    if (e == nullptr || s == nullptr) {
        return set_last(e == nullptr ? cudaErrorInvalidResourceHandle : err);
    }
    if (flags != 0) {
        return set_last(cudaErrorInvalidValue);
    }
    std::shared_ptr<Slot>    slot;
    std::shared_ptr<Capture> recorded_in;
    bool                     in_capture = false;
    {
        std::lock_guard<std::mutex> lock(e->mutex);
        slot        = e->latest;
        recorded_in = e->captured.lock();
        in_capture  = e->in_capture;
    }
    auto capture = capture_of(*s);
    if (in_capture) {
        if (recorded_in == nullptr) {
            return fail(cudaErrorCapturedEvent, "cudaStreamWaitEvent: the event was recorded in a capture that ended");
        }
        if (capture == recorded_in) {
            return cudaSuccess; // the graph's nodes run in capture order
        }
        if (capture != nullptr) {
            invalidate(capture, "a wait on another capture's event");
            return fail(cudaErrorStreamCaptureMerge, "cudaStreamWaitEvent: %s would merge two captures",
                        s->name.c_str());
        }
        // the stream joins the capture (Note [capture])
        std::lock_guard<std::mutex> lock(s->mutex);
        std::lock_guard<std::mutex> capture_lock(recorded_in->mutex);
        if (recorded_in->invalidated) {
            return set_last(cudaErrorStreamCaptureInvalidated);
        }
        s->capture = recorded_in;
        recorded_in->joined.push_back(s);
        return cudaSuccess;
    }
    if (slot == nullptr) {
        return cudaSuccess; // never recorded: nothing to wait for, as in CUDA
    }
    if (capture != nullptr) {
        invalidate(capture, "a wait on an event recorded outside the capture");
        return fail(cudaErrorStreamCaptureIsolation,
                    "cudaStreamWaitEvent: %s captures and the event was recorded outside", s->name.c_str());
    }
    return set_last(s->submit({ "event wait", [slot](const Exec & exec, std::string &) {
                                   race::checker().acquire(exec.agent, slot->wait(true));
                                   return cudaSuccess;
                               } }));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    CUevent_st * e = event_of(event);
    if (e == nullptr) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    if (const cudaError_t r = check_capture_safe("cudaEventSynchronize"); r != cudaSuccess) {
        return r;
    }
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard<std::mutex> lock(e->mutex);
        if (e->in_capture) {
            return set_last(cudaErrorCapturedEvent);
        }
        slot = e->latest;
    }
    if (slot != nullptr) {
        race::checker().acquire(race::checker().host_agent(), slot->wait(false));
    }
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    CUevent_st * e = event_of(event);
    if (e == nullptr) {
        return set_last(cudaErrorInvalidResourceHandle);
    }
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard<std::mutex> lock(e->mutex);
        if (e->in_capture) {
            return set_last(cudaErrorCapturedEvent);
        }
        slot = e->latest;
    }
    if (slot == nullptr) {
        return cudaSuccess;
    }
    if (!slot->done.load()) {
        return cudaErrorNotReady; // not an error: the last error stays
    }
    race::checker().acquire(race::checker().host_agent(), slot->wait(false));
    return cudaSuccess;
}
