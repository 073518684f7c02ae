#pragma once

// The block scheduler of the host target (internal to grid*.cpp and device*.cpp): one block at a
// time on an OS thread, each of its threads a Boost.Context fiber that runs until it waits (a
// barrier, a warp collective) or ends. All fibers of a block share the OS thread, so the
// scheduler's state needs no locks; a block that fails is abandoned and its fibers unwound.

#include "device.h"

#include <boost/context/fiber.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace wsp::host_target::detail {

enum class ThreadState : uint8_t { ready, running, barrier, warp, exited };

// a lane's part in a pending warp collective (see warp_collective in device.h)
struct WarpPost {
    WarpOp          op;
    wsp_lane_mask_t mask;
    int             arg;
    int             width;
    size_t          size;
    const void *    in;
    void *          out;
    Site            site;
};

struct FiberThread {
    Builtins              builtins; // what the index macros read while this fiber runs
    unsigned              linear = 0, warp = 0, lane = 0;
    ThreadState           state   = ThreadState::ready;
    bool                  started = false;
    WarpPost              post{};    // valid while state == warp
    boost::context::fiber fiber;     // the thread, while suspended
    boost::context::fiber scheduler; // where it returns to, while it runs
};

// the fixed-size fiber stacks of one OS thread, kept for the next block (Note [fiber stacks])
class StackPool {
public:
    StackPool()                              = default;
    StackPool(const StackPool &)             = delete;
    StackPool & operator=(const StackPool &) = delete;
    ~StackPool();

    void *        take(); // the base of a mapping of mapping_bytes(), guard page first
    void          give_back(void * base) { free_.push_back(base); }
    static size_t stack_bytes();
    static size_t mapping_bytes();

private:
    std::vector<void *> free_;
};

struct BlockLaunch {
    dim3                          grid, block;
    size_t                        dynamic_shared;
    const std::function<void()> * body;
};

class BlockRunner {
public:
    // Runs block `block_idx` of the launch to completion on this OS thread; false with `error`
    // set (naming block and thread) when it failed.
    bool run(const BlockLaunch & launch, uint3 block_idx, std::string & error);

    // ---- for the built-ins, called from the running fiber
    FiberThread & current() { return *current_; }
    FiberThread & thread(unsigned linear) { return threads_[linear]; }
    unsigned      thread_count() const { return count_; }
    void *        dynamic_shared() { return dynamic_shared_; }
    void          barrier(Site site);
    // suspends the running fiber until wake() makes it ready again
    void suspend();
    void wake(FiberThread & t);
    // reports the block failed (the first message stays) and never returns: the fiber is
    // unwound when the scheduler abandons the block
    [[noreturn]] void fail(const std::string & message);
    std::string       name(const FiberThread & t) const; // "block (x,y,z) thread (x,y,z)"

private:
    void        start(FiberThread & t);
    void        thread_main(FiberThread & t);
    void        on_exit(FiberThread & t);
    void        abandon();
    std::string stuck_report() const;

    std::vector<FiberThread> threads_;
    unsigned                 count_ = 0;
    std::vector<unsigned>    ready_; // FIFO of thread indices, from ready_head_
    size_t                   ready_head_ = 0;
    FiberThread *            current_    = nullptr;
    const BlockLaunch *      launch_     = nullptr;
    StackPool                stacks_;
    void *                   dynamic_shared_       = nullptr;
    size_t                   dynamic_shared_bytes_ = 0;
    // the barrier: arrivals so far, the site and first arriver of this round
    unsigned    barrier_count_ = 0;
    Site        barrier_site_{};
    unsigned    barrier_first_ = 0;
    unsigned    exited_        = 0;
    unsigned    first_exited_  = 0;
    bool        failed_        = false;
    std::string error_;

public:
    BlockRunner()                                = default;
    BlockRunner(const BlockRunner &)             = delete;
    BlockRunner & operator=(const BlockRunner &) = delete;
    ~BlockRunner();
};

// the block runner of the calling OS thread
BlockRunner & this_runner();

// "file:line"
std::string where(Site site);

} // namespace wsp::host_target::detail
