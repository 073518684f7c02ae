// OUT_PROD: dst[i, j, i2, i3] = sum_l a[i, l, i2 / r2, i3 / r3] * b[j, l, i2, i3] (a broadcast
// over b's dims 2-3). a F32/F16/BF16 (any strides) or Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 with packed
// blocks, b F32/F16/BF16 any strides, dst F32. One thread per dst element, consecutive threads
// along i: a's rows are read coalesced and b's element is the same for the whole row.

#include "common.cuh"
#include "kernels.cuh"
#include "quant.cuh"

namespace wsp::cuda {

namespace {

__global__ void out_prod_kernel(TensorView a, TensorView b, TensorView d, bool quantized, int64_t rows) {
    for_each_element(d, rows, [&](int64_t i, int64_t j, int64_t i2, int64_t i3) {
        const char * pa  = a.data + (i2 / (d.ne[2] / a.ne[2])) * a.nb[2] + (i3 / (d.ne[3] / a.ne[3])) * a.nb[3];
        const char * pb  = b.data + j * b.nb[0] + i2 * b.nb[2] + i3 * b.nb[3];
        float        acc = 0.0f;
        for (int64_t l = 0; l < a.ne[1]; ++l) {
            const char * row = pa + l * a.nb[1];
            const float  x   = quantized ? dequantize_row_elem(a.type, row, i) : load_f(a.type, row + i * a.nb[0]);
            acc              = fmaf(x, load_f(b.type, pb + l * b.nb[1]), acc);
        }
        *reinterpret_cast<float *>(elem(d, i, j, i2, i3)) = acc;
    });
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    if (t->type != WSP_GGML_TYPE_F32 || !is_float_type(b->type) || a->ne[1] != b->ne[1] || t->ne[0] != a->ne[0] ||
        t->ne[1] != b->ne[0] || t->ne[2] != b->ne[2] || t->ne[3] != b->ne[3] || t->ne[2] % a->ne[2] != 0 ||
        t->ne[3] % a->ne[3] != 0) {
        return false;
    }
    return is_float_type(a->type) ||
           (is_block_quant(a->type) && a->nb[0] == wsp_ggml_type_size(a->type) && a->ne[0] % QK == 0);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(out_prod_kernel, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t->src[1]), view_of(t),
                is_block_quant(t->src[0]->type), rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_out_prod() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
