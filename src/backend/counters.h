#pragma once

// Note [counters]: every device that runs work counts what it was asked to do, at the place that
// asks it of the hardware: a kernel at its launch, a host wait at the synchronize call, an
// allocation at the allocator, a device graph at its capture and its launch. The counts are what
// a GPU would be asked to do, so a step's hot path is designed and tested against them without a
// GPU: the host target and the sims run the same code paths and count exactly. A reg whose
// devices count answers the proc COUNTERS_PROC (the public function's signature); the public
// wsp_ggml_backend_dev_get_counters asks the device's reg, and reads zeros where it has none.

#include "ggml-counters.h"

#include <atomic>
#include <cstdint>

namespace wsp {

constexpr const char * COUNTERS_PROC = "wsp_ggml_backend_dev_get_counters";
using GetCountersFn                  = void (*)(wsp_ggml_backend_dev_t, wsp_ggml_backend_counters *);

struct Counters {
    std::atomic<uint64_t> graph_computes{ 0 };
    std::atomic<uint64_t> kernel_launches{ 0 };
    std::atomic<uint64_t> graph_captures{ 0 };
    std::atomic<uint64_t> graph_replays{ 0 };
    std::atomic<uint64_t> host_syncs{ 0 };
    std::atomic<uint64_t> device_allocs{ 0 };
    std::atomic<uint64_t> plans_built{ 0 };

    wsp_ggml_backend_counters read() const {
        return { graph_computes.load(), kernel_launches.load(), graph_captures.load(), graph_replays.load(),
                 host_syncs.load(),     device_allocs.load(),   plans_built.load() };
    }
};

// c += d, field by field (an aggregate device adds what its members did)
inline void add(wsp_ggml_backend_counters & c, const wsp_ggml_backend_counters & d) {
    c.graph_computes += d.graph_computes;
    c.kernel_launches += d.kernel_launches;
    c.graph_captures += d.graph_captures;
    c.graph_replays += d.graph_replays;
    c.host_syncs += d.host_syncs;
    c.device_allocs += d.device_allocs;
    c.plans_built += d.plans_built;
}

} // namespace wsp
