// Sim streams and events (see stream.h).

#include "stream.h"

#include "../core/log.h"

#include <chrono>

namespace wsp::sim {

Stream::Stream(std::string name, const std::atomic<int> & delay_us)
    : name_(std::move(name)), delay_us_(delay_us), worker_([this] { run(); }) {}

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
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(cmd));
    }
    work_cv_.notify_one();
}

wsp_ggml_status Stream::synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
    if (error_.empty()) {
        return WSP_GGML_STATUS_SUCCESS;
    }
    WSP_LOG_ERROR("%s: %s\n", name_.c_str(), error_.c_str());
    error_.clear();
    return WSP_GGML_STATUS_FAILED;
}

void Stream::run() {
    for (;;) {
        Command cmd;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) {
                return; // stop requested and nothing left
            }
            cmd = std::move(queue_.front());
            queue_.pop_front();
            busy_ = true;
        }
        const int delay = delay_us_.load(std::memory_order_relaxed);
        if (delay > 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(delay));
        }
        std::string err;
        const bool  ok = cmd(err);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!ok && error_.empty()) {
                error_ = err; // the first failure since the last synchronize is the one reported
            }
            busy_ = false;
            if (queue_.empty()) {
                idle_cv_.notify_all();
            }
        }
    }
}

void Event::record(Stream & stream) {
    uint64_t target;
    {
        std::lock_guard<std::mutex> lock(*mutex_);
        target = ++recorded_;
    }
    auto m    = mutex_;
    auto cv   = cv_;
    auto done = completed_;
    stream.enqueue([m, cv, done, target](std::string &) {
        {
            std::lock_guard<std::mutex> lock(*m);
            *done = std::max(*done, target);
        }
        cv->notify_all();
        return true;
    });
}

void Event::wait(Stream & stream) {
    uint64_t target;
    {
        std::lock_guard<std::mutex> lock(*mutex_);
        target = recorded_;
    }
    auto m    = mutex_;
    auto cv   = cv_;
    auto done = completed_;
    stream.enqueue([m, cv, done, target](std::string &) {
        std::unique_lock<std::mutex> lock(*m);
        cv->wait(lock, [&] { return *done >= target; });
        return true;
    });
}

void Event::synchronize() {
    std::unique_lock<std::mutex> lock(*mutex_);
    const uint64_t               target = recorded_;
    cv_->wait(lock, [&] { return *completed_ >= target; });
}

} // namespace wsp::sim
