#pragma once

// What a device was asked to do, counted: the figures a GPU step is designed against (Note
// [counters] in src/backend/counters.h). Cumulative since the process started, per device; a
// step's figures are the difference of two reads. CUDA and ROCm devices (and the host target's
// emulated ones), sim devices and all-GPU devices count; other devices (the CPU) read zeros.

#include "ggml-backend.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct wsp_ggml_backend_counters {
    uint64_t graph_computes;  // graph_compute / graph_compute_async calls on the device's backends
    uint64_t kernel_launches; // kernels launched one by one (not from a replayed device graph)
    uint64_t graph_captures;  // device graphs captured or instantiated (CUDA graphs)
    uint64_t graph_replays;   // device graphs launched
    uint64_t host_syncs;      // times a host thread waited for the device (stream, event, device sync)
    uint64_t device_allocs;   // device memory allocations of any kind (malloc, pool, async)
    uint64_t plans_built;     // all-GPU device: graph plans and member graphs built (0 elsewhere)
};

// the device's counters into *out (zeros for a device that does not count, or a NULL device)
WSP_GGML_BACKEND_API void wsp_ggml_backend_dev_get_counters(wsp_ggml_backend_dev_t dev,
                                                            struct wsp_ggml_backend_counters * out);

#ifdef __cplusplus
}
#endif
