// GET_ROWS: dst[:, i10, i11, i12] = a[:, b[i10, i11, i12], i11, i12 % a->ne3]. Rows of
// F32/F16/BF16 or of a quantized block type (the K-quants too) are converted to F32; I32 rows are
// copied. An index outside a's rows gives a zero row: the CPU logs it, but a kernel has no cheap
// way to report (and the backend never synchronises inside a launch), so the GPU only writes the
// zeros.

#include "kernels.cuh"
#include "quant.cuh"

namespace wsp::cuda {

namespace {

// x covers ne0, y strides over the b->ne0 * b->ne1 * b->ne2 gathered rows (gridDim.y <= 65535)
__global__ void get_rows_kernel(TensorView a, TensorView b, TensorView d, int64_t rows, bool quantized) {
    const int64_t i0 = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t i10 = r % b.ne[0], i11 = (r / b.ne[0]) % b.ne[1], i12 = r / (b.ne[0] * b.ne[1]);
        const int32_t row = *reinterpret_cast<const int32_t *>(b.data + i10 * b.nb[0] + i11 * b.nb[1] + i12 * b.nb[2]);
        char *        pd  = d.data + i0 * d.nb[0] + i10 * d.nb[1] + i11 * d.nb[2] + i12 * d.nb[3];
        const bool    i32 = d.type == WSP_GGML_TYPE_I32;
        if (row < 0 || row >= a.ne[1]) {
            if (i32) {
                *reinterpret_cast<int32_t *>(pd) = 0;
            } else {
                *reinterpret_cast<float *>(pd) = 0.0f;
            }
            continue;
        }
        const char * pa = a.data + row * a.nb[1] + i11 * a.nb[2] + (i12 % a.ne[3]) * a.nb[3];
        if (i32) {
            *reinterpret_cast<int32_t *>(pd) = *reinterpret_cast<const int32_t *>(pa + i0 * a.nb[0]);
        } else {
            *reinterpret_cast<float *>(pd) =
                quantized ? dequantize_row_elem(a.type, pa, i0) : load_f(a.type, pa + i0 * a.nb[0]);
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    if (b->type != WSP_GGML_TYPE_I32 || t->ne[0] != a->ne[0] || t->ne[1] != b->ne[0] || t->ne[2] != b->ne[1] ||
        t->ne[3] != b->ne[2] || a->ne[2] != b->ne[1]) {
        return false;
    }
    if (a->type == WSP_GGML_TYPE_I32) {
        return t->type == WSP_GGML_TYPE_I32;
    }
    // quantized rows: blocks packed along dim 0, as dequantize_row_elem reads them
    const bool rows_ok =
        is_float_type(a->type) || (is_dequantizable(a->type) && a->nb[0] == wsp_ggml_type_size(a->type));
    return t->type == WSP_GGML_TYPE_F32 && rows_ok;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a    = t->src[0];
    const int64_t           rows = wsp_ggml_nelements(t->src[1]);
    const RowGrid           g    = row_grid(t->ne[0], rows);
    gpu::launch(get_rows_kernel, g.grid, g.block, 0, ctx.stream, view_of(a), view_of(t->src[1]), view_of(t), rows,
                is_dequantizable(a->type));
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_get_rows() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
