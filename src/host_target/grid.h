#pragma once

// The device side of the host target, as the runtime sees it: the CUDA vector types a launch
// takes (dim3, uint3) and run_grid, which executes one kernel launch. Kernels themselves include
// device.h (the built-ins: threadIdx, __syncthreads, shuffles, atomics, ...).

#include <cstddef>
#include <functional>
#include <string>

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{ x, y, z }; }
};

namespace wsp::host_target {

struct GridStatus {
    bool        ok = true;
    std::string error; // what went wrong, naming the block and thread (a barrier not every thread reached, a trap)
};

// Runs every block of `grid` on the block pool (the calling thread takes part), each block's
// threads as fibers that each call thread_body() with the built-ins of device.h set for them;
// `dynamic_shared` bytes of dynamic shared memory per block. The launch configuration has been
// validated by the caller (the runtime). Returns when every block is done or one failed.
// The pool has WSP_GGML_CUDA_HOST_THREADS workers (default: the hardware threads); launches from
// several threads at once share it, and a caller always makes progress on its own blocks.
GridStatus run_grid(dim3 grid, dim3 block, size_t dynamic_shared, const std::function<void()> & thread_body);

} // namespace wsp::host_target
