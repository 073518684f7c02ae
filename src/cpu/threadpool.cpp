// Thread pool (see threadpool.h).

#include "threadpool.h"

#if defined(__x86_64__) || defined(_M_X64)
#    include <immintrin.h>
#    define WSP_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#    define WSP_CPU_RELAX() __asm__ __volatile__("yield")
#else
#    define WSP_CPU_RELAX() ((void) 0)
#endif

namespace wsp::cpu {

void ThreadGroup::barrier() {
    if (nth_ == 1) {
        return;
    }
    const int phase = phase_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) == nth_ - 1) {
        count_.store(0, std::memory_order_relaxed);
        phase_.fetch_add(1, std::memory_order_release);
        return;
    }
    int spins = 0;
    while (phase_.load(std::memory_order_acquire) == phase) {
        if (++spins < 4096) {
            WSP_CPU_RELAX();
        } else {
            std::this_thread::yield(); // more tasks than free cores: let the others reach the barrier
        }
    }
}

bool ThreadGroup::claim(int64_t n, int64_t min_size, int64_t & begin, int64_t & end) {
    min_size    = min_size < 1 ? 1 : min_size;
    int64_t cur = claimed_.load(std::memory_order_relaxed);
    for (;;) {
        if (cur >= n) {
            return false;
        }
        int64_t size       = (n - cur) / (2 * (int64_t) nth_);
        size               = (size + min_size - 1) / min_size * min_size;
        size               = size < min_size ? min_size : size;
        const int64_t next = cur + size < n ? cur + size : n;
        if (claimed_.compare_exchange_weak(cur, next, std::memory_order_relaxed)) {
            begin = cur;
            end   = next;
            return true;
        }
    }
}

void ComputeParams::barrier() const {
    group->barrier();
}

int64_t ComputeParams::next_chunk() const {
    return group->next_chunk();
}

bool ComputeParams::claim(int64_t n, int64_t min_size, int64_t & begin, int64_t & end) const {
    return group->claim(n, min_size, begin, end);
}

ThreadPool::ThreadPool(int n_threads, int poll, bool paused) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    // poll 0..100 maps to 0..~200k pause iterations of spinning before a worker sleeps
    spin_iters_ = (poll < 0 ? 0 : poll > 100 ? 100 : poll) * 2000;
    paused_.store(paused);
    workers_.reserve((size_t) n_threads_ - 1);
    for (int i = 1; i < n_threads_; ++i) {
        workers_.emplace_back([this, i] { worker_main(i); });
    }
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_release);
    paused_.store(false);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    wake_all();
    for (std::thread & t : workers_) {
        t.join();
    }
}

void ThreadPool::wake_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
}

void ThreadPool::pause() {
    paused_.store(true, std::memory_order_release);
}

void ThreadPool::resume() {
    paused_.store(false, std::memory_order_release);
    wake_all();
}

void ThreadPool::run(int nth, TaskFn fn, void * ctx) {
    if (nth > n_threads_) {
        nth = n_threads_;
    }
    if (nth <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    if (paused_.load(std::memory_order_acquire)) {
        resume(); // a compute on a paused pool resumes it, as a caller would expect
    }
    group_.start(nth);
    {
        std::lock_guard<std::mutex> job_lock(job_mutex_);
        job_fn_  = fn;
        job_ctx_ = ctx;
        job_nth_ = nth;
        done_.store(0, std::memory_order_relaxed);
        // seq_cst pairs with the worker's sleepers_ increment and generation_ check (Note [sleep handshake])
        generation_.fetch_add(1);
    }
    if (sleepers_.load() > 0) {
        wake_all();
    }

    fn(ctx, 0, nth);

    int spins = 0;
    while (done_.load(std::memory_order_acquire) != nth - 1) {
        if (++spins < 4096) {
            WSP_CPU_RELAX();
        } else {
            std::this_thread::yield();
        }
    }
}

void ThreadPool::worker_main(int index) {
    // generation 0 is the state at construction: a thread that starts late must still see every
    // job (and the stop) published after the pool was made
    uint64_t seen = 0;
    for (;;) {
        // wait for a new job: spin a while, then sleep
        uint64_t gen   = generation_.load(std::memory_order_acquire);
        int      spins = 0;
        while (gen == seen && spins < spin_iters_ && !paused_.load(std::memory_order_relaxed)) {
            // yield now and then: with more threads than free cores, a spinning worker would
            // otherwise hold a core that the thread running the job needs
            if ((++spins & 255) == 0) {
                std::this_thread::yield();
            } else {
                WSP_CPU_RELAX();
            }
            gen = generation_.load(std::memory_order_acquire);
        }
        if (gen == seen) {
            // Note [sleep handshake]: the worker announces itself as a sleeper, then re-checks the
            // generation under the mutex; run() bumps the generation, then looks for sleepers. With
            // seq_cst on both sides at least one of them sees the other, so no wake-up is lost.
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1);
            cv_.wait(lock, [&] { return stop_.load() || (generation_.load() != seen && !paused_.load()); });
            sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        }
        // Note [job snapshot]: the generation and the job are read together. A worker that sits a
        // job out (index >= nth) is not waited for, so it may wake only after run() has published
        // the next job; reading the generation and the job separately could then pair the old
        // generation with the new job, and the worker would run that job twice.
        TaskFn fn;
        void * ctx;
        int    nth;
        {
            std::lock_guard<std::mutex> job_lock(job_mutex_);
            seen = generation_.load(std::memory_order_acquire);
            fn   = job_fn_;
            ctx  = job_ctx_;
            nth  = job_nth_;
        }
        if (stop_.load(std::memory_order_acquire)) {
            return;
        }
        if (index < nth) {
            fn(ctx, index, nth);
            done_.fetch_add(1, std::memory_order_acq_rel);
        }
    }
}

} // namespace wsp::cpu
