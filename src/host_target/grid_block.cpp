// The block scheduler: the threads of one block as fibers on the calling OS thread, run in turn
// until each waits or ends; the block barrier, with its checks; a block that cannot go on is
// reported, never hung. See grid_block.h.

#include "grid_block.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace wsp::host_target {

namespace detail {

__thread const Builtins * current_builtins = nullptr;

// Note [stricter than hardware]: the host target reports, as a failed launch naming block and
// thread, what a GPU may tolerate or hang on: a __syncthreads that some thread of the block
// leaves unreached (it exited) or reaches at another call site (each site is its own barrier
// here); a warp collective whose mask leaves out the caller, names a lane that does not exist,
// has exited, waits at a barrier or at a different collective (op, mask, width or value size);
// a shuffle width that is not a power of two up to the warp size; mma.sync with 64-lane warps.
// A shuffle that reads a lane outside its mask gets 0xff bytes (NaN for floats) instead of the
// hardware's undefined value. Anything else that leaves every fiber of a block waiting is
// reported as a block that cannot go on.

// Note [shared memory]: static __shared__ is `static thread_local` (device.h): a block runs to
// its end on one OS thread before that thread takes another, so the variable is the block's.
// Unlike a GPU's it keeps the previous block's contents (no poisoning is possible without
// knowing where the variables are); dynamic shared memory, which the runner owns, is refilled
// with 0xff bytes for every block.

// Note [fiber stacks]: each fiber gets a fixed stack of stack_bytes() below a PROT_NONE guard
// page, so an overflow faults at once instead of corrupting the neighbouring stack. The pages
// are mapped lazily (MAP_NORESERVE), so a generous size costs only address space, and the
// stacks are kept per OS thread for the next block: a grid of many blocks maps them once.

namespace {

size_t page_bytes() {
    static const size_t bytes = (size_t) sysconf(_SC_PAGESIZE);
    return bytes;
}

// the stack allocator Boost.Context asks for each fiber: one stack from the thread's pool
struct PooledStack {
    StackPool * pool;

    boost::context::stack_context allocate() {
        boost::context::stack_context sc;
        sc.size = StackPool::stack_bytes();
        sc.sp   = static_cast<char *>(pool->take()) + StackPool::mapping_bytes(); // stacks grow down
        return sc;
    }

    void deallocate(boost::context::stack_context & sc) noexcept {
        pool->give_back(static_cast<char *>(sc.sp) - StackPool::mapping_bytes());
    }
};

bool same_site(Site a, Site b) {
    return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

std::string triple(unsigned x, unsigned y, unsigned z) {
    return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + ")";
}

} // namespace

StackPool::~StackPool() {
    for (void * base : free_) {
        munmap(base, mapping_bytes());
    }
}

size_t StackPool::stack_bytes() {
    return (size_t) 256 << 10;
}

size_t StackPool::mapping_bytes() {
    return stack_bytes() + page_bytes();
}

void * StackPool::take() {
    if (!free_.empty()) {
        void * base = free_.back();
        free_.pop_back();
        return base;
    }
    void * base =
        mmap(nullptr, mapping_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        throw std::bad_alloc();
    }
    if (mprotect(base, page_bytes(), PROT_NONE) != 0) {
        munmap(base, mapping_bytes());
        throw std::bad_alloc();
    }
    return base;
}

std::string where(Site site) {
    return std::string(site.file ? site.file : "?") + ":" + std::to_string(site.line);
}

BlockRunner & this_runner() {
    static thread_local BlockRunner runner;
    return runner;
}

BlockRunner::~BlockRunner() {
    if (dynamic_shared_) {
        ::operator delete(dynamic_shared_, std::align_val_t(64));
    }
}

std::string BlockRunner::name(const FiberThread & t) const {
    const Builtins & b = t.builtins;
    return "block " + triple(b.block_idx.x, b.block_idx.y, b.block_idx.z) + " thread " +
           triple(b.thread_idx.x, b.thread_idx.y, b.thread_idx.z);
}

bool BlockRunner::run(const BlockLaunch & launch, uint3 block_idx, std::string & error) {
    launch_ = &launch;
    count_  = launch.block.x * launch.block.y * launch.block.z;
    if (threads_.size() < count_) {
        threads_.resize(count_);
    }
    ready_.clear();
    ready_head_ = 0;
    for (unsigned i = 0; i < count_; ++i) {
        FiberThread &  t  = threads_[i];
        const unsigned tx = i % launch.block.x, ty = (i / launch.block.x) % launch.block.y,
                       tz = i / (launch.block.x * launch.block.y);
        t.builtins        = Builtins{ uint3{ tx, ty, tz }, block_idx, launch.block, launch.grid };
        t.linear          = i;
        t.warp            = i / WSP_HOST_WARP_SIZE;
        t.lane            = i % WSP_HOST_WARP_SIZE;
        t.state           = ThreadState::ready;
        t.started         = false;
        ready_.push_back(i);
    }
    const size_t dyn_bytes = launch.dynamic_shared < 64 ? 64 : launch.dynamic_shared;
    if (dyn_bytes > dynamic_shared_bytes_) {
        if (dynamic_shared_) {
            ::operator delete(dynamic_shared_, std::align_val_t(64));
            dynamic_shared_ = nullptr;
        }
        dynamic_shared_       = ::operator new(dyn_bytes, std::align_val_t(64));
        dynamic_shared_bytes_ = dyn_bytes;
    }
    std::memset(dynamic_shared_, 0xff, dyn_bytes);
    barrier_count_ = 0;
    exited_        = 0;
    failed_        = false;
    error_.clear();

    while (!failed_ && ready_head_ < ready_.size()) {
        FiberThread & t  = threads_[ready_[ready_head_++]];
        current_         = &t;
        current_builtins = &t.builtins;
        t.state          = ThreadState::running;
        if (!t.started) {
            start(t);
        }
        t.fiber = std::move(t.fiber).resume();
    }
    current_         = nullptr;
    current_builtins = nullptr;
    if (!failed_ && exited_ != count_) {
        failed_ = true;
        error_  = stuck_report();
    }
    if (failed_) {
        abandon();
        error = error_;
        return false;
    }
    return true;
}

void BlockRunner::start(FiberThread & t) {
    t.started = true;
    t.fiber   = boost::context::fiber(std::allocator_arg, PooledStack{ &stacks_ },
                                      [this, &t](boost::context::fiber && scheduler) {
                                        t.scheduler = std::move(scheduler);
                                        thread_main(t);
                                        return std::move(t.scheduler);
                                    });
}

void BlockRunner::thread_main(FiberThread & t) {
    try {
        (*launch_->body)();
    } catch (const boost::context::detail::forced_unwind &) {
        throw; // the block was abandoned: Boost unwinds this fiber
    } catch (const std::exception & e) {
        if (!failed_) {
            failed_ = true;
            error_  = "exception in " + name(t) + ": " + e.what();
        }
        return;
    } catch (...) {
        if (!failed_) {
            failed_ = true;
            error_  = "exception in " + name(t);
        }
        return;
    }
    on_exit(t);
}

void BlockRunner::on_exit(FiberThread & t) {
    t.state = ThreadState::exited;
    if (exited_++ == 0) {
        first_exited_ = t.linear;
    }
    if (failed_) {
        return;
    }
    if (barrier_count_ > 0) {
        failed_ = true;
        error_  = name(t) + " exited while " + std::to_string(barrier_count_) + " thread(s) of its block wait at " +
                 "__syncthreads (" + where(barrier_site_) + "), which every thread of the block must reach";
        return;
    }
    const unsigned base = t.warp * WSP_HOST_WARP_SIZE;
    for (unsigned i = base; i < count_ && i < base + WSP_HOST_WARP_SIZE; ++i) {
        const FiberThread & o = threads_[i];
        if (o.state == ThreadState::warp && ((o.post.mask >> t.lane) & 1)) {
            failed_ = true;
            error_  = name(t) + " (lane " + std::to_string(t.lane) + ") exited while lane " + std::to_string(o.lane) +
                     " of its warp waits for it in a warp collective (" + where(o.post.site) + ")";
            return;
        }
    }
}

void BlockRunner::suspend() {
    FiberThread & t = *current_;
    t.scheduler     = std::move(t.scheduler).resume();
}

void BlockRunner::wake(FiberThread & t) {
    t.state = ThreadState::ready;
    if (ready_head_ == ready_.size()) {
        ready_.clear();
        ready_head_ = 0;
    }
    ready_.push_back(t.linear);
}

void BlockRunner::fail(const std::string & message) {
    if (!failed_) {
        failed_ = true;
        error_  = message;
    }
    suspend(); // the scheduler stops at failed_ and unwinds this fiber from here
    std::abort();
}

void BlockRunner::barrier(Site site) {
    FiberThread & t = *current_;
    if (exited_ > 0) {
        const uint3 gone = threads_[first_exited_].builtins.thread_idx;
        fail(name(t) + " waits at __syncthreads (" + where(site) + ") but thread " + triple(gone.x, gone.y, gone.z) +
             " of its block has exited: every thread of the block must reach it");
    }
    if (barrier_count_ > 0 && !same_site(site, barrier_site_)) {
        fail("threads of one block wait at different __syncthreads: " + name(threads_[barrier_first_]) + " at " +
             where(barrier_site_) + ", " + name(t) + " at " + where(site));
    }
    const unsigned base = t.warp * WSP_HOST_WARP_SIZE;
    for (unsigned i = base; i < count_ && i < base + WSP_HOST_WARP_SIZE; ++i) {
        const FiberThread & o = threads_[i];
        if (o.state == ThreadState::warp && ((o.post.mask >> t.lane) & 1)) {
            fail(name(t) + " waits at __syncthreads (" + where(site) + ") while lane " + std::to_string(o.lane) +
                 " of its warp waits for it in a warp collective (" + where(o.post.site) + ")");
        }
    }
    if (barrier_count_ == 0) {
        barrier_site_  = site;
        barrier_first_ = t.linear;
    }
    if (++barrier_count_ == count_) {
        // the last to arrive releases the others and goes on without a switch
        barrier_count_ = 0;
        for (unsigned i = 0; i < count_; ++i) {
            if (threads_[i].state == ThreadState::barrier) {
                wake(threads_[i]);
            }
        }
        return;
    }
    t.state = ThreadState::barrier;
    suspend();
}

std::string BlockRunner::stuck_report() const {
    std::string waits;
    unsigned    listed = 0;
    for (unsigned i = 0; i < count_ && listed < 4; ++i) {
        const FiberThread & t = threads_[i];
        if (t.state == ThreadState::barrier) {
            waits += (listed++ ? "; " : "") + name(t) + " at __syncthreads (" + where(barrier_site_) + ")";
        } else if (t.state == ThreadState::warp) {
            waits += (listed++ ? "; " : "") + name(t) + " in a warp collective (" + where(t.post.site) + ")";
        }
    }
    return "block cannot go on, every live thread waits: " + waits;
}

void BlockRunner::abandon() {
    for (unsigned i = 0; i < count_; ++i) {
        FiberThread & t = threads_[i];
        if (t.fiber) {
            current_         = &t;
            current_builtins = &t.builtins;
            t.fiber          = boost::context::fiber(); // unwinds the suspended fiber's stack
        }
    }
    current_         = nullptr;
    current_builtins = nullptr;
}

} // namespace detail

void * dynamic_shared_memory() {
    return detail::this_runner().dynamic_shared();
}

void syncthreads(Site site) {
    detail::this_runner().barrier(site);
}

void trap(Site site) {
    detail::BlockRunner & r = detail::this_runner();
    r.fail("trap in " + r.name(r.current()) + " (" + detail::where(site) + ")");
}

} // namespace wsp::host_target
