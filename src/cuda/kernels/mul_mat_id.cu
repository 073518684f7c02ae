// MUL_MAT_ID: dst[:, e, t] = as[:, :, ids[e, t]] x b[:, e % b->ne1, t]. Experts F32/F16/BF16
// (any strides) or Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 or a K-quant with packed blocks, b F32/F16/BF16 any
// strides, ids I32, dst F32. One warp per (weight row, (e, t) pair): the lanes stride over K and
// reduce by shuffles; a block holds ROW_WARPS rows, blocks in y stride over the pairs. An id
// outside the experts gives a zero (the CPU also logs it; a kernel cannot cheaply).

#include "block_reduce.cuh"
#include "kernels.cuh"
#include "quant.cuh"

namespace wsp::cuda {

namespace {

constexpr int ROW_WARPS = 4;

__global__ void mul_mat_id_kernel(TensorView as, TensorView b, TensorView ids, TensorView d, bool quantized,
                                  int64_t n_pairs) {
    const int     lane = (int) threadIdx.x % WARP_SIZE;
    const int64_t row  = (int64_t) blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (row >= as.ne[1]) {
        return; // a whole warp leaves together: the shuffles below stay full-warp
    }
    for (int64_t pr = blockIdx.y; pr < n_pairs; pr += gridDim.y) {
        const int64_t e = pr % ids.ne[0], t = pr / ids.ne[0];
        const int32_t ex  = *reinterpret_cast<const int32_t *>(ids.data + e * ids.nb[0] + t * ids.nb[1]);
        float         acc = 0.0f;
        if (ex >= 0 && ex < as.ne[2]) {
            const char * pa = as.data + row * as.nb[1] + ex * as.nb[2];
            const char * pb = b.data + (e % b.ne[1]) * b.nb[1] + t * b.nb[2];
            for (int64_t k = lane; k < as.ne[0]; k += WARP_SIZE) {
                const float w = quantized ? dequantize_row_elem(as.type, pa, k) : load_f(as.type, pa + k * as.nb[0]);
                acc           = fmaf(w, load_f(b.type, pb + k * b.nb[0]), acc);
            }
        }
        acc = warp_reduce(acc, SumOp());
        if (lane == 0) {
            *reinterpret_cast<float *>(d.data + row * d.nb[0] + e * d.nb[1] + t * d.nb[2]) = acc;
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * as  = t->src[0];
    const wsp_ggml_tensor * b   = t->src[1];
    const wsp_ggml_tensor * ids = t->src[2];
    if (t->type != WSP_GGML_TYPE_F32 || !is_float_type(b->type) || ids->type != WSP_GGML_TYPE_I32 ||
        t->ne[0] != as->ne[1] || t->ne[1] != ids->ne[0] || t->ne[2] != ids->ne[1] || b->ne[1] < 1) {
        return false;
    }
    return is_float_type(as->type) || (is_dequantizable(as->type) && as->nb[0] == wsp_ggml_type_size(as->type) &&
                                       as->ne[0] % wsp_ggml_blck_size(as->type) == 0);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * as      = t->src[0];
    const int64_t           n_pairs = t->ne[1] * t->ne[2];
    const int64_t           bx      = (as->ne[1] + ROW_WARPS - 1) / ROW_WARPS;
    const dim3 grid((unsigned) (bx < 1 ? 1 : bx), (unsigned) (n_pairs < 1 ? 1 : n_pairs < 65535 ? n_pairs : 65535));
    gpu::launch(mul_mat_id_kernel, grid, dim3(ROW_WARPS * WARP_SIZE), 0, ctx.stream, view_of(as), view_of(t->src[1]),
                view_of(t->src[2]), view_of(t), is_dequantizable(as->type), n_pairs);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_mul_mat_id() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
