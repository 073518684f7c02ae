// Kernel launches: the configuration checked against the device's limits, every device pointer
// among the arguments checked for ownership (Note [ownership] in memory.cpp), then run_grid
// queued on the stream. A fault inside the kernel fails the command: the stream's next
// synchronize returns cudaErrorLaunchFailure, as after a kernel fault on a GPU.

#include "runtime_impl.h"

namespace wsp::host_target {

namespace {

bool valid_config(dim3 grid, dim3 block, size_t dynamic_shared) {
    const uint64_t threads = (uint64_t) block.x * block.y * block.z;
    return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && block.x >= 1 && block.y >= 1 && block.z >= 1 &&
           threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64 && grid.x <= 0x7fffffffu &&
           grid.y <= 65535 && grid.z <= 65535 && dynamic_shared <= MAX_SHARED;
}

} // namespace

cudaError_t launch_kernel(cudaStream_t stream, dim3 grid, dim3 block, size_t dynamic_shared,
                          const void * const * pointers, size_t n_pointers, std::function<void()> thread_body,
                          const char * kernel_name) {
    const char * name = kernel_name != nullptr ? kernel_name : "kernel";
    if (!valid_config(grid, block, dynamic_shared)) {
        return fail(cudaErrorInvalidConfiguration,
                    "%s: launch of grid (%u, %u, %u), block (%u, %u, %u), %zu bytes of dynamic shared memory", name,
                    grid.x, grid.y, grid.z, block.x, block.y, block.z, dynamic_shared);
    }
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    // Note [argument check]: the kernel's pointer parameters, exactly (the launch helper picks
    // them by type). Pointers inside struct parameters are not seen here: the backend names the
    // bytes of each node (note_accesses), which are checked there. A null pointer is no access; a
    // pointer one past an allocation's end is a valid end bound.
    for (size_t i = 0; i < n_pointers; ++i) {
        std::string message;
        if (pointers[i] != nullptr && check_access(s->device, pointers[i], 0, &message) != cudaSuccess) {
            return fail(cudaErrorIllegalAddress, "kernel %s on %s: pointer parameter %zu: %s", name, s->name.c_str(), i,
                        message.c_str());
        }
    }
    std::string what = std::string("kernel ") + name;
    Run run = [grid, block, dynamic_shared, body = std::move(thread_body), what](const Exec &, std::string & message) {
        const GridStatus status = run_grid(grid, block, dynamic_shared, body);
        if (!status.ok) {
            message = status.error;
            return cudaErrorLaunchFailure;
        }
        return cudaSuccess;
    };
    return set_last(s->submit({ std::move(what), std::move(run) }));
}

} // namespace wsp::host_target
