// CPY, CONT, DUP: element i of src (row-major order) to element i of dst, any layouts, between
// F32/F16/BF16, or the same type as raw elements (I32 included). Same shapes of one type move in
// the widest words that the addresses allow (Note [word copies]); conversions between float types
// are typed kernels, vectorised where rows are aligned (Note [vector conversion]), and also serve
// mul_mat's activations (convert_contiguous); reshaping copies map flat indices. Quantized types
// (quant.cuh) follow the CPU's rules: same type and both contiguous is a byte copy; otherwise rows
// of equal ne0 with packed blocks are copied block by block, quantized (from F32/F16/BF16 or
// another block type) or dequantized.

#include "elementwise.cuh"
#include "kernels.cuh"
#include "quant.cuh"

namespace wsp::cuda {

namespace {

// ---- one type, same shapes: words (Note [word copies])

// Note [word copies]: a copy between tensors of one type moves W-byte words, W the widest of 16,
// 8, 4, 2 and 1 that divides both data pointers and every stride used (Note [vector alignment]).
// Where both sides store each row's elements adjacently (after Note [collapsed dims]) a row is a
// run of bytes, cut into words whatever the element size (a row of 37 F16 moves as 74 bytes: 2-byte
// words; two contiguous tensors are one row: 16-byte words up to the tail's alignment); otherwise
// each element moves as es / W words.
template <typename W, typename I>
__global__ void copy_words_kernel(Operand<I> s, Operand<I> d, Shape<I> e, int words_per_elem) {
    for_each_index(e, [&](I i0, I i1, I i2, I i3) {
        const char * ps = at(s, i0, i1, i2, i3);
        char *       pd = at(d, i0, i1, i2, i3);
#pragma unroll 1
        for (int k = 0; k < words_per_elem; ++k) {
            store_vec<W>(pd + k * sizeof(W), load_vec<W>(ps + k * sizeof(W)));
        }
    });
}

template <typename I>
void launch_words(LaunchCtx & ctx, size_t word, const RowGrid & g, const Operand<I> & s, const Operand<I> & d,
                  const Shape<I> & e, int words_per_elem) {
    switch (word) {
        case 16:
            gpu::launch(copy_words_kernel<uint4, I>, g.grid, g.block, 0, ctx.stream, s, d, e, words_per_elem);
            break;
        case 8:
            gpu::launch(copy_words_kernel<uint2, I>, g.grid, g.block, 0, ctx.stream, s, d, e, words_per_elem);
            break;
        case 4:
            gpu::launch(copy_words_kernel<unsigned, I>, g.grid, g.block, 0, ctx.stream, s, d, e, words_per_elem);
            break;
        case 2:
            gpu::launch(copy_words_kernel<unsigned short, I>, g.grid, g.block, 0, ctx.stream, s, d, e, words_per_elem);
            break;
        default:
            gpu::launch(copy_words_kernel<unsigned char, I>, g.grid, g.block, 0, ctx.stream, s, d, e, words_per_elem);
            break;
    }
}

// the widest word (16, 8, 4, 2 or 1 bytes) that divides every bit set in `bits`
size_t word_for(uint64_t bits) {
    size_t w = 16;
    while (w > 1 && bits % w != 0) {
        w /= 2;
    }
    return w;
}

// s to d, one type (blocks for quantized types), same shapes
bool copy_words(LaunchCtx & ctx, const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    Layout2      p      = collapse(s, d);
    const size_t es     = wsp_ggml_type_size(d->type);
    const bool   packed = p.nb[0][0] == es && p.nb[1][0] == es;
    uint64_t     bits   = (uint64_t) (uintptr_t) s->data | (uint64_t) (uintptr_t) d->data;
    bits |= packed ? es * (uint64_t) p.ne[0] : es;
    for (int k = packed ? 1 : 0; k < 4; ++k) {
        if (p.ne[k] > 1) {
            bits |= p.nb[0][k] | p.nb[1][k];
        }
    }
    const size_t w              = word_for(bits);
    int          words_per_elem = (int) (es / w);
    if (packed) {
        p.ne[0]    = p.ne[0] * (int64_t) es / (int64_t) w;
        p.nb[0][0] = p.nb[1][0] = w;
        words_per_elem          = 1;
    }
    const RowGrid g = elem_grid(p.ne[0], p.rows());
    if (fits_index32(p, w, w)) {
        launch_words(ctx, w, g, operand_of<Index32>(s, p.nb[0]), operand_of<Index32>(d, p.nb[1]),
                     shape_of<Index32>(p.ne), words_per_elem);
    } else {
        launch_words(ctx, w, g, operand_of<Index64>(s, p.nb[0]), operand_of<Index64>(d, p.nb[1]),
                     shape_of<Index64>(p.ne), words_per_elem);
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// ---- F32 / F16 / BF16 to another of them, same shapes

// any layout (Note [typed elementwise kernels])
template <typename S, typename D, typename I>
__global__ void convert_kernel(Operand<I> s, Operand<I> d, Shape<I> e) {
    for_each_index(e, [&](I i0, I i1, I i2, I i3) {
        store_as<D>(at(d, i0, i1, i2, i3), d.type, load_as<S>(at(s, i0, i1, i2, i3), s.type));
    });
}

// Note [vector conversion]: where both sides store each row's elements adjacently and every row
// starts VEC-element aligned on both sides (Note [vector alignment]), a thread converts VEC
// elements with one load and one store (F32 -> F16: 16 bytes in, 8 out); the last thread of a row
// converts the rest (ne0 % VEC) one by one. Two contiguous tensors are one row (Note [collapsed
// dims]), so only the tensor's tail goes one by one. e.ne0 counts vectors; n0 is the row length.
constexpr int VEC = 4;

template <typename S, typename D, typename I>
__global__ void convert_vec_kernel(Operand<I> s, Operand<I> d, Shape<I> e, I n0) {
    for_each_index(e, [&](I j, I i1, I i2, I i3) {
        const I      i0 = j * VEC;
        const char * ps = at(s, i0, i1, i2, i3);
        char *       pd = at(d, i0, i1, i2, i3);
        if (i0 + VEC <= n0) {
            const Vec<S, VEC> x = load_vec<Vec<S, VEC>>(ps);
            Vec<D, VEC>       y;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                y.v[k] = from_float<D>(to_float(x.v[k]));
            }
            store_vec(pd, y);
        } else {
            for (I k = 0; i0 + k < n0; ++k) {
                store_as<D>(pd + k * sizeof(D), 0, load_as<S>(ps + k * sizeof(S), 0));
            }
        }
    });
}

// whether s and d (collapsed to p) take convert_vec_kernel
bool vector_aligned(const Layout2 & p, const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    const size_t ss = wsp_ggml_type_size(s->type), ds = wsp_ggml_type_size(d->type);
    if (p.nb[0][0] != ss || p.nb[1][0] != ds || (uintptr_t) s->data % (VEC * ss) != 0 ||
        (uintptr_t) d->data % (VEC * ds) != 0) {
        return false;
    }
    for (int k = 1; k < 4; ++k) {
        if (p.ne[k] > 1 && (p.nb[0][k] % (VEC * ss) != 0 || p.nb[1][k] % (VEC * ds) != 0)) {
            return false;
        }
    }
    return true;
}

// l(Kinds<S, D, I>{}) for float types s != d
template <typename I, typename L>
void dispatch_conversion(wsp_ggml_type s, wsp_ggml_type d, L && l) {
    switch (s) {
        case WSP_GGML_TYPE_F32:
            d == WSP_GGML_TYPE_F16 ? l(Kinds<float, __half, I>{}) : l(Kinds<float, __nv_bfloat16, I>{});
            break;
        case WSP_GGML_TYPE_F16:
            d == WSP_GGML_TYPE_F32 ? l(Kinds<__half, float, I>{}) : l(Kinds<__half, __nv_bfloat16, I>{});
            break;
        default:
            d == WSP_GGML_TYPE_F32 ? l(Kinds<__nv_bfloat16, float, I>{}) : l(Kinds<__nv_bfloat16, __half, I>{});
            break;
    }
}

template <typename I>
void launch_vec(LaunchCtx & ctx, const Layout2 & p, const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    const int64_t vectors[4] = { (p.ne[0] + VEC - 1) / VEC, p.ne[1], p.ne[2], p.ne[3] };
    const RowGrid g          = elem_grid(vectors[0], p.rows());
    dispatch_conversion<I>(s->type, d->type, [&](auto k) {
        using K = decltype(k);
        gpu::launch(convert_vec_kernel<typename K::Src, typename K::Dst, I>, g.grid, g.block, 0, ctx.stream,
                    operand_of<I>(s, p.nb[0]), operand_of<I>(d, p.nb[1]), shape_of<I>(vectors), (I) p.ne[0]);
    });
}

// s to d, both F32 / F16 / BF16 of different types, same shapes
bool convert(LaunchCtx & ctx, const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    const Layout2 p       = collapse(s, d);
    const bool    index32 = fits_index32(p, s, d);
    if (vector_aligned(p, s, d)) {
        index32 ? launch_vec<Index32>(ctx, p, s, d) : launch_vec<Index64>(ctx, p, s, d);
        return WSP_CUDA_LAUNCH_OK(ctx.physical);
    }
    const RowGrid g = elem_grid(p.ne[0], p.rows());
    auto          l = [&](auto k) {
        using K = decltype(k);
        using I = typename K::Index;
        gpu::launch(convert_kernel<typename K::Src, typename K::Dst, I>, g.grid, g.block, 0, ctx.stream,
                             operand_of<I>(s, p.nb[0]), operand_of<I>(d, p.nb[1]), shape_of<I>(p.ne));
    };
    if (index32) {
        dispatch_conversion<Index32>(s->type, d->type, l);
    } else {
        l(Kinds<AnyFloat, AnyFloat, Index64>{});
    }
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// ---- other shapes, same element count

__device__ __forceinline__ const char * flat_ptr(const TensorView & v, int64_t e) {
    const int64_t i0 = e % v.ne[0], i1 = (e / v.ne[0]) % v.ne[1], i2 = (e / (v.ne[0] * v.ne[1])) % v.ne[2];
    const int64_t i3 = e / (v.ne[0] * v.ne[1] * v.ne[2]);
    return elem(v, i0, i1, i2, i3);
}

// different shapes, same element count: flat index mapping
__global__ void cpy_flat_kernel(TensorView s, TensorView d, int64_t n, int elem_bytes) {
    for (int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t) gridDim.x * blockDim.x) {
        const char * ps = flat_ptr(s, e);
        char *       pd = const_cast<char *>(flat_ptr(d, e));
        if (elem_bytes > 0) {
            for (int k = 0; k < elem_bytes; ++k) {
                pd[k] = ps[k];
            }
        } else {
            store_f(d.type, pd, load_f(s.type, ps));
        }
    }
}

// raw element copy when the types match and are not blocks
int raw_elem_bytes(const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    if (s->type == d->type && !wsp_ggml_is_quantized(s->type)) {
        return (int) wsp_ggml_type_size(s->type);
    }
    return 0;
}

// same shapes: words for one type, conversions otherwise; other shapes: the flat index mapping
bool enqueue(LaunchCtx & ctx, const wsp_ggml_tensor * st, const wsp_ggml_tensor * dt) {
    if (wsp_ggml_are_same_shape(st, dt)) {
        return st->type == dt->type ? copy_words(ctx, st, dt) : convert(ctx, st, dt);
    }
    const int64_t n      = wsp_ggml_nelements(dt);
    const int64_t blocks = (n + 255) / 256;
    gpu::launch(cpy_flat_kernel, (unsigned) (blocks < 65536 ? blocks : 65536), 256, 0, ctx.stream, view_of(st),
                view_of(dt), n, raw_elem_bytes(st, dt));
    return WSP_CUDA_LAUNCH_OK(ctx.physical);
}

// a view of a quantized tensor whose elements are its blocks (ne0 / 32 of them per row)
TensorView block_view(const wsp_ggml_tensor * t) {
    TensorView v = view_of(t);
    v.ne[0] /= wsp_ggml_blck_size(t->type);
    return v;
}

// quantized rows: packed blocks along dim 0 (what the row converters of quant.cuh read)
bool packed_blocks(const wsp_ggml_tensor * t) {
    return is_block_quant(t->type) && wsp_ggml_is_contiguous_rows(t);
}

bool quant_supported(const wsp_ggml_tensor * s, const wsp_ggml_tensor * t) {
    if (s->ne[0] != t->ne[0]) {
        return false;
    }
    if (s->type == t->type) {
        return packed_blocks(s) && packed_blocks(t);
    }
    if (wsp_ggml_is_quantized(t->type)) {
        return packed_blocks(t) && (is_float_type(s->type) || packed_blocks(s));
    }
    return packed_blocks(s) && is_float_type(t->type);
}

bool supported(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * s = t->src[0];
    if (wsp_ggml_nelements(s) != wsp_ggml_nelements(t)) {
        return false;
    }
    if (s->type == t->type && wsp_ggml_is_contiguous(s) && wsp_ggml_is_contiguous(t)) {
        return true; // bytes are bytes, whatever the type
    }
    if (wsp_ggml_is_quantized(s->type) || wsp_ggml_is_quantized(t->type)) {
        return quant_supported(s, t);
    }
    return (is_float_type(s->type) && is_float_type(t->type)) || raw_elem_bytes(s, t) > 0;
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * s = t->src[0];
    if (wsp_ggml_is_empty(t)) {
        return true;
    }
    if (s->type == t->type && wsp_ggml_is_contiguous(s) && wsp_ggml_is_contiguous(t)) {
        return WSP_CUDA_OK(cudaMemcpyAsync(t->data, s->data, wsp_ggml_nbytes(t), cudaMemcpyDeviceToDevice, ctx.stream),
                           ctx.physical);
    }
    if (s->type == t->type && wsp_ggml_is_quantized(s->type)) {
        if (wsp_ggml_are_same_shape(s, t)) {
            return copy_words(ctx, s, t);
        }
        // blocks as raw elements; equal ne0 makes the flat block order the row order
        const int64_t n      = wsp_ggml_nelements(t) / wsp_ggml_blck_size(t->type);
        const int64_t blocks = (n + 255) / 256;
        gpu::launch(cpy_flat_kernel, (unsigned) (blocks < 65536 ? blocks : 65536), 256, 0, ctx.stream, block_view(s),
                    block_view(t), n, (int) wsp_ggml_type_size(t->type));
        return WSP_CUDA_LAUNCH_OK(ctx.physical);
    }
    if (wsp_ggml_is_quantized(t->type)) {
        return quantize_rows(ctx, view_of(s), view_of(t), wsp_ggml_nrows(s));
    }
    if (wsp_ggml_is_quantized(s->type)) {
        return dequantize_rows(ctx, view_of(s), view_of(t), wsp_ggml_nrows(s));
    }
    return enqueue(ctx, s, t);
}

} // namespace

bool convert_contiguous(LaunchCtx & ctx, const wsp_ggml_tensor * src, void * dst, wsp_ggml_type type) {
    wsp_ggml_tensor d = *src;
    d.type            = type;
    d.data            = dst;
    d.nb[0]           = wsp_ggml_type_size(type);
    for (int i = 1; i < 4; ++i) {
        d.nb[i] = d.nb[i - 1] * (size_t) d.ne[i - 1];
    }
    return enqueue(ctx, src, &d);
}

const OpEntry & op_cpy() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
