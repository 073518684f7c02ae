// ARGSORT: the I32 indices that sort each row of a float tensor, ascending or descending
// (op_params[0]). One block per row runs a bitonic sort of (value, index) pairs in shared memory,
// the row padded to a power of two with entries that sort after every real one. The order is
// total, as the CPU's stable sort: ties by index, NaN after every number ascending, before them
// descending; so both backends give the same permutation. Rows up to MAX_COLS values.

#include "block_reduce.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

// 4096 (value, index) pairs: 32 KiB of shared memory, under the 48 KiB that needs no opt-in
constexpr int64_t MAX_COLS = 4096;

// whether entry (va, ia) goes before (vb, ib); indices >= n are padding
__device__ __forceinline__ bool before(float va, int ia, float vb, int ib, int n, bool desc) {
    const bool pa = ia >= n, pb = ib >= n;
    if (pa != pb) {
        return pb;
    }
    if (pa) {
        return ia < ib;
    }
    const bool na = isnan(va), nb = isnan(vb);
    if (na != nb) {
        return desc ? na : nb;
    }
    if (!na && va != vb) {
        return desc ? va > vb : va < vb;
    }
    return ia < ib;
}

// dynamic shared memory: npad floats, then npad ints
__global__ void argsort_kernel(TensorView x, TensorView d, int64_t rows, int npad, bool desc) {
    WSP_DYNAMIC_SHARED(float, vals);
    int *     idx = reinterpret_cast<int *>(vals + npad);
    const int n   = (int) x.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        unravel_row(x, r, i1, i2, i3);
        const char * px = elem(x, 0, i1, i2, i3);
        for (int i = threadIdx.x; i < npad; i += blockDim.x) {
            vals[i] = i < n ? load_f(x.type, px + i * x.nb[0]) : 0.0f;
            idx[i]  = i;
        }
        __syncthreads();
        for (int k = 2; k <= npad; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                for (int t = threadIdx.x; t < npad; t += blockDim.x) {
                    const int u = t ^ j;
                    if (u <= t) {
                        continue;
                    }
                    // in an ascending run t's entry must go before u's, in a descending one after
                    const bool up   = (t & k) == 0;
                    const bool swap = up ? before(vals[u], idx[u], vals[t], idx[t], n, desc)
                                         : before(vals[t], idx[t], vals[u], idx[u], n, desc);
                    if (swap) {
                        const float v = vals[t];
                        const int   i = idx[t];
                        vals[t]       = vals[u];
                        idx[t]        = idx[u];
                        vals[u]       = v;
                        idx[u]        = i;
                    }
                }
                __syncthreads();
            }
        }
        char * pd = elem(d, 0, i1, i2, i3);
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            *reinterpret_cast<int32_t *>(pd + i * d.nb[0]) = idx[i];
        }
        __syncthreads(); // the next row overwrites the shared arrays
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    return t->type == WSP_GGML_TYPE_I32 && is_float_type(a->type) && wsp_ggml_are_same_shape(a, t) &&
           a->ne[0] <= MAX_COLS;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    int npad = 1;
    while (npad < t->ne[0]) {
        npad <<= 1;
    }
    const int64_t rows    = wsp_ggml_nrows(t);
    const int     threads = npad / 2 < 1 ? 1 : (npad / 2 > 256 ? 256 : npad / 2);
    const size_t  shmem   = (size_t) npad * (sizeof(float) + sizeof(int));
    gpu::launch(argsort_kernel, dim3(row_blocks(rows)), dim3((unsigned) threads), shmem, ctx.stream, view_of(t->src[0]),
                view_of(t), rows, npad, t->op_params[0] == WSP_GGML_SORT_ORDER_DESC);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_argsort() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
