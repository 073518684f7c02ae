#pragma once

// The runtime's objects, shared by its files: the emulated devices (address range, allocator,
// properties, peer state, default pool), the records of live allocations and pinned host memory,
// streams (in-order workers), events, captures and graphs. One process-wide Runtime, made on the
// first CUDA call and never destroyed (stream workers may still sleep at exit).

#include "runtime.h"
#include "target.h"

#include "../core/log.h"
#include "../alloc/first_fit.h"
#include "../race/race.h"

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace wsp::host_target {

constexpr size_t ALIGNMENT   = 256; // of every device allocation, as cudaMalloc's
constexpr int    MAX_DEVICES = 16;
constexpr size_t MAX_SHARED  = 48 << 10; // dynamic shared memory per block without opt-in
constexpr int    FILL_BYTE   = 0xFF;     // fresh device memory: NaN in f32 and f16

// ---- errors (runtime.cpp)

// sets the calling thread's last error (unless success) and returns err
cudaError_t set_last(cudaError_t err);
// logs "host target: <message>" as an error, then set_last
WSP_GGML_ATTRIBUTE_FORMAT(2, 3)
cudaError_t fail(cudaError_t err, const char * fmt, ...);

// ---- device memory (memory.cpp)

// A device's address range: one private read-write mapping (kernels are host code and
// dereference device pointers), carved by a first-fit allocator that merges free neighbours.
class Arena {
public:
    explicit Arena(size_t capacity);
    ~Arena();
    Arena(const Arena &)             = delete;
    Arena & operator=(const Arena &) = delete;

    bool   valid() const { return base_ != nullptr; }
    void * allocate(size_t size); // ALIGNMENT-aligned; nullptr when no block is large enough
    void   release(void * p);
    bool   contains(uintptr_t p) const { return p >= (uintptr_t) base_ && p < (uintptr_t) base_ + capacity_; }
    size_t used() const;
    size_t capacity() const { return capacity_; }

private:
    char *             base_ = nullptr;
    size_t             capacity_;
    mutable std::mutex mutex_;
    alloc::FirstFit    blocks_;
};

enum class AllocKind { MALLOC, POOL, GRAPH };
const char * kind_name(AllocKind kind);

struct Allocation {
    uintptr_t begin  = 0;
    size_t    size   = 0; // as requested: bounds checks use it, not the rounded block
    int       device = -1;
    AllocKind kind   = AllocKind::MALLOC;
};

// Note [spin before sleep] (src/sim/stream.h): a worker polls this long before it sleeps
constexpr int SPIN_US = 200;

// the device memory a copy or fill names: device -1 for host memory
struct Place {
    int        device = -1;
    Allocation alloc;
};

// [p, p + n) inside one live allocation (device memory), or outside every device range (host
// memory: *place device -1). Otherwise cudaErrorInvalidValue with *message naming `role`.
cudaError_t locate(const void * p, size_t n, const char * role, Place * place, std::string * message);
bool        is_pinned(const void * p, size_t n);

// reserve `size` bytes of `device` (filled, history forgotten) and record them
cudaError_t allocate(int device, size_t size, AllocKind kind, void ** out);
// forget and release a live allocation; false when p does not start one
bool release(void * p, AllocKind * kind = nullptr);

// ---- streams and events (stream.cpp)

struct Capture;

// where a command runs: the stream's device and race-checker agent
struct Exec {
    int device;
    int agent;
};
using Run = std::function<cudaError_t(const Exec & exec, std::string & message)>;

struct Command {
    std::string what; // for messages
    Run         run;
    // runs on the worker once the stream no longer counts the command (an event record completes
    // its event there, so a host woken by it sees the stream idle when nothing followed, as on a
    // GPU); queued commands only, not a captured graph's nodes
    std::function<void()> settled = nullptr;
};

// one record of an event: done when its stream reached it, with the stream's clock then
struct Slot {
    std::mutex              mutex;
    std::condition_variable cv;
    std::atomic<bool>       done{ false };
    race::VectorClock       clock;

    void complete(race::VectorClock c);
    // waits (a stream's worker spins first: Note [spin before sleep] in src/sim/stream.h)
    race::VectorClock wait(bool spin);
};

} // namespace wsp::host_target

// Streams are in-order workers: commands run one after another on the stream's thread, each
// after the command queued before it; a failed command's error is kept until a synchronize
// reports it (once), later commands still run so that events complete.
struct CUstream_st {
    CUstream_st(int device, unsigned flags, std::string name);
    ~CUstream_st(); // finishes the queued work
    CUstream_st(const CUstream_st &)             = delete;
    CUstream_st & operator=(const CUstream_st &) = delete;

    // queues or, while capturing, records (Note [capture])
    cudaError_t submit(wsp::host_target::Command cmd);
    // waits until idle, orders the host after the stream; the kept error when report
    cudaError_t wait_idle(bool report);
    bool        idle();
    cudaError_t take_error(); // the kept error, cleared

    const int         device;
    const unsigned    flags;
    const int         agent;
    const std::string name;

    std::mutex                                 mutex; // guards the queue, the error and capture
    std::shared_ptr<wsp::host_target::Capture> capture;

private:
    struct Queued {
        wsp::host_target::Command cmd;
        wsp::race::VectorClock    clock; // of the queuing host thread
    };
    void run();

    std::condition_variable work_cv_, idle_cv_;
    std::deque<Queued>      queue_;
    std::atomic<int>        pending_{ 0 }; // queued or running
    bool                    stop_  = false;
    cudaError_t             error_ = cudaSuccess;
    std::thread             worker_;
};

struct CUevent_st {
    const int      device;
    const unsigned flags;

    std::mutex                               mutex;
    std::shared_ptr<wsp::host_target::Slot>  latest;   // the last record outside a capture
    std::weak_ptr<wsp::host_target::Capture> captured; // the capture of the last record, if in one
    bool                                     in_capture = false;
};

struct CUmemPoolHandle_st {
    int                             device = -1;
    std::mutex                      mutex;
    uint64_t                        release_threshold = 0;
    std::vector<cudaMemAccessFlags> access; // by device; the owner's is always read-write
};

namespace wsp::host_target {

// ---- captures and graphs (graph_capture.cpp)

// memory a capture allocated (cudaMallocAsync under capture), freed with the last graph, exec or
// replay that holds it (Note [graph memory])
struct GraphMemory {
    std::mutex          mutex;
    std::vector<void *> blocks;
    ~GraphMemory();
};

struct Capture {
    std::mutex                              mutex;
    CUstream_st *                           origin; // where it began and must end
    cudaStreamCaptureMode                   mode;
    std::thread::id                         thread;
    bool                                    invalidated = false;
    std::vector<Command>                    nodes;
    std::vector<std::weak_ptr<CUstream_st>> joined; // streams that joined through an event (Note [capture])
    std::shared_ptr<GraphMemory>            memory = std::make_shared<GraphMemory>();
};

// unsafe calls during capture (Note [capture]): success, or the error, with the captures
// concerned invalidated
cudaError_t check_capture_safe(const char * call);
// invalidates a capture (a prohibited call on its streams)
void invalidate(const std::shared_ptr<Capture> & capture, const char * why);

// ---- the runtime (runtime.cpp)

struct Device {
    int                          index;
    cudaDeviceProp               prop{};
    std::unique_ptr<Arena>       arena;
    CUmemPoolHandle_st           pool;
    std::shared_ptr<CUstream_st> legacy; // made on first use, under Runtime::mutex
};

struct Runtime {
    MachineConfig                        config;
    std::vector<std::unique_ptr<Device>> devices;

    std::mutex                     mutex;        // peer state, the stream and event sets, legacy streams
    std::vector<std::vector<bool>> peer_enabled; // [from][to], by cudaDeviceEnablePeerAccess
    std::unordered_map<CUstream_st *, std::shared_ptr<CUstream_st>> streams;    // created ones
    std::unordered_map<CUstream_st *, std::shared_ptr<CUstream_st>> per_thread; // of live host threads
    std::unordered_map<CUevent_st *, std::unique_ptr<CUevent_st>>   events;

    std::shared_mutex               alloc_mutex;
    std::map<uintptr_t, Allocation> allocs;           // live device allocations by begin
    std::map<uintptr_t, size_t>     pinned;           // pinned host ranges (cudaMallocHost, cudaHostRegister)
    std::map<uintptr_t, bool>       pinned_by_malloc; // begin -> made by cudaMallocHost
};

// the runtime, started by its first use
Runtime & rt();
bool      valid_device(int device);
int       current_device();
// the device whose address range holds p, -1 for none (no lock: ranges never move)
int arena_device(uintptr_t p);

// a stream handle (0, cudaStreamLegacy, cudaStreamPerThread or a created one), as the object;
// keeps it alive while the caller uses it. Null with cudaErrorInvalidResourceHandle otherwise.
std::shared_ptr<CUstream_st> resolve(cudaStream_t stream, cudaError_t * err);
// every stream of a device alive now (legacy, per-thread, created)
std::vector<std::shared_ptr<CUstream_st>> streams_of(int device);
bool                                      is_legacy(const CUstream_st * s);

// waits for every stream of the device; their first kept error
cudaError_t synchronize_device(int device);

// a race report of a command: false (message filled) when the checker found a race
bool report_accesses(int agent, const std::vector<race::Range> & reads, const std::vector<race::Range> & writes,
                     const race::What & what, std::string & message);

} // namespace wsp::host_target
