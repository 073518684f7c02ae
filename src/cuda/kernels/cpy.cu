// CPY, CONT, DUP: element i of src (row-major order) to element i of dst, any layouts, between
// F32/F16/BF16, or the same type as raw elements (I32 included). Same shapes go row by row;
// reshaping copies map flat indices. Quantized types (quant.cuh) follow the CPU's rules: same
// type and both contiguous is a byte copy; otherwise rows of equal ne0 with packed blocks are
// copied block by block, quantized (from F32/F16/BF16 or another block type) or dequantized.

#include "common.cuh"
#include "kernels.cuh"
#include "quant.cuh"

namespace wsp::cuda {

namespace {

// same shape: one block row per row
__global__ void cpy_rows_kernel(TensorView s, TensorView d, int64_t rows, int elem_bytes) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const char * ps = elem(s, i0, i1, i2, i3);
        char *       pd = elem(d, i0, i1, i2, i3);
        if (elem_bytes > 0) {
            for (int k = 0; k < elem_bytes; ++k) {
                pd[k] = ps[k];
            }
        } else {
            store_f(d.type, pd, load_f(s.type, ps));
        }
    });
}

__device__ __forceinline__ const char * flat_ptr(const TensorView & v, int64_t e) {
    const int64_t i0 = e % v.ne[0], i1 = (e / v.ne[0]) % v.ne[1], i2 = (e / (v.ne[0] * v.ne[1])) % v.ne[2];
    const int64_t i3 = e / (v.ne[0] * v.ne[1] * v.ne[2]);
    return elem(v, i0, i1, i2, i3);
}

// different shapes, same element count: flat index mapping
__global__ void cpy_flat_kernel(TensorView s, TensorView d, int64_t n, int elem_bytes) {
    for (int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t) gridDim.x * blockDim.x) {
        const char * ps = flat_ptr(s, e);
        char *       pd = const_cast<char *>(flat_ptr(d, e));
        if (elem_bytes > 0) {
            for (int k = 0; k < elem_bytes; ++k) {
                pd[k] = ps[k];
            }
        } else {
            store_f(d.type, pd, load_f(s.type, ps));
        }
    }
}

// raw element copy when the types match and are not blocks
int raw_elem_bytes(const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    if (s->type == d->type && !wsp_ggml_is_quantized(s->type)) {
        return (int) wsp_ggml_type_size(s->type);
    }
    return 0;
}

bool enqueue(LaunchCtx & ctx, const TensorView & s, const TensorView & d, const wsp_ggml_tensor * st,
             const wsp_ggml_tensor * dt) {
    const int elem = raw_elem_bytes(st, dt);
    if (wsp_ggml_are_same_shape(st, dt)) {
        const int64_t rows = wsp_ggml_nrows(dt);
        const RowGrid g    = row_grid(dt->ne[0], rows);
        gpu::launch(cpy_rows_kernel, g.grid, g.block, 0, ctx.stream, s, d, rows, elem);
    } else {
        const int64_t n      = wsp_ggml_nelements(dt);
        const int64_t blocks = (n + 255) / 256;
        gpu::launch(cpy_flat_kernel, (unsigned) (blocks < 65536 ? blocks : 65536), 256, 0, ctx.stream, s, d, n, elem);
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// a view of a quantized tensor whose elements are its blocks (ne0 / 32 of them per row)
TensorView block_view(const wsp_ggml_tensor * t) {
    TensorView v = view_of(t);
    v.ne[0] /= wsp_ggml_blck_size(t->type);
    return v;
}

// quantized rows: packed blocks along dim 0 (what the row converters of quant.cuh read)
bool packed_blocks(const wsp_ggml_tensor * t) {
    return is_block_quant(t->type) && wsp_ggml_is_contiguous_rows(t);
}

bool quant_supported(const wsp_ggml_tensor * s, const wsp_ggml_tensor * t) {
    if (s->ne[0] != t->ne[0]) {
        return false;
    }
    if (s->type == t->type) {
        return packed_blocks(s) && packed_blocks(t);
    }
    if (wsp_ggml_is_quantized(t->type)) {
        return packed_blocks(t) && (is_float_type(s->type) || packed_blocks(s));
    }
    return packed_blocks(s) && is_float_type(t->type);
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * s = t->src[0];
    if (wsp_ggml_nelements(s) != wsp_ggml_nelements(t)) {
        return false;
    }
    if (s->type == t->type && wsp_ggml_is_contiguous(s) && wsp_ggml_is_contiguous(t)) {
        return true; // bytes are bytes, whatever the type
    }
    if (wsp_ggml_is_quantized(s->type) || wsp_ggml_is_quantized(t->type)) {
        return quant_supported(s, t);
    }
    return (is_float_type(s->type) && is_float_type(t->type)) || raw_elem_bytes(s, t) > 0;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * s = t->src[0];
    if (wsp_ggml_is_empty(t)) {
        return true;
    }
    if (s->type == t->type && wsp_ggml_is_contiguous(s) && wsp_ggml_is_contiguous(t)) {
        return WSP_CUDA_OK(cudaMemcpyAsync(t->data, s->data, wsp_ggml_nbytes(t), cudaMemcpyDeviceToDevice, ctx.stream),
                           ctx.physical);
    }
    if (s->type == t->type && wsp_ggml_is_quantized(s->type)) {
        // blocks as raw elements; equal ne0 makes the flat block order the row order
        const int64_t n      = wsp_ggml_nelements(t) / wsp_ggml_blck_size(t->type);
        const int64_t blocks = (n + 255) / 256;
        gpu::launch(cpy_flat_kernel, (unsigned) (blocks < 65536 ? blocks : 65536), 256, 0, ctx.stream, block_view(s),
                    block_view(t), n, (int) wsp_ggml_type_size(t->type));
        return WSP_CUDA_LAUNCH_OK(ctx.physical);
    }
    if (wsp_ggml_is_quantized(t->type)) {
        return quantize_rows(ctx, view_of(s), view_of(t), wsp_ggml_nrows(s));
    }
    if (wsp_ggml_is_quantized(s->type)) {
        return dequantize_rows(ctx, view_of(s), view_of(t), wsp_ggml_nrows(s));
    }
    return enqueue(ctx, view_of(s), view_of(t), s, t);
}

} // namespace

bool convert_contiguous(LaunchCtx & ctx, const wsp_ggml_tensor * src, void * dst, wsp_ggml_type type) {
    wsp_ggml_tensor d = *src;
    d.type            = type;
    d.data            = dst;
    d.nb[0]           = wsp_ggml_type_size(type);
    for (int i = 1; i < 4; ++i) {
        d.nb[i] = d.nb[i - 1] * (size_t) d.ne[i - 1];
    }
    return enqueue(ctx, view_of(src), view_of(&d), src, &d);
}

const OpEntry & op_cpy() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
