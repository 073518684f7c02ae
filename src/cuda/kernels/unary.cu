// UNARY (every wsp_ggml_unary_op), SQR and SQRT: y[i] = f(x[i]) for F32/F16/BF16 in and out,
// any strides. In place (dst aliasing src0 exactly) is safe: each thread reads its element
// before writing it and no thread reads another's. The formulas follow src/cpu/unary.cpp and
// vec.cpp, including their rewrites that avoid cancellation and overflow, on CUDA's accurate
// expf / tanhf / expm1f / erfcf.

#include "common.cuh"
#include "kernels.cuh"

#include <array>
#include <utility>

namespace wsp::cuda {

namespace {

// the unary ops keep their enum values; SQR and SQRT are placed after them
constexpr int FN_SQR   = WSP_GGML_UNARY_OP_COUNT;
constexpr int FN_SQRT  = WSP_GGML_UNARY_OP_COUNT + 1;
constexpr int FN_COUNT = WSP_GGML_UNARY_OP_COUNT + 2;

__device__ __forceinline__ float hard_sigmoid(float v) {
    return fminf(1.0f, fmaxf(0.0f, (v + 3.0f) / 6.0f));
}

// num / (1 + exp(-t)): exp -> inf gives a signed zero instead of inf / inf (vec.cpp ratio_exp)
__device__ __forceinline__ float ratio_exp(float num, float t) {
    return num / (1.0f + expf(-t));
}

template <int F>
__device__ __forceinline__ float apply(float v) {
    if constexpr (F == WSP_GGML_UNARY_OP_ABS) {
        return fabsf(v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_SGN) {
        return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f);
    } else if constexpr (F == WSP_GGML_UNARY_OP_NEG) {
        return -v;
    } else if constexpr (F == WSP_GGML_UNARY_OP_STEP) {
        return v > 0.0f ? 1.0f : 0.0f;
    } else if constexpr (F == WSP_GGML_UNARY_OP_TANH) {
        return tanhf(v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_ELU) {
        return v > 0.0f ? v : expm1f(v); // expm1 keeps relative precision near 0
    } else if constexpr (F == WSP_GGML_UNARY_OP_RELU) {
        return v > 0.0f ? v : 0.0f;
    } else if constexpr (F == WSP_GGML_UNARY_OP_SIGMOID) {
        return ratio_exp(1.0f, v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_GELU) {
        // 0.5 v (1 + tanh(u)) == v / (1 + exp(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3)
        constexpr float C = 0.7978845608028654f, A = 0.044715f;
        return ratio_exp(v, 2.0f * C * fmaf(A, v * v * v, v));
    } else if constexpr (F == WSP_GGML_UNARY_OP_GELU_QUICK) {
        return ratio_exp(v, 1.702f * v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_SILU) {
        return ratio_exp(v, v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_HARDSWISH) {
        return v * hard_sigmoid(v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_HARDSIGMOID) {
        return hard_sigmoid(v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_EXP) {
        return expf(v);
    } else if constexpr (F == WSP_GGML_UNARY_OP_GELU_ERF) {
        return 0.5f * v * erfcf(-v * 0.70710678118654752f);
    } else if constexpr (F == FN_SQR) {
        return v * v;
    } else {
        static_assert(F == FN_SQRT, "unary: unknown function");
        return sqrtf(v);
    }
}

// x covers ne0, y strides over the rows (gridDim.y <= 65535)
template <int F>
__global__ void unary_kernel(TensorView x, TensorView d, int64_t rows) {
    for_each_element(d, rows, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        store_f(d.type, elem(d, i0, i1, i2, i3), apply<F>(load_f(x.type, elem(x, i0, i1, i2, i3))));
    });
}

using UnaryKernel = void (*)(TensorView, TensorView, int64_t);

template <int... F>
constexpr auto make_table(std::integer_sequence<int, F...>) {
    return std::array<UnaryKernel, sizeof...(F)>{ unary_kernel<F>... };
}

// the function of a node, or -1
int function_of(const wsp_ggml_tensor * t) {
    switch (t->op) {
        case WSP_GGML_OP_SQR: return FN_SQR;
        case WSP_GGML_OP_SQRT: return FN_SQRT;
        case WSP_GGML_OP_UNARY: {
            const int u = (int) wsp_ggml_get_unary_op(t);
            return u >= 0 && u < WSP_GGML_UNARY_OP_COUNT ? u : -1;
        }
        default: return -1;
    }
}

bool supported(const wsp_ggml_tensor * t) {
    return function_of(t) >= 0 && is_float_type(t->type) && is_float_type(t->src[0]->type) &&
           wsp_ggml_are_same_shape(t, t->src[0]);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    static const auto table = make_table(std::make_integer_sequence<int, FN_COUNT>{});
    const int         f     = function_of(t);
    if (f < 0) {
        return false;
    }
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = row_grid(t->ne[0], rows);
    gpu::launch(table[(size_t) f], g.grid, g.block, 0, ctx.stream, view_of(t->src[0]), view_of(t), rows);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_unary() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
