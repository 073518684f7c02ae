// SUM (all elements -> one value of the result's float type), SUM_ROWS (each row -> [1, ne1, ne2,
// ne3]), ARGMAX (each row of a matrix -> I32, the first index of the maximum; NaN never wins and a
// row with nothing above -inf gives 0, as on the CPU) and COUNT_EQUAL (I32 a, b -> I64). Float
// inputs of any strides. SUM runs one block over the whole tensor with compensated per-thread sums
// (the CPU adds in double); COUNT_EQUAL one block with exact 64-bit counts.

#include "block_reduce.cuh"
#include "kernels.cuh"

#include <climits>

namespace wsp::cuda {

namespace {

constexpr int ONE_BLOCK_THREADS = 1024;

// threads of a one-block reduction over n values: a power of two from one warp to 1024, about
// four values each
int one_block_threads(int64_t n) {
    int t = WARP_SIZE;
    while (t < ONE_BLOCK_THREADS && (int64_t) t * 4 < n) {
        t *= 2;
    }
    return t;
}

// element e (row-major) of a view
__device__ __forceinline__ const char * flat_elem(const TensorView & v, int64_t e) {
    const int64_t i0 = e % v.ne[0], r = e / v.ne[0];
    int64_t       i1, i2, i3;
    unravel_row(v, r, i1, i2, i3);
    return elem(v, i0, i1, i2, i3);
}

__global__ void sum_kernel(TensorView x, TensorView d, int64_t n) {
    __shared__ float scratch[WARP_SIZE];
    // Kahan: a thread adds n / blockDim values, whose rounding would otherwise grow with them
    float s = 0.0f, c = 0.0f;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        const float y = load_f(x.type, flat_elem(x, e)) - c;
        const float t = s + y;
        c             = (t - s) - y;
        s             = t;
    }
    s = block_reduce(s, scratch, SumOp());
    if (threadIdx.x == 0) {
        store_f(d.type, d.data, s);
    }
}

__global__ void sum_rows_kernel(TensorView x, TensorView d, int64_t rows) {
    __shared__ float scratch[WARP_SIZE];
    const int64_t    n = x.ne[0];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t i1, i2, i3;
        unravel_row(x, r, i1, i2, i3);
        const char * px = elem(x, 0, i1, i2, i3);
        float        s  = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            s += load_f(x.type, px + i * x.nb[0]);
        }
        s = block_reduce(s, scratch, SumOp());
        if (threadIdx.x == 0) {
            store_f(d.type, elem(d, 0, i1, i2, i3), s);
        }
    }
}

// (value, index) pairs: the larger value wins, the smaller index among equals; index -1 is a
// thread that saw nothing above -inf
struct ArgMax {
    float v;
    int   i;
};

__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
    if (b.v > a.v || (b.v == a.v && b.i >= 0 && (a.i < 0 || b.i < a.i))) {
        return b;
    }
    return a;
}

__device__ __forceinline__ ArgMax warp_argmax(ArgMax m) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        ArgMax o;
        o.v = __shfl_xor_sync(FULL_MASK, m.v, offset);
        o.i = __shfl_xor_sync(FULL_MASK, m.i, offset);
        m   = better(m, o);
    }
    return m;
}

__global__ void argmax_kernel(TensorView x, TensorView d, int64_t rows) {
    __shared__ float sv[WARP_SIZE];
    __shared__ int   si[WARP_SIZE];
    const int64_t    n    = x.ne[0];
    const int        lane = (int) threadIdx.x % WARP_SIZE, warp = (int) threadIdx.x / WARP_SIZE;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const char * px = x.data + r * x.nb[1];
        ArgMax       m{ -INFINITY, -1 };
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float v = load_f(x.type, px + i * x.nb[0]);
            if (v > m.v) { // a thread's indices grow: the first of equal values stays
                m = ArgMax{ v, (int) i };
            }
        }
        m = warp_argmax(m);
        __syncthreads(); // the previous row's readers are done with sv / si
        if (lane == 0) {
            sv[warp] = m.v;
            si[warp] = m.i;
        }
        __syncthreads();
        if (warp == 0) {
            const int nwarps = (int) blockDim.x / WARP_SIZE;
            m                = lane < nwarps ? ArgMax{ sv[lane], si[lane] } : ArgMax{ -INFINITY, -1 };
            m                = warp_argmax(m);
            if (lane == 0) {
                *reinterpret_cast<int32_t *>(d.data + r * d.nb[0]) = m.i < 0 ? 0 : m.i;
            }
        }
    }
}

// blockDim.x: a power of two (one_block_threads), which the halving tree needs
__global__ void count_equal_kernel(TensorView a, TensorView b, TensorView d, int64_t n) {
    __shared__ long long counts[ONE_BLOCK_THREADS];
    long long            c = 0;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        c += *reinterpret_cast<const int32_t *>(flat_elem(a, e)) == *reinterpret_cast<const int32_t *>(flat_elem(b, e));
    }
    counts[threadIdx.x] = c;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            counts[threadIdx.x] += counts[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        *reinterpret_cast<int64_t *>(d.data) = (int64_t) counts[0];
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    switch (t->op) {
        case WSP_GGML_OP_SUM: return is_float_type(a->type) && is_float_type(t->type) && wsp_ggml_nelements(t) == 1;
        case WSP_GGML_OP_SUM_ROWS:
            return is_float_type(a->type) && is_float_type(t->type) && t->ne[0] == 1 && t->ne[1] == a->ne[1] &&
                   t->ne[2] == a->ne[2] && t->ne[3] == a->ne[3];
        case WSP_GGML_OP_ARGMAX:
            return is_float_type(a->type) && t->type == WSP_GGML_TYPE_I32 && wsp_ggml_is_matrix(a) &&
                   t->ne[0] == a->ne[1] && a->ne[0] <= INT_MAX;
        case WSP_GGML_OP_COUNT_EQUAL:
            return a->type == WSP_GGML_TYPE_I32 && t->src[1]->type == WSP_GGML_TYPE_I32 &&
                   wsp_ggml_are_same_shape(a, t->src[1]) && t->type == WSP_GGML_TYPE_I64;
        default: return false;
    }
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const TensorView        x = view_of(a), d = view_of(t);
    switch (t->op) {
        case WSP_GGML_OP_SUM:
            gpu::launch(sum_kernel, 1, one_block_threads(wsp_ggml_nelements(a)), 0, ctx.stream, x, d,
                        wsp_ggml_nelements(a));
            break;
        case WSP_GGML_OP_SUM_ROWS: {
            const int64_t rows = wsp_ggml_nrows(a);
            gpu::launch(sum_rows_kernel, row_blocks(rows), reduce_threads(a->ne[0]), 0, ctx.stream, x, d, rows);
            break;
        }
        case WSP_GGML_OP_ARGMAX:
            gpu::launch(argmax_kernel, row_blocks(a->ne[1]), reduce_threads(a->ne[0]), 0, ctx.stream, x, d, a->ne[1]);
            break;
        case WSP_GGML_OP_COUNT_EQUAL:
            gpu::launch(count_equal_kernel, 1, one_block_threads(wsp_ggml_nelements(a)), 0, ctx.stream, x,
                        view_of(t->src[1]), d, wsp_ggml_nelements(a));
            break;
        default: return false;
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_math_reduce() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
