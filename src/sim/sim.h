#pragma once

// Internal structure of the sim devices: a Device owns its arena, buffer type, fault flags, op
// switches and delays; a Backend is one stream on a device. Devices live in a process-wide list
// so that any device address can be attributed to the device that owns it and translated to
// where the sim keeps its bytes (Arena::host).

#include "ggml-backend-impl.h"
#include "ggml-sim.h"

#include "../backend/counters.h"
#include "../core/log.h"

#include "arena.h"
#include "stream.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace wsp::sim {

struct Device {
    int                            index = 0;
    std::string                    name;
    std::string                    description;
    std::unique_ptr<Arena>         arena;
    wsp_ggml_backend_buffer_type   buft{};
    wsp_ggml_backend_device        dev{};
    Delays                         delays;
    std::atomic<int>               n_streams{ 0 }; // streams made so far, for their names and seeds
    std::atomic<bool>              fail_alloc{ false };
    std::atomic<bool>              fail_copy{ false };
    std::atomic<bool>              fail_kernel{ false };
    std::atomic<bool>              corrupt_next{ false };  // WSP_GGML_SIM_FAULT_CORRUPT
    bool                           corrupt_always = false; // WSP_GGML_SIM_CORRUPT=1, set when made
    std::vector<std::atomic<bool>> op_supported;
    // a synchronous copy failed: the next synchronize of a backend of this device reports it
    std::atomic<bool> sync_copy_failed{ false };
    // called on the stream thread before each kernel (tests hold a kernel there)
    std::atomic<wsp_ggml_backend_sim_kernel_hook> hook{ nullptr };
    std::atomic<void *>                           hook_data{ nullptr };
    // what the device was asked to do (Note [sim counters])
    Counters counters;

    // consume an injected fault of this kind (true once after injection)
    static bool take(std::atomic<bool> & flag) { return flag.exchange(false); }
};

struct Backend {
    Device *             device;
    std::vector<uint8_t> work; // CPU-kernel scratch, used only on the stream thread
    // declared after what its commands use: members are destroyed last first, so the stream drains
    // its queue and joins its thread before `work` goes (a kernel still running would grow a
    // destroyed vector)
    std::unique_ptr<Stream> stream;
};

// Note [sim counters]: a sim counts what a GPU would be asked to do (Note [counters]), on the host
// thread that asks it, so that counts are exact whatever the streams are doing:
//  - kernels when a graph is queued: one per node the stream will run (its bound nodes; no-op
//    views, reshapes, permutes, transposes, NONE and empty nodes are not kernels), as a GPU counts
//    a launch when it is queued, whether or not the kernel then fails;
//  - host waits: backend synchronize, backend free (its stream drains first), event synchronize,
//    and event_wait on an event of another kind of device (the host waits for it in the call).
//    Synchronous buffer set/get/memset/copy/clear do not wait for the streams (they move the bytes
//    at once; the happens-before checker, not a wait, says whether they were ordered), so they
//    count none;
//  - allocations: each buffer the arena is asked for, one it has no room for too (as a failed
//    cudaMalloc is counted); an injected allocation fault refuses before the arena is asked;
//  - no device graphs and no plans: those stay 0.

// the context of a sim event (wsp_ggml_backend_event::context)
struct EventCtx {
    Event event;
};

// makes the devices on the first call (later calls return the same reg); NULL on failure.
// Registration in the backend registry is wsp_ggml_backend_sim_register (register.cpp).
WSP_INTERNAL_API wsp_ggml_backend_reg_t create_devices_once(int n_devices, size_t memory_mb);

// the device of a device handle of the SIM reg, or NULL
Device * device_of(wsp_ggml_backend_dev_t dev);
// the device whose memory holds p, or NULL for host memory
Device * owner_of(const void * p);
// name for messages: "SIM1" or "host memory"
std::string owner_name(const void * p);

// where the sim reads and writes the bytes at p: through the owning device's arena for device
// addresses, p itself for host memory
void * host_view(const void * p);

// the n bytes at device address p, as the checker's ranges
inline std::vector<race::Range> bytes(const void * p, size_t n) {
    return { { (uintptr_t) p, (uintptr_t) p + n } };
}

// the happens-before checker's view of a command's or host call's accesses: records them, and
// returns false with the message in err when one races (Note [happens-before checker])
bool check_accesses(int agent, const race::Range * reads, size_t n_reads, const race::Range * writes, size_t n_writes,
                    const race::What & what, std::string & err);
inline bool check_accesses(int agent, const std::vector<race::Range> & reads, const std::vector<race::Range> & writes,
                           const race::What & what, std::string & err) {
    return check_accesses(agent, reads.data(), reads.size(), writes.data(), writes.size(), what, err);
}
// a host thread's synchronous access to device bytes (buffer set/get/copy): races are logged and
// counted; the access is made anyway, as the call has no way to fail
void check_host_access(const std::vector<race::Range> & reads, const std::vector<race::Range> & writes,
                       const std::string & what);

// every copy adds its size here (wsp_ggml_backend_sim_bytes_copied)
void count_copy(size_t bytes);

// count and log a kernel access outside the kernel's device
void report_foreign_access(const Device & dev, const char * op, const wsp_ggml_tensor * t, const char * role);

wsp_ggml_backend_t backend_init(Device & dev);

} // namespace wsp::sim
