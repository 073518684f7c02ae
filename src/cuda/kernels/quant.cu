// Row converters to and from the quantized block types (declared in quant.cuh). Quantizing runs
// one thread per destination block: it gathers the block's 32 source values (any float strides,
// or the blocks of another quantized type) into registers and packs them exactly as the CPU
// reference does. Dequantizing runs one thread per element. Row r of src maps to row r of dst,
// each unravelled with its own shape.

#include "kernels.cuh"
#include "quant.cuh"

namespace wsp::cuda {

namespace {

__device__ __forceinline__ char * row_base(const TensorView & v, int64_t r) {
    int64_t i1, i2, i3;
    unravel_row(v, r, i1, i2, i3);
    return v.data + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

template <typename Block, float (*F)(const Block *, int)>
__device__ __forceinline__ void dequantize_block(const char * row, int64_t ib, float (&x)[QK]) {
    const Block * b = reinterpret_cast<const Block *>(row) + ib;
#pragma unroll
    for (int j = 0; j < QK; ++j) {
        x[j] = F(b, j);
    }
}

// values ib*QK .. ib*QK + 31 of a source row; the switch is outside the unrolled loops so that
// x keeps constant indices (registers, no local memory)
__device__ __forceinline__ void load_block(const TensorView & s, const char * row, int64_t ib, float (&x)[QK]) {
    switch (s.type) {
        case WSP_GGML_TYPE_Q4_0: dequantize_block<block_q4_0, dequantize_q4_0>(row, ib, x); break;
        case WSP_GGML_TYPE_Q4_1: dequantize_block<block_q4_1, dequantize_q4_1>(row, ib, x); break;
        case WSP_GGML_TYPE_Q5_0: dequantize_block<block_q5_0, dequantize_q5_0>(row, ib, x); break;
        case WSP_GGML_TYPE_Q5_1: dequantize_block<block_q5_1, dequantize_q5_1>(row, ib, x); break;
        case WSP_GGML_TYPE_Q8_0: dequantize_block<block_q8_0, dequantize_q8_0>(row, ib, x); break;
        default: {
            const char * p = row + ib * QK * s.nb[0];
#pragma unroll
            for (int j = 0; j < QK; ++j) {
                x[j] = load_f(s.type, p + j * s.nb[0]);
            }
        }
    }
}

// x: block ib of every row; y strides over the rows (gridDim.y <= 65535)
template <int T>
__global__ void quantize_kernel(TensorView s, TensorView d, int64_t rows) {
    const int64_t ib = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (ib >= d.ne[0] / QK) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        float x[QK];
        load_block(s, row_base(s, r), ib, x);
        char * out = row_base(d, r) + ib * d.nb[0];
        if constexpr (T == WSP_GGML_TYPE_Q4_0) {
            quantize_q4_0(x, reinterpret_cast<block_q4_0 *>(out));
        } else if constexpr (T == WSP_GGML_TYPE_Q4_1) {
            quantize_q4_1(x, reinterpret_cast<block_q4_1 *>(out));
        } else if constexpr (T == WSP_GGML_TYPE_Q5_0) {
            quantize_q5_0(x, reinterpret_cast<block_q5_0 *>(out));
        } else if constexpr (T == WSP_GGML_TYPE_Q5_1) {
            quantize_q5_1(x, reinterpret_cast<block_q5_1 *>(out));
        } else {
            quantize_q8_0(x, reinterpret_cast<block_q8_0 *>(out));
        }
    }
}

// x: element i0 of every row; y strides over the rows
__global__ void dequantize_kernel(TensorView s, TensorView d, int64_t rows) {
    const int64_t i0 = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float v = dequantize_row_elem(s.type, row_base(s, r), i0);
        store_f(d.type, row_base(d, r) + i0 * d.nb[0], v);
    }
}

} // namespace

bool quantize_rows(LaunchCtx & ctx, const TensorView & src, const TensorView & dst, int64_t rows) {
    // 32 floats of registers per thread: 128 threads keep several blocks resident per SM
    const RowGrid g = row_grid(dst.ne[0] / QK, rows, 128);
    switch (dst.type) {
        case WSP_GGML_TYPE_Q4_0:
            gpu::launch(quantize_kernel<WSP_GGML_TYPE_Q4_0>, g.grid, g.block, 0, ctx.stream, src, dst, rows);
            break;
        case WSP_GGML_TYPE_Q4_1:
            gpu::launch(quantize_kernel<WSP_GGML_TYPE_Q4_1>, g.grid, g.block, 0, ctx.stream, src, dst, rows);
            break;
        case WSP_GGML_TYPE_Q5_0:
            gpu::launch(quantize_kernel<WSP_GGML_TYPE_Q5_0>, g.grid, g.block, 0, ctx.stream, src, dst, rows);
            break;
        case WSP_GGML_TYPE_Q5_1:
            gpu::launch(quantize_kernel<WSP_GGML_TYPE_Q5_1>, g.grid, g.block, 0, ctx.stream, src, dst, rows);
            break;
        case WSP_GGML_TYPE_Q8_0:
            gpu::launch(quantize_kernel<WSP_GGML_TYPE_Q8_0>, g.grid, g.block, 0, ctx.stream, src, dst, rows);
            break;
        default:
            WSP_LOG_ERROR("quantize_rows: %s is not a block type of quant.cuh\n",
                          wsp_ggml_type_name((wsp_ggml_type) dst.type));
            return false;
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

bool dequantize_rows(LaunchCtx & ctx, const TensorView & src, const TensorView & dst, int64_t rows) {
    if (!is_block_quant((wsp_ggml_type) src.type)) {
        WSP_LOG_ERROR("dequantize_rows: %s is not a block type of quant.cuh\n",
                      wsp_ggml_type_name((wsp_ggml_type) src.type));
        return false;
    }
    const RowGrid g = row_grid(dst.ne[0], rows);
    gpu::launch(dequantize_kernel, g.grid, g.block, 0, ctx.stream, src, dst, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace wsp::cuda
