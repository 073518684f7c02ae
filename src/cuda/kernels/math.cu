// LOG, SIN, COS, CLAMP (op_params min, max), LEAKY_RELU (op_params negative_slope) and ADD1
// (x + the single value of src1, read on the device): y[i] = f(x[i]) for F32/F16/BF16 in and out,
// any strides. In place is safe: each thread reads its element before writing it and no thread
// reads another's. Formulas as src/cpu/math.cpp, on CUDA's accurate logf / sinf / cosf.

#include "common.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

template <int OP>
__device__ __forceinline__ float apply(float v, float p0, float p1) {
    if constexpr (OP == WSP_GGML_OP_LOG) {
        return logf(v);
    } else if constexpr (OP == WSP_GGML_OP_SIN) {
        return sinf(v);
    } else if constexpr (OP == WSP_GGML_OP_COS) {
        return cosf(v);
    } else if constexpr (OP == WSP_GGML_OP_CLAMP) {
        return v < p0 ? p0 : (v > p1 ? p1 : v); // NaN passes through, as on the CPU
    } else if constexpr (OP == WSP_GGML_OP_LEAKY_RELU) {
        return v < 0.0f ? v * p0 : v;
    } else {
        static_assert(OP == WSP_GGML_OP_ADD1, "math: unknown op");
        return v + p0;
    }
}

// scalar: ADD1's src1 (its one element), else unused
template <int OP>
__global__ void math_kernel(TensorView x, TensorView d, TensorView scalar, float p0, float p1, int64_t rows) {
    if constexpr (OP == WSP_GGML_OP_ADD1) {
        p0 = load_f(scalar.type, scalar.data);
    }
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        store_f(d.type, elem(d, i0, i1, i2, i3), apply<OP>(load_f(x.type, elem(x, i0, i1, i2, i3)), p0, p1));
    });
}

using MathKernel = void (*)(TensorView, TensorView, TensorView, float, float, int64_t);

MathKernel kernel_of(wsp_ggml_op op) {
    switch (op) {
        case WSP_GGML_OP_LOG: return math_kernel<WSP_GGML_OP_LOG>;
        case WSP_GGML_OP_SIN: return math_kernel<WSP_GGML_OP_SIN>;
        case WSP_GGML_OP_COS: return math_kernel<WSP_GGML_OP_COS>;
        case WSP_GGML_OP_CLAMP: return math_kernel<WSP_GGML_OP_CLAMP>;
        case WSP_GGML_OP_LEAKY_RELU: return math_kernel<WSP_GGML_OP_LEAKY_RELU>;
        case WSP_GGML_OP_ADD1: return math_kernel<WSP_GGML_OP_ADD1>;
        default: return nullptr;
    }
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    if (kernel_of(t->op) == nullptr || !is_float_type(t->type) || !is_float_type(a->type) ||
        !wsp_ggml_are_same_shape(t, a)) {
        return false;
    }
    const wsp_ggml_tensor * b = t->src[1];
    return t->op != WSP_GGML_OP_ADD1 || (b != nullptr && is_float_type(b->type) && wsp_ggml_nelements(b) == 1);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const MathKernel k = kernel_of(t->op);
    if (k == nullptr) {
        return false;
    }
    float p0 = 0.0f, p1 = 0.0f;
    if (t->op == WSP_GGML_OP_CLAMP || t->op == WSP_GGML_OP_LEAKY_RELU) {
        std::memcpy(&p0, &t->op_params[0], sizeof(float));
        std::memcpy(&p1, &t->op_params[1], sizeof(float));
    }
    TensorView scalar = {};
    if (t->op == WSP_GGML_OP_ADD1) {
        scalar = view_of(t->src[1]);
    }
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(k, g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), scalar, p0, p1, rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_math() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
