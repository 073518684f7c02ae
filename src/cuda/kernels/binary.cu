// ADD, SUB, MUL, DIV: dst = a op b with b broadcast over a (a->ne[i] % b->ne[i] == 0), any mix
// of F32/F16/BF16 and any strides. Threads x over a row, y over rows; the types of the common
// combinations are template parameters (Note [typed elementwise kernels]).

#include "elementwise.cuh"
#include "kernels.cuh"

namespace wsp::cuda {

namespace {

template <int OP>
__device__ __forceinline__ float apply(float x, float y) {
    if (OP == WSP_GGML_OP_ADD)
        return x + y;
    if (OP == WSP_GGML_OP_SUB)
        return x - y;
    if (OP == WSP_GGML_OP_MUL)
        return x * y;
    return x / y;
}

// index i of a dim of n < full elements broadcast over full (uniform branches: the common cases
// are no broadcast and a dim of one)
template <typename I>
__device__ __forceinline__ I wrap(I i, I n, I full) {
    return n == full ? i : (n == 1 ? 0 : i % n);
}

// b's shape, and dst's ne3
template <typename I>
struct Broadcast {
    I ne[4];
    I full3;
};

// Note [typed elementwise kernels]: A, B, D the storage types of a, b and dst
template <int OP, typename A, typename B, typename D, typename I>
__global__ void binary_kernel(Operand<I> a, Operand<I> b, Operand<I> d, Shape<I> e, Broadcast<I> bc) {
    for_each_index(e, [&](I i0, I i1, I i2, I i3) {
        const char * pb = at(b, wrap(i0, bc.ne[0], e.ne0), wrap(i1, bc.ne[1], e.ne1), wrap(i2, bc.ne[2], e.ne2),
                             wrap(i3, bc.ne[3], bc.full3));
        store_as<D>(at(d, i0, i1, i2, i3), d.type,
                    apply<OP>(load_as<A>(at(a, i0, i1, i2, i3), a.type), load_as<B>(pb, b.type)));
    });
}

template <typename A, typename B, typename D, typename I>
struct Kinds3 {
    using TA    = A;
    using TB    = B;
    using TD    = D;
    using Index = I;
};

// l(Kinds3<A, B, D, I>{}) for the types of a, b, dst (Note [typed elementwise kernels]): typed with
// 32-bit indices for one type throughout, or an F16 / BF16 tensor with an F32 operand b (biases,
// scales); AnyFloat with 64-bit indices otherwise
template <typename L>
void dispatch_types(wsp_ggml_type a, wsp_ggml_type b, wsp_ggml_type d, bool index32, L && l) {
    if (index32 && a == d && (b == a || b == WSP_GGML_TYPE_F32)) {
        switch (a) {
            case WSP_GGML_TYPE_F32: l(Kinds3<float, float, float, Index32>{}); return;
            case WSP_GGML_TYPE_F16:
                b == a ? l(Kinds3<__half, __half, __half, Index32>{}) : l(Kinds3<__half, float, __half, Index32>{});
                return;
            case WSP_GGML_TYPE_BF16:
                b == a ? l(Kinds3<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, Index32>{})
                       : l(Kinds3<__nv_bfloat16, float, __nv_bfloat16, Index32>{});
                return;
            default: break;
        }
    }
    l(Kinds3<AnyFloat, AnyFloat, AnyFloat, Index64>{});
}

template <int OP>
void launch_op(LaunchCtx & ctx, const wsp_ggml_tensor * a, const wsp_ggml_tensor * b, const wsp_ggml_tensor * t) {
    const int64_t rows = wsp_ggml_nrows(t);
    const RowGrid g    = elem_grid(t->ne[0], rows);
    dispatch_types(a->type, b->type, t->type, fits_index32(t->ne[0], rows, { a, b, t }), [&](auto k) {
        using K               = decltype(k);
        using I               = typename K::Index;
        const Broadcast<I> bc = { { (I) b->ne[0], (I) b->ne[1], (I) b->ne[2], (I) b->ne[3] }, (I) t->ne[3] };
        gpu::launch(binary_kernel<OP, typename K::TA, typename K::TB, typename K::TD, I>, g.grid, g.block, 0,
                    ctx.stream, operand_of<I>(a), operand_of<I>(b), operand_of<I>(t), shape_of<I>(t->ne), bc);
    });
}

bool supported(const wsp_ggml_tensor * t) {
    return is_float_type(t->type) && is_float_type(t->src[0]->type) && is_float_type(t->src[1]->type) &&
           wsp_ggml_can_repeat(t->src[1], t->src[0]);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    switch (t->op) {
        case WSP_GGML_OP_ADD: launch_op<WSP_GGML_OP_ADD>(ctx, a, b, t); break;
        case WSP_GGML_OP_SUB: launch_op<WSP_GGML_OP_SUB>(ctx, a, b, t); break;
        case WSP_GGML_OP_MUL: launch_op<WSP_GGML_OP_MUL>(ctx, a, b, t); break;
        default: launch_op<WSP_GGML_OP_DIV>(ctx, a, b, t); break;
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

} // namespace

const OpEntry & op_binary() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
