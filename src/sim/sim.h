#pragma once

// Internal structure of the sim devices: a Device owns its arena, buffer type, fault flags and
// op switches; a Backend is one stream on a device. Devices live in a process-wide list so that
// any pointer can be attributed to the device that owns it.

#include "ggml-backend-impl.h"
#include "ggml-sim.h"

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
    std::atomic<int>               delay_us{ 0 };
    std::atomic<bool>              fail_alloc{ false };
    std::atomic<bool>              fail_copy{ false };
    std::atomic<bool>              fail_kernel{ false };
    std::vector<std::atomic<bool>> op_supported;
    // a synchronous copy failed: the next synchronize of a backend of this device reports it
    std::atomic<bool> sync_copy_failed{ false };

    // consume an injected fault of this kind (true once after injection)
    static bool take(std::atomic<bool> & flag) { return flag.exchange(false); }
};

struct Backend {
    Device *                device;
    std::unique_ptr<Stream> stream;
    std::vector<uint8_t>    work; // CPU-kernel scratch, used only on the stream thread
};

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

// every copy adds its size here (wsp_ggml_backend_sim_bytes_copied)
void count_copy(size_t bytes);

// count and log a kernel access outside the kernel's device
void report_foreign_access(const Device & dev, const char * op, const wsp_ggml_tensor * t, const char * role);

wsp_ggml_backend_t backend_init(Device & dev);

} // namespace wsp::sim
