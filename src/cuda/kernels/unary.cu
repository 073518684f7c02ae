// UNARY (every wsp_ggml_unary_op), SQR and SQRT: y[i] = f(x[i]) for F32/F16/BF16 in and out,
// any strides. In place (dst aliasing src0 exactly) is safe: each thread reads its element
// before writing it and no thread reads another's. The formulas follow src/cpu/unary.cpp and
// vec.cpp, including their rewrites that avoid cancellation and overflow, on CUDA's accurate
// expf / tanhf / expm1f / erfcf.

#include "elementwise.cuh"
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

// Note [typed elementwise kernels], Note [collapsed dims]
template <int F, typename S, typename D, typename I>
__global__ void unary_kernel(Operand<I> x, Operand<I> d, Shape<I> e) {
    for_each_index(e, [&](I i0, I i1, I i2, I i3) {
        store_as<D>(at(d, i0, i1, i2, i3), d.type, apply<F>(load_as<S>(at(x, i0, i1, i2, i3), x.type)));
    });
}

template <int F>
void launch_function(LaunchCtx & ctx, const wsp_ggml_tensor * x, const wsp_ggml_tensor * t) {
    const Layout2 p = collapse(x, t);
    const RowGrid g = elem_grid(p.ne[0], p.rows());
    dispatch_same_type(x->type, t->type, fits_index32(p, x, t), [&](auto k) {
        using K = decltype(k);
        using I = typename K::Index;
        gpu::launch(unary_kernel<F, typename K::Src, typename K::Dst, I>, g.grid, g.block, 0, ctx.stream,
                    operand_of<I>(x, p.nb[0]), operand_of<I>(t, p.nb[1]), shape_of<I>(p.ne));
    });
}

using Launcher = void (*)(LaunchCtx &, const wsp_ggml_tensor *, const wsp_ggml_tensor *);

template <int... F>
constexpr auto make_table(std::integer_sequence<int, F...>) {
    return std::array<Launcher, sizeof...(F)>{ launch_function<F>... };
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
    table[(size_t) f](ctx, t->src[0], t);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_unary() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
