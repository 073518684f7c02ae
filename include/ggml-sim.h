#pragma once

// Simulated GPU devices ("SIM0", "SIM1", ...) for testing multi-device code without GPUs.
// Each device has its own memory arena, buffer type and streams (a worker thread per backend
// running a FIFO of commands with the CPU kernels), asynchronous copies and events that really
// order streams and the host. A kernel that touches memory outside its device fails loudly.
// Registered when WSP_GGML_SIM_DEVICES=N is set, or with wsp_ggml_backend_sim_register.
// WSP_GGML_SIM_MEMORY_MB sets each device's memory (default 1024), WSP_GGML_SIM_DELAY_US a delay
// before every stream command.

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

// the SIM reg with n_devices devices of memory_mb MiB each (0: WSP_GGML_SIM_MEMORY_MB or 1024),
// registered in the backend registry; devices are created by the first call and live until exit,
// later calls return the same reg (a different n_devices is refused with a message)
WSP_GGML_BACKEND_API wsp_ggml_backend_reg_t wsp_ggml_backend_sim_register(int n_devices, size_t memory_mb);

// the SIM reg if it was registered, else NULL
WSP_GGML_BACKEND_API wsp_ggml_backend_reg_t wsp_ggml_backend_sim_reg(void);

WSP_GGML_BACKEND_API bool wsp_ggml_backend_is_sim(wsp_ggml_backend_t backend);

// fault injection for tests: the next operation of this kind on the device fails
enum wsp_ggml_sim_fault {
    WSP_GGML_SIM_FAULT_ALLOC,  // buffer allocation returns NULL
    WSP_GGML_SIM_FAULT_COPY,   // tensor copy (set, get, copy; sync or async) fails
    WSP_GGML_SIM_FAULT_KERNEL, // graph compute fails at its first node
};
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_inject_fault(wsp_ggml_backend_dev_t device, enum wsp_ggml_sim_fault fault);

// delay before each stream command of the device's backends (microseconds; 0 = none)
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_dev_t device, int delay_us);

// make the device refuse (or accept again) an op, to test fallbacks
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_op_supported(wsp_ggml_backend_dev_t device, enum wsp_ggml_op op, bool supported);

// kernel accesses to memory of another device (or of the host) seen so far; each is also logged
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_foreign_accesses(void);

// the split buffer type over the sim devices (also the reg's proc address
// "wsp_ggml_backend_split_buffer_type"): rows spread by tensor_split (NULL: by device memory)
WSP_GGML_BACKEND_API wsp_ggml_backend_buffer_type_t wsp_ggml_backend_sim_split_buffer_type(int main_device, const float * tensor_split);

// bytes moved by copies to, from and between sim devices (sync and async) since start
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_bytes_copied(void);

// bytes of device memory in use
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_memory_used(wsp_ggml_backend_dev_t device);

#ifdef __cplusplus
}
#endif
