#pragma once

// Persistent worker threads for graph compute. The calling thread is task 0 and drives the
// graph; run() hands one node to nth tasks and returns when all are done. Idle workers spin
// briefly (poll level) then sleep, so many pools on few cores do not burn the CPU.

#include "kernel.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

struct wsp_ggml_threadpool; // public handle (ggml-cpu.h); wraps a wsp::cpu::ThreadPool

namespace wsp::cpu {

// per-run shared state: barrier and dynamic chunk counter
class ThreadGroup {
public:
    void start(int nth) {
        nth_ = nth;
        count_.store(0, std::memory_order_relaxed);
        chunk_.store(0, std::memory_order_relaxed);
        claimed_.store(0, std::memory_order_relaxed);
    }

    void barrier();

    int64_t next_chunk() { return chunk_.fetch_add(1, std::memory_order_relaxed); }

    // Note [guided claims]: the next range [begin, end) of n items, or false when all are taken.
    // A claim takes half of what remains per task (rem / 2 nth), at least min_size items, rounded
    // up to a multiple of min_size: a task streams through few long contiguous ranges (the
    // hardware prefetcher follows them and claims rarely touch the shared line) while the
    // ranges shrink toward the end, so a late task still finds work and no task is left with a
    // long tail. One claimed phase per node: the counter is reset only by start().
    bool claim(int64_t n, int64_t min_size, int64_t & begin, int64_t & end);

private:
    int nth_ = 1;
    alignas(64) std::atomic<int> count_{ 0 };
    alignas(64) std::atomic<int> phase_{ 0 };
    alignas(64) std::atomic<int64_t> chunk_{ 0 };
    alignas(64) std::atomic<int64_t> claimed_{ 0 };
};

class ThreadPool {
public:
    using TaskFn = void (*)(void * ctx, int ith, int nth);

    ThreadPool(int n_threads, int poll, bool paused);
    ~ThreadPool();

    ThreadPool(const ThreadPool &)             = delete;
    ThreadPool & operator=(const ThreadPool &) = delete;

    int n_threads() const { return n_threads_; }

    // run fn(ctx, ith, nth) for ith in [0, nth) with nth <= n_threads; ith 0 on the caller
    void run(int nth, TaskFn fn, void * ctx);

    void pause();
    void resume();

    ThreadGroup & group() { return group_; }

private:
    void worker_main(int index);
    void wake_all();

    int                      n_threads_;
    int                      spin_iters_;
    std::vector<std::thread> workers_;
    ThreadGroup              group_;

    // job published to workers, with generation_, under job_mutex_ (Note [job snapshot])
    std::mutex job_mutex_;
    TaskFn     job_fn_  = nullptr;
    void *     job_ctx_ = nullptr;
    int        job_nth_ = 0;

    alignas(64) std::atomic<uint64_t> generation_{ 0 };
    alignas(64) std::atomic<int> done_{ 0 };

    std::mutex              mutex_;
    std::condition_variable cv_;
    std::atomic<int>        sleepers_{ 0 };
    std::atomic<bool>       stop_{ false };
    std::atomic<bool>       paused_{ false };
    std::mutex              run_mutex_; // one run at a time per pool
};

} // namespace wsp::cpu

struct wsp_ggml_threadpool {
    wsp::cpu::ThreadPool * pool;
};
