// run_grid: the blocks of a launch spread over a process-wide pool of worker threads and the
// calling thread; each block runs whole on one of them (grid_block.cpp). Several launches may
// run at once (each emulated stream calls from its own thread): workers help whichever has
// blocks left, and a caller never waits for a worker to become free, only for the blocks that
// workers already took from its own launch, so a busy pool slows a launch but cannot stall it.

#include "grid_block.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace wsp::host_target {

namespace {

// one launch in progress; lives on its caller's stack until no worker is inside it
struct Job {
    detail::BlockLaunch   launch;
    uint64_t              total = 0;
    std::atomic<uint64_t> next{ 0 };
    std::atomic<bool>     failed{ false };
    std::mutex            error_mutex;
    uint64_t              error_block = UINT64_MAX; // the lowest failed block, for a stable message
    std::string           error;
    int                   helpers = 0; // workers inside, guarded by the pool's mutex
};

uint3 block_index(const dim3 & grid, uint64_t b) {
    return uint3{ (unsigned) (b % grid.x), (unsigned) ((b / grid.x) % grid.y),
                  (unsigned) (b / ((uint64_t) grid.x * grid.y)) };
}

// claims and runs blocks of `job` until none is left or one failed
void run_blocks(Job & job) {
    detail::BlockRunner & runner = detail::this_runner();
    std::string           error;
    while (!job.failed.load(std::memory_order_relaxed)) {
        const uint64_t b = job.next.fetch_add(1, std::memory_order_relaxed);
        if (b >= job.total) {
            return;
        }
        bool ok;
        try {
            ok = runner.run(job.launch, block_index(job.launch.grid, b), error);
        } catch (const std::exception & e) {
            ok    = false;
            error = std::string("block runner: ") + e.what();
        }
        if (!ok) {
            std::lock_guard<std::mutex> lock(job.error_mutex);
            if (b < job.error_block) {
                job.error_block = b;
                job.error       = error;
            }
            job.failed.store(true, std::memory_order_relaxed);
        }
    }
}

// Note [block pool]: created at first use and never destroyed: a launch may still be running
// while static destructors run (a stream thread of the runtime), and idle workers blocked on a
// condition variable do not keep the process from exiting.
class Pool {
public:
    explicit Pool(unsigned workers) {
        for (unsigned i = 0; i < workers; ++i) {
            std::thread([this] { work(); }).detach();
        }
    }

    void add(Job & job) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            jobs_.push_back(&job);
        }
        work_cv_.notify_all();
    }

    // takes the job off the pool and waits for the workers still running its blocks
    void remove(Job & job) {
        std::unique_lock<std::mutex> lock(mutex_);
        jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
        done_cv_.wait(lock, [&] { return job.helpers == 0; });
    }

private:
    // the job with blocks left and the fewest workers, so concurrent launches share the pool
    Job * pick() {
        Job * best = nullptr;
        for (Job * j : jobs_) {
            if (j->next.load(std::memory_order_relaxed) < j->total && !j->failed.load(std::memory_order_relaxed) &&
                (!best || j->helpers < best->helpers)) {
                best = j;
            }
        }
        return best;
    }

    void work() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            Job * job = nullptr;
            work_cv_.wait(lock, [&] { return (job = pick()) != nullptr; });
            ++job->helpers;
            lock.unlock();
            run_blocks(*job);
            lock.lock();
            if (--job->helpers == 0) {
                done_cv_.notify_all();
            }
        }
    }

    std::mutex              mutex_;
    std::condition_variable work_cv_, done_cv_;
    std::vector<Job *>      jobs_;
};

unsigned pool_workers() {
    unsigned n = std::thread::hardware_concurrency();
    if (const char * env = std::getenv("WSP_GGML_CUDA_HOST_THREADS")) {
        n = (unsigned) std::strtoul(env, nullptr, 10);
    }
    return n < 1 ? 1 : n;
}

Pool & pool() {
    static Pool * p = new Pool(pool_workers()); // Note [block pool]
    return *p;
}

} // namespace

GridStatus run_grid(dim3 grid, dim3 block, size_t dynamic_shared, const std::function<void()> & thread_body) {
    GridStatus status;
    try {
        if (detail::current_builtins) { // this thread's block runner is busy with the caller's block
            return GridStatus{ false, "run_grid: called from a kernel thread (no dynamic parallelism here)" };
        }
        if (block.x == 0 || block.y == 0 || block.z == 0) {
            return GridStatus{ false, "run_grid: empty block " + std::to_string(block.x) + "x" +
                                          std::to_string(block.y) + "x" + std::to_string(block.z) };
        }
        Job job;
        job.launch = detail::BlockLaunch{ grid, block, dynamic_shared, &thread_body };
        job.total  = (uint64_t) grid.x * grid.y * grid.z;
        if (job.total == 0) {
            return status;
        }
        // the job leaves the pool (waiting for its helpers) however this scope ends
        struct Enlisted {
            Job * job;
            ~Enlisted() {
                if (job) {
                    pool().remove(*job);
                }
            }
        } enlisted{ nullptr };
        if (job.total > 1) {
            pool().add(job);
            enlisted.job = &job;
        }
        run_blocks(job);
        if (enlisted.job) {
            enlisted.job = nullptr;
            pool().remove(job);
        }
        if (job.failed.load()) {
            status = GridStatus{ false, job.error };
        }
    } catch (const std::exception & e) {
        status = GridStatus{ false, std::string("run_grid: ") + e.what() };
    } catch (...) {
        status = GridStatus{ false, "run_grid: unknown exception" };
    }
    return status;
}

} // namespace wsp::host_target
