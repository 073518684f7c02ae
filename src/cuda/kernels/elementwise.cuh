#pragma once

// Typed elementwise kernels: operands whose storage types are template parameters, decided once on
// the host (Note [typed elementwise kernels]), index math in 32 bits wherever the tensors allow it
// (Note [index width]), launch geometry for short and long rows, and vector loads and stores that
// check their alignment where the target can (Note [vector alignment]). Used by unary, math,
// scale, binary and cpy.

#include "common.cuh"

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace wsp::cuda {

// Note [typed elementwise kernels]: the storage types (float, __half, __nv_bfloat16) are template
// parameters of a kernel, so that each element is one load, one conversion and one store. A kernel
// is instantiated only for the type combinations that graphs use (the same type in and out; binary
// adds an F32 operand to F16 / BF16; cpy's conversions take the six pairs) with 32-bit indices;
// every other mix of float types, and every tensor too large for 32-bit indices, runs one instance
// on AnyFloat with 64-bit indices, which reads the types at run time (load_f / store_f: a uniform
// branch per element), as every kernel did before. Each instance costs compile time on every
// architecture that CI builds, so the typed set stays small. The conversions are the same functions
// either way: results are identical bit for bit.
struct AnyFloat {};

// Note [index width]: element indices, row indices and byte offsets are computed in unsigned
// 32-bit arithmetic (Index32) when every offset of every operand, the row count and the row length
// are below 2^31 (fits_index32), else in int64_t: a GPU divides 32-bit integers in a few
// instructions and 64-bit ones in a long sequence, and each row's (i1, i2, i3) takes two divisions.
using Index32 = uint32_t;
using Index64 = int64_t;

template <typename T>
__device__ __forceinline__ float to_float(T v) {
    if constexpr (std::is_same_v<T, __half>) {
        return __half2float(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __bfloat162float(v);
    } else {
        static_assert(std::is_same_v<T, float>, "to_float: not a float storage type");
        return v;
    }
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
    if constexpr (std::is_same_v<T, __half>) {
        return __float2half_rn(v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return __float2bfloat16_rn(v);
    } else {
        static_assert(std::is_same_v<T, float>, "from_float: not a float storage type");
        return v;
    }
}

// one element of storage type T at p (type: the element's wsp_ggml_type, read only for AnyFloat)
template <typename T>
__device__ __forceinline__ float load_as(const char * p, int type) {
    if constexpr (std::is_same_v<T, AnyFloat>) {
        return load_f(type, p);
    } else {
        return to_float(*reinterpret_cast<const T *>(p));
    }
}

template <typename T>
__device__ __forceinline__ void store_as(char * p, int type, float v) {
    if constexpr (std::is_same_v<T, AnyFloat>) {
        store_f(type, p, v);
    } else {
        *reinterpret_cast<T *>(p) = from_float<T>(v);
    }
}

// Note [vector alignment]: a GPU faults on a vector access whose address is not a multiple of its
// size, a CPU does not; so every vector path is chosen on the host from the alignment of the data
// pointers and strides, and on targets that define WSP_GPU_CHECK_ALIGNMENT (the host target) each
// vector load and store checks its address and traps, as the GPU would.
#ifndef WSP_GPU_CHECK_ALIGNMENT
#    define WSP_GPU_CHECK_ALIGNMENT 0
#endif

// N elements of T as one access of N * sizeof(T) bytes (a power of two up to 16)
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

template <typename V>
__device__ __forceinline__ void check_aligned(const void * p) {
#if WSP_GPU_CHECK_ALIGNMENT
    if (reinterpret_cast<uintptr_t>(p) % alignof(V) != 0) {
        __trap();
    }
#else
    (void) p;
#endif
}

template <typename V>
__device__ __forceinline__ V load_vec(const char * p) {
    check_aligned<V>(p);
    return *reinterpret_cast<const V *>(p);
}

template <typename V>
__device__ __forceinline__ void store_vec(char * p, const V & v) {
    check_aligned<V>(p);
    *reinterpret_cast<V *>(p) = v;
}

// an operand in kernel arguments: data and byte strides, in the kernel's index type
template <typename I>
struct Operand {
    char * data;
    I      nb[4];
    int    type; // wsp_ggml_type, for AnyFloat
};

// the index space of a kernel: ne0 per row, rows = ne1 * ne2 * ne3
template <typename I>
struct Shape {
    I ne0, ne1, ne2, rows;
};

template <typename I>
__device__ __forceinline__ char * at(const Operand<I> & o, I i0, I i1, I i2, I i3) {
    return o.data + (i0 * o.nb[0] + i1 * o.nb[1] + i2 * o.nb[2] + i3 * o.nb[3]);
}

// f(i0, i1, i2, i3) for this thread's elements under an elem_grid launch: thread x is the column
// i0, thread y (over blocks y) strides over the rows
template <typename I, typename F>
__device__ __forceinline__ void for_each_index(const Shape<I> & e, F f) {
    const I i0 = (I) blockIdx.x * (I) blockDim.x + (I) threadIdx.x;
    if (i0 >= e.ne0) {
        return;
    }
    const I step = (I) gridDim.y * (I) blockDim.y;
    for (I r = (I) blockIdx.y * (I) blockDim.y + (I) threadIdx.y; r < e.rows; r += step) {
        const I q = r / e.ne1, i3 = q / e.ne2;
        f(i0, r - q * e.ne1, q - i3 * e.ne2, i3);
    }
}

// 256 threads: x covers ne0 (32 up to 256 wide, so that short rows fill the block with several
// rows), y strides over the rows
inline RowGrid elem_grid(int64_t ne0, int64_t rows) {
    unsigned tx = 32;
    while (tx < 256 && (int64_t) tx < ne0) {
        tx *= 2;
    }
    const unsigned ty = 256 / tx;
    const int64_t  bx = (ne0 + tx - 1) / tx;
    const int64_t  by = (rows + ty - 1) / ty;
    return { dim3((unsigned) (bx < 1 ? 1 : bx), (unsigned) (by < 1 ? 1 : (by < 65535 ? by : 65535))), dim3(tx, ty) };
}

// ---- host side

// one past the last byte that a tensor of shape ne, strides nb and elements of `unit` bytes
// touches, relative to its data (0 when empty)
template <typename NB>
uint64_t extent_bytes(const int64_t * ne, const NB * nb, size_t unit) {
    uint64_t end = unit;
    for (int i = 0; i < 4; ++i) {
        if (ne[i] == 0) {
            return 0;
        }
        end += (uint64_t) (ne[i] - 1) * (uint64_t) nb[i];
    }
    return end;
}

// Note [index width]: whether a kernel over rows of ne0 (an elem_grid launch: thread indices stay
// below ne0 + 256, row indices below rows + 65535 * 256, both within 2^32) can address tensors ts
// in 32 bits
inline bool fits_index32(int64_t ne0, int64_t rows, std::initializer_list<const wsp_ggml_tensor *> ts) {
    if (ne0 > INT32_MAX || rows > INT32_MAX) {
        return false;
    }
    for (const wsp_ggml_tensor * t : ts) {
        if (extent_bytes(t->ne, t->nb, wsp_ggml_type_size(t->type)) > (uint64_t) INT32_MAX) {
            return false;
        }
    }
    return true;
}

template <typename I>
Operand<I> operand_of(const wsp_ggml_tensor * t) {
    Operand<I> o;
    std::memset(&o, 0, sizeof(o)); // the padding too (view_of)
    o.data = static_cast<char *>(t->data);
    for (int i = 0; i < 4; ++i) {
        o.nb[i] = (I) t->nb[i];
    }
    o.type = (int) t->type;
    return o;
}

template <typename I>
Shape<I> shape_of(const int64_t * ne) {
    return { (I) ne[0], (I) ne[1], (I) ne[2], (I) (ne[1] * ne[2] * ne[3]) };
}

// Note [collapsed dims]: a source and a destination of the same shape, seen as one index space
// with dims of size 1 dropped and neighbouring dims merged wherever both tensors store them
// contiguously: two contiguous tensors are one row (no division per element), rows padded on
// either side stay rows. Elements are a type's blocks (ne0 / block size of them per row).
struct Layout2 {
    int64_t ne[4];
    size_t  nb[2][4]; // [0]: the source's byte strides, [1]: the destination's

    int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
};

inline Layout2 collapse(const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    Layout2 p;
    std::memset(&p, 0, sizeof(p));
    int n = 0;
    for (int k = 0; k < 4; ++k) {
        const int64_t ne = k == 0 ? d->ne[0] / wsp_ggml_blck_size(d->type) : d->ne[k];
        if (ne == 1) {
            continue;
        }
        if (n > 0 && s->nb[k] == (size_t) p.ne[n - 1] * p.nb[0][n - 1] &&
            d->nb[k] == (size_t) p.ne[n - 1] * p.nb[1][n - 1]) {
            p.ne[n - 1] *= ne;
            continue;
        }
        p.ne[n]    = ne;
        p.nb[0][n] = s->nb[k];
        p.nb[1][n] = d->nb[k];
        ++n;
    }
    if (n == 0) { // one element
        p.ne[0]    = 1;
        p.nb[0][0] = wsp_ggml_type_size(s->type);
        p.nb[1][0] = wsp_ggml_type_size(d->type);
        n          = 1;
    }
    for (int k = n; k < 4; ++k) {
        p.ne[k] = 1; // strides stay 0: the index is always 0
    }
    return p;
}

// Note [index width] for a Layout2 whose elements are unit_s and unit_d bytes wide
inline bool fits_index32(const Layout2 & p, size_t unit_s, size_t unit_d) {
    return p.ne[0] <= INT32_MAX && p.rows() <= INT32_MAX &&
           extent_bytes(p.ne, p.nb[0], unit_s) <= (uint64_t) INT32_MAX &&
           extent_bytes(p.ne, p.nb[1], unit_d) <= (uint64_t) INT32_MAX;
}

inline bool fits_index32(const Layout2 & p, const wsp_ggml_tensor * s, const wsp_ggml_tensor * d) {
    return fits_index32(p, wsp_ggml_type_size(s->type), wsp_ggml_type_size(d->type));
}

template <typename I>
Operand<I> operand_of(const wsp_ggml_tensor * t, const size_t * nb) {
    Operand<I> o = operand_of<I>(t);
    for (int i = 0; i < 4; ++i) {
        o.nb[i] = (I) nb[i];
    }
    return o;
}

// the types of a kernel instance, passed to generic lambdas
template <typename S, typename D, typename I>
struct Kinds {
    using Src   = S;
    using Dst   = D;
    using Index = I;
};

// l(Kinds<S, D, I>{}) for float types s -> d (Note [typed elementwise kernels]): typed with
// 32-bit indices for one type in and out, AnyFloat with 64-bit indices otherwise
template <typename L>
void dispatch_same_type(wsp_ggml_type s, wsp_ggml_type d, bool index32, L && l) {
    if (index32 && s == d) {
        switch (s) {
            case WSP_GGML_TYPE_F32: l(Kinds<float, float, Index32>{}); return;
            case WSP_GGML_TYPE_F16: l(Kinds<__half, __half, Index32>{}); return;
            case WSP_GGML_TYPE_BF16: l(Kinds<__nv_bfloat16, __nv_bfloat16, Index32>{}); return;
            default: break;
        }
    }
    l(Kinds<AnyFloat, AnyFloat, Index64>{});
}

} // namespace wsp::cuda
