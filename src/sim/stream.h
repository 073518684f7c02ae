#pragma once

// A sim stream: a worker thread running a FIFO of commands, like a GPU stream. Commands run in
// order, each after the device's optional delay; a failing command records its error, later
// commands still run (so events complete), and synchronize() reports the failure once.
// Events order streams and the host: a wait sees the last record issued before it.

#include "ggml.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace wsp::sim {

class Stream {
public:
    // returns false and sets the message on failure
    using Command = std::function<bool(std::string & error)>;

    Stream(std::string name, const std::atomic<int> & delay_us);
    ~Stream();

    Stream(const Stream &)             = delete;
    Stream & operator=(const Stream &) = delete;

    void            enqueue(Command cmd);
    wsp_ggml_status synchronize();

    const std::string & name() const { return name_; }

private:
    void run();

    std::string              name_;
    const std::atomic<int> & delay_us_;
    std::mutex               mutex_;
    std::condition_variable  work_cv_;
    std::condition_variable  idle_cv_;
    std::deque<Command>      queue_;
    bool                     busy_ = false;
    bool                     stop_ = false;
    std::string              error_;
    std::thread              worker_;
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
    std::shared_ptr<std::mutex>              mutex_     = std::make_shared<std::mutex>();
    std::shared_ptr<std::condition_variable> cv_        = std::make_shared<std::condition_variable>();
    std::shared_ptr<uint64_t>                completed_ = std::make_shared<uint64_t>(0);
    uint64_t                                 recorded_  = 0; // guarded by *mutex_
};

} // namespace wsp::sim
