#pragma once

// Sum and max across a thread block for the row kernels (norm, soft_max, mean), which run one
// block per row. blockDim.x must be a multiple of WARP_SIZE and at most 32 warps (launch with
// reduce_threads), every thread of the block must call, and every thread gets the result. The
// order of the additions is fixed, so results are deterministic run to run.

#include "common.cuh"

namespace wsp::cuda {

struct SumOp {
    __device__ __forceinline__ float        operator()(float a, float b) const { return a + b; }
    __device__ __forceinline__ static float identity() { return 0.0f; }
};

struct MaxOp {
    __device__ __forceinline__ float        operator()(float a, float b) const { return fmaxf(a, b); }
    __device__ __forceinline__ static float identity() { return -INFINITY; }
};

template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v = op(v, __shfl_xor_sync(FULL_MASK, v, offset));
    }
    return v;
}

// scratch: WARP_SIZE floats of shared memory, reusable by back-to-back calls
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float * scratch, Op op) {
    const int lane   = (int) threadIdx.x % WARP_SIZE;
    const int warp   = (int) threadIdx.x / WARP_SIZE;
    const int nwarps = (int) blockDim.x / WARP_SIZE;
    v                = warp_reduce(v, op);
    if (nwarps == 1) {
        return v;
    }
    // the previous call's readers must be done with scratch before it is overwritten
    __syncthreads();
    if (lane == 0) {
        scratch[warp] = v;
    }
    __syncthreads();
    // every warp reduces the partials itself: no second broadcast through shared memory
    v = lane < nwarps ? scratch[lane] : Op::identity();
    return warp_reduce(v, op);
}

// threads for a block that reduces a row of n values: about four values per thread, whole
// warps, at least one warp and at most max_threads (a multiple of WARP_SIZE, <= 1024)
inline int reduce_threads(int64_t n, int max_threads = 512) {
    const int64_t per4 = (n + 3) / 4;
    int64_t       t    = (per4 + WARP_SIZE - 1) / WARP_SIZE * WARP_SIZE;
    t                  = t < WARP_SIZE ? WARP_SIZE : t;
    return (int) (t > max_threads ? max_threads : t);
}

// blocks for a grid that strides over `rows` rows, one block per row while they fit
inline unsigned row_blocks(int64_t rows) {
    const int64_t cap = 1 << 20; // beyond a million resident-ish blocks the stride loop takes over
    return (unsigned) (rows < 1 ? 1 : (rows < cap ? rows : cap));
}

} // namespace wsp::cuda
