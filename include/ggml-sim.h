#pragma once

// Simulated GPU devices ("SIM0", "SIM1", ...) for testing multi-device code without GPUs, made
// stricter than a GPU: each device has its own memory arena, buffer type and streams (a worker
// thread per backend running a FIFO of commands with the CPU kernels), asynchronous copies and
// events that really order streams and the host.
//  - A kernel binds its nodes and pointers when it is queued, as a CUDA launch does.
//  - A kernel that touches memory outside its device fails loudly.
//  - Device addresses cannot be dereferenced by host code (they fault, as on a GPU); the bytes
//    are reached through the buffer and backend interfaces only.
//  - New and reused device memory is filled with NaN (bytes 0xFF).
//  - A happens-before checker fails a command whose access to device bytes races with another
//    access that no event, wait or synchronize orders before it, naming both.
//  - Delays before each command, fixed and seeded-random, widen races.
// Registered when WSP_GGML_SIM_DEVICES=N is set, or with wsp_ggml_backend_sim_register.
// WSP_GGML_SIM_MEMORY_MB sets each device's memory (default 1024), WSP_GGML_SIM_DELAY_US a delay
// before every stream command, WSP_GGML_SIM_JITTER_US and WSP_GGML_SIM_SEED a random delay;
// WSP_GGML_SIM_CORRUPT=1 makes every graph compute of every sim device end with the corruption of
// WSP_GGML_SIM_FAULT_CORRUPT (a device that returns wrong results silently, for testing checks).

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
    WSP_GGML_SIM_FAULT_CORRUPT, // graph compute succeeds, but the first value of its last F32 result
                                // is wrong: silent data corruption, which only a check of values finds
};
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_inject_fault(wsp_ggml_backend_dev_t device, enum wsp_ggml_sim_fault fault);

// delay before each stream command of the device's backends (microseconds; 0 = none)
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_delay_us(wsp_ggml_backend_dev_t device, int delay_us);

// a random delay of 0 to max_us before each command of the device's streams, drawn from the seed
// and the stream (0: none); the same seed gives every stream the same sequence of delays again
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_jitter_us(wsp_ggml_backend_dev_t device, int max_us, uint32_t seed);

// called on the stream thread before each kernel of the device runs, with the node as queued (a
// test can hold a kernel there to observe what runs meanwhile); NULL removes it
typedef void (*wsp_ggml_backend_sim_kernel_hook)(const struct wsp_ggml_tensor * node, void * user_data);
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_kernel_hook(wsp_ggml_backend_dev_t device,
                                                               wsp_ggml_backend_sim_kernel_hook hook, void * user_data);

// make the device refuse (or accept again) an op, to test fallbacks
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_op_supported(wsp_ggml_backend_dev_t device, enum wsp_ggml_op op, bool supported);

// kernel accesses to memory of another device (or of the host) seen so far; each is also logged
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_foreign_accesses(void);

// races found by the happens-before checker so far, on every emulated device (sims and the host
// target share it; each is also logged, naming both accesses); a sim command that finds one
// still makes its accesses, and its stream's next synchronize fails
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_races(void);

// on by default; a test that looks at bytes while work on them is in flight, on purpose, turns
// the checks off around that (process-wide)
WSP_GGML_BACKEND_API void wsp_ggml_backend_sim_set_race_checks(bool on);

// the split buffer type over the sim devices (also the reg's proc address
// "wsp_ggml_backend_split_buffer_type"): rows spread by tensor_split (NULL: by device memory)
WSP_GGML_BACKEND_API wsp_ggml_backend_buffer_type_t wsp_ggml_backend_sim_split_buffer_type(int main_device, const float * tensor_split);

// bytes moved by copies to, from and between sim devices (sync and async) since start
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_bytes_copied(void);

// bytes of device memory in use, and the number of live buffers holding it
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_memory_used(wsp_ggml_backend_dev_t device);
WSP_GGML_BACKEND_API size_t wsp_ggml_backend_sim_buffer_count(wsp_ggml_backend_dev_t device);

#ifdef __cplusplus
}
#endif
