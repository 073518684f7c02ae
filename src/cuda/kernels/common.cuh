#pragma once

// Device-side helpers shared by the kernels: a by-value tensor view (data, shape, strides, type),
// loads and stores of the float storage types chosen at run time (a uniform branch), and the
// launch geometry of row-wise kernels.

#include "../ops.cuh"

#include <cstring>

namespace wsp::cuda {

struct TensorView {
    char *  data;
    int64_t ne[4];
    int64_t nb[4];
    int     type;
};

inline TensorView view_of(const wsp_ggml_tensor * t) {
    TensorView v;
    std::memset(&v, 0, sizeof(v)); // the padding too: a kernel's arguments are copied byte for byte
    v.data = static_cast<char *>(t->data);
    for (int i = 0; i < 4; ++i) {
        v.ne[i] = t->ne[i];
        v.nb[i] = (int64_t) t->nb[i];
    }
    v.type = (int) t->type;
    return v;
}

inline bool is_float_type(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
}

__device__ __forceinline__ float load_f(int type, const char * p) {
    switch (type) {
        case WSP_GGML_TYPE_F16: return __half2float(*reinterpret_cast<const __half *>(p));
        case WSP_GGML_TYPE_BF16: return __bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p));
        default: return *reinterpret_cast<const float *>(p);
    }
}

__device__ __forceinline__ void store_f(int type, char * p, float v) {
    switch (type) {
        case WSP_GGML_TYPE_F16: *reinterpret_cast<__half *>(p) = __float2half_rn(v); break;
        case WSP_GGML_TYPE_BF16: *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(v); break;
        default: *reinterpret_cast<float *>(p) = v; break;
    }
}

// Kernels written around groups of 32 lanes (a lane is threadIdx.x % 32, 1-D blocks) shuffle
// within their group: the whole warp where warps are 32 wide, half of it where they are 64 wide
// (the halves may then diverge, one leaving a loop the other goes on with).
__device__ __forceinline__ wsp_lane_mask_t group32_mask() {
    if (WARP_SIZE == 32) {
        return FULL_MASK;
    }
    return (wsp_lane_mask_t) 0xffffffffu << (threadIdx.x % WARP_SIZE & 32u);
}

// row r of a view -> (i1, i2, i3)
__device__ __forceinline__ void unravel_row(const TensorView & v, int64_t r, int64_t & i1, int64_t & i2, int64_t & i3) {
    i1 = r % v.ne[1];
    i2 = (r / v.ne[1]) % v.ne[2];
    i3 = r / (v.ne[1] * v.ne[2]);
}

// address of element (i0, i1, i2, i3) of a view
__device__ __forceinline__ char * elem(const TensorView & v, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return v.data + i0 * v.nb[0] + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

// f(i0, i1, i2, i3) for this thread's elements of d under a row_grid launch: thread x is the
// column i0, block y strides over the rows of d
template <typename F>
__device__ __forceinline__ void for_each_element(const TensorView & d, int64_t rows, F f) {
    const int64_t i0 = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(d, r, i1, i2, i3);
        f(i0, i1, i2, i3);
    }
}

// grid for row-wise kernels: x covers ne0 in blocks of `threads`, y strides over the rows
struct RowGrid {
    dim3 grid;
    dim3 block;
};

inline RowGrid row_grid(int64_t ne0, int64_t rows, int threads = 256) {
    const int64_t bx = (ne0 + threads - 1) / threads;
    const int64_t by = rows < 65535 ? rows : 65535;
    return { dim3((unsigned) (bx < 1 ? 1 : bx), (unsigned) (by < 1 ? 1 : by)), dim3((unsigned) threads) };
}

} // namespace wsp::cuda
