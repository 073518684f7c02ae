// LOG, SIN, COS, CLAMP (op_params min, max), LEAKY_RELU (op_params negative_slope) and ADD1
// (x + the single value of src1, read on the device): y[i] = f(x[i]) for F32/F16/BF16 in and out,
// any strides. In place is safe: each thread reads its element before writing it and no thread
// reads another's. Formulas as src/cpu/math.cpp, on CUDA's accurate logf / sinf / cosf.

#include "elementwise.cuh"
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

// Note [typed elementwise kernels], Note [collapsed dims]. scalar: ADD1's src1 (its one element,
// of type scalar_type), else null
template <int OP, typename S, typename D, typename I>
__global__ void math_kernel(Operand<I> x, Operand<I> d, Shape<I> e, const char * scalar, int scalar_type, float p0,
                            float p1) {
    if constexpr (OP == WSP_GGML_OP_ADD1) {
        p0 = load_f(scalar_type, scalar);
    }
    for_each_index(e, [&](I i0, I i1, I i2, I i3) {
        store_as<D>(at(d, i0, i1, i2, i3), d.type, apply<OP>(load_as<S>(at(x, i0, i1, i2, i3), x.type), p0, p1));
    });
}

template <int OP>
void launch_op(LaunchCtx & ctx, const wsp_ggml_tensor * t, float p0, float p1) {
    const wsp_ggml_tensor * x      = t->src[0];
    const wsp_ggml_tensor * scalar = OP == WSP_GGML_OP_ADD1 ? t->src[1] : nullptr;
    const Layout2           p      = collapse(x, t);
    const RowGrid           g      = elem_grid(p.ne[0], p.rows());
    dispatch_same_type(x->type, t->type, fits_index32(p, x, t), [&](auto k) {
        using K = decltype(k);
        using I = typename K::Index;
        gpu::launch(math_kernel<OP, typename K::Src, typename K::Dst, I>, g.grid, g.block, 0, ctx.stream,
                    operand_of<I>(x, p.nb[0]), operand_of<I>(t, p.nb[1]), shape_of<I>(p.ne),
                    scalar != nullptr ? static_cast<const char *>(scalar->data) : nullptr,
                    scalar != nullptr ? (int) scalar->type : 0, p0, p1);
    });
}

using MathLauncher = void (*)(LaunchCtx &, const wsp_ggml_tensor *, float, float);

MathLauncher kernel_of(wsp_ggml_op op) {
    switch (op) {
        case WSP_GGML_OP_LOG: return launch_op<WSP_GGML_OP_LOG>;
        case WSP_GGML_OP_SIN: return launch_op<WSP_GGML_OP_SIN>;
        case WSP_GGML_OP_COS: return launch_op<WSP_GGML_OP_COS>;
        case WSP_GGML_OP_CLAMP: return launch_op<WSP_GGML_OP_CLAMP>;
        case WSP_GGML_OP_LEAKY_RELU: return launch_op<WSP_GGML_OP_LEAKY_RELU>;
        case WSP_GGML_OP_ADD1: return launch_op<WSP_GGML_OP_ADD1>;
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
    const MathLauncher k = kernel_of(t->op);
    if (k == nullptr) {
        return false;
    }
    float p0 = 0.0f, p1 = 0.0f;
    if (t->op == WSP_GGML_OP_CLAMP || t->op == WSP_GGML_OP_LEAKY_RELU) {
        std::memcpy(&p0, &t->op_params[0], sizeof(float));
        std::memcpy(&p1, &t->op_params[1], sizeof(float));
    }
    k(ctx, t, p0, p1);
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_math() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
