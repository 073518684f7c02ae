// CONCAT along one dim of up to WSP_GGML_MAX_SRC sources (the builder makes two; the scheduler's
// gather of split mul_mat slices makes one per device), elements copied as raw bytes.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

struct Sources {
    TensorView v[WSP_GGML_MAX_SRC];
    int        n;
};

__global__ void concat_kernel(Sources src, TensorView d, int dim, int64_t rows, int elem) {
    const int64_t i0 = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= d.ne[0]) {
        return;
    }
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t j[4] = { i0, 0, 0, 0 };
        unravel_row(d, r, j[1], j[2], j[3]);
        char * pd = d.data + j[0] * d.nb[0] + j[1] * d.nb[1] + j[2] * d.nb[2] + j[3] * d.nb[3];
        int    k  = 0;
        while (k < src.n - 1 && j[dim] >= src.v[k].ne[dim]) {
            j[dim] -= src.v[k].ne[dim];
            ++k;
        }
        const TensorView & s  = src.v[k];
        const char *       ps = s.data + j[0] * s.nb[0] + j[1] * s.nb[1] + j[2] * s.nb[2] + j[3] * s.nb[3];
        for (int b = 0; b < elem; ++b) {
            pd[b] = ps[b];
        }
    }
}

bool supported(const wsp_ggml_tensor * t) {
    if (wsp_ggml_is_quantized(t->type)) {
        return false;
    }
    for (const wsp_ggml_tensor * s : t->src) {
        if (s != nullptr && s->type != t->type) {
            return false;
        }
    }
    return t->src[0] != nullptr;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    Sources src = {};
    for (const wsp_ggml_tensor * s : t->src) {
        if (s != nullptr) {
            src.v[src.n++] = view_of(s);
        }
    }
    int dim;
    std::memcpy(&dim, &t->op_params[0], sizeof(int));
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(concat_kernel, g.grid, g.block, 0, ctx.stream, src, view_of(t), dim, rows,
                (int) wsp_ggml_type_size(t->type));
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_concat() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
