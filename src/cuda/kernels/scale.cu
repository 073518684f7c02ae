// SCALE: dst = src * s + b (op_params: s, b), F32/F16/BF16, any strides.

#include "elementwise.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

// Note [typed elementwise kernels], Note [collapsed dims]
template <typename S, typename D, typename I>
__global__ void scale_kernel(Operand<I> x, Operand<I> d, Shape<I> e, float s, float bias) {
    for_each_index(e, [&](I i0, I i1, I i2, I i3) {
        store_as<D>(at(d, i0, i1, i2, i3), d.type, load_as<S>(at(x, i0, i1, i2, i3), x.type) * s + bias);
    });
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    float s, bias;
    std::memcpy(&s, &t->op_params[0], sizeof(float));
    std::memcpy(&bias, &t->op_params[1], sizeof(float));
    const wsp_ggml_tensor * x = t->src[0];
    const Layout2           p = collapse(x, t);
    const RowGrid           g = elem_grid(p.ne[0], p.rows());
    dispatch_same_type(x->type, t->type, fits_index32(p, x, t), [&](auto k) {
        using K = decltype(k);
        using I = typename K::Index;
        gpu::launch(scale_kernel<typename K::Src, typename K::Dst, I>, g.grid, g.block, 0, ctx.stream,
                    operand_of<I>(x, p.nb[0]), operand_of<I>(t, p.nb[1]), shape_of<I>(p.ne), s, bias);
    });
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_scale() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
