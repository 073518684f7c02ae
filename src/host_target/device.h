#pragma once

// The device built-ins of the host target: what a kernel compiled by g++ sees in place of CUDA's
// (qualifiers, vector types, threadIdx & co., __shared__, __syncthreads, warp collectives,
// atomics, intrinsics, mma.sync). Each kernel thread is a fiber of its block (grid_block.cpp);
// the built-ins read the running fiber's context. Checks are stricter than hardware on purpose:
// see Note [stricter than hardware] in grid_block.cpp.

#include "grid.h"
#include "half.h"

#include "../core/fp16.h"

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <type_traits>

#ifndef WSP_HOST_WARP_SIZE
#    define WSP_HOST_WARP_SIZE 32
#endif
#if WSP_HOST_WARP_SIZE != 32 && WSP_HOST_WARP_SIZE != 64
#    error "WSP_HOST_WARP_SIZE must be 32 or 64"
#endif
#define WSP_GPU_WARP_SIZE WSP_HOST_WARP_SIZE
// kernels' vector loads and stores trap on a misaligned address, as a GPU's do and a CPU's do not
// (Note [vector alignment] in src/cuda/kernels/elementwise.cuh)
#define WSP_GPU_CHECK_ALIGNMENT 1

// a lane mask has one bit per lane: 64-bit for 64-lane warps, as HIP's are
#if WSP_HOST_WARP_SIZE == 64
typedef unsigned long long wsp_lane_mask_t;
#    define WSP_GPU_FULL_MASK 0xffffffffffffffffull
#else
typedef unsigned wsp_lane_mask_t;
#    define WSP_GPU_FULL_MASK 0xffffffffu
#endif

// ---- qualifiers: a kernel is an ordinary function here. (No __noinline__: libstdc++ spells
// GCC's attribute that way, so a macro of that name would break <memory>.)
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
// One block runs at a time on an OS thread, with all its fibers on that thread, so a function's
// static thread_local is that block's shared memory (Note [shared memory] in grid_block.cpp).
#define __shared__ static thread_local

// ---- vector types, with CUDA's member names and alignment
// clang-format off
struct alignas(2)  char2     { signed char x, y; };
struct alignas(2)  uchar2    { unsigned char x, y; };
struct alignas(4)  char4     { signed char x, y, z, w; };
struct alignas(4)  uchar4    { unsigned char x, y, z, w; };
struct alignas(4)  short2    { short x, y; };
struct alignas(4)  ushort2   { unsigned short x, y; };
struct alignas(8)  short4    { short x, y, z, w; };
struct alignas(8)  int2      { int x, y; };
struct             int3      { int x, y, z; };
struct alignas(16) int4      { int x, y, z, w; };
struct alignas(8)  uint2     { unsigned x, y; };
struct alignas(16) uint4     { unsigned x, y, z, w; };
struct alignas(8)  float2    { float x, y; };
struct             float3    { float x, y, z; };
struct alignas(16) float4    { float x, y, z, w; };
struct alignas(16) double2   { double x, y; };
struct alignas(16) longlong2 { long long x, y; };
// clang-format on

inline char4 make_char4(signed char x, signed char y, signed char z, signed char w) {
    return { x, y, z, w };
}
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) {
    return { x, y, z, w };
}
inline short2 make_short2(short x, short y) {
    return { x, y };
}
inline int2 make_int2(int x, int y) {
    return { x, y };
}
inline int3 make_int3(int x, int y, int z) {
    return { x, y, z };
}
inline int4 make_int4(int x, int y, int z, int w) {
    return { x, y, z, w };
}
inline uint2 make_uint2(unsigned x, unsigned y) {
    return { x, y };
}
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) {
    return { x, y, z };
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
    return { x, y, z, w };
}
inline float2 make_float2(float x, float y) {
    return { x, y };
}
inline float3 make_float3(float x, float y, float z) {
    return { x, y, z };
}
inline float4 make_float4(float x, float y, float z, float w) {
    return { x, y, z, w };
}
inline double2 make_double2(double x, double y) {
    return { x, y };
}

inline float2 __half22float2(__half2 h) {
    return { __half2float(h.x), __half2float(h.y) };
}

namespace wsp::host_target {

// where a built-in was called, for the error messages (and to tell __syncthreads sites apart);
// filled at the call site through the default arguments
struct Site {
    const char *          file;
    unsigned              line;
    static constexpr Site here(const char * f = __builtin_FILE(), unsigned l = __builtin_LINE()) { return { f, l }; }
};

// what threadIdx, blockIdx, blockDim and gridDim read
struct Builtins {
    uint3 thread_idx;
    uint3 block_idx;
    dim3  block_dim;
    dim3  grid_dim;
};

namespace detail {
// The running fiber's built-ins, set by the block scheduler before each resume. __thread rather
// than thread_local: a plain pointer needs no TLS wrapper call across the shared library.
extern __thread const Builtins * current_builtins;
} // namespace detail

// The current block's dynamic shared memory (the launch's dynamic_shared bytes, 16-byte aligned),
// fresh for each block and filled with 0xff bytes, a NaN for float and half, so that a read of
// data no thread wrote shows. The vendor header maps `extern __shared__` onto it.
void * dynamic_shared_memory();

// the collectives of a warp (device_warp.cpp)
enum class WarpOp : uint8_t { sync, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all, mma };

// one lane's part in a warp collective: it names `mask` (which must name it), gives `in` and
// receives `out` (`size` bytes each) once every lane of the mask has arrived; `arg` is the source
// lane, delta or lane mask of a shuffle, `width` its segment
void warp_collective(WarpOp op, wsp_lane_mask_t mask, int arg, int width, size_t size, const void * in, void * out,
                     Site site);

// the lanes of the caller's warp that have not exited (CUDA: those executing now, convergence
// aside; here every lane that is still alive)
wsp_lane_mask_t active_mask();

void              syncthreads(Site site);
[[noreturn]] void trap(Site site);

// Note [mma emulation]: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 with d as C and D, a
// warp collective of all 32 lanes (not available with 64-lane warps: reported). Each lane gives
// its fragments in the PTX ISA layout: with g = lane / 4 and t = lane % 4, a[0..3] hold A(g,
// 2t..2t+1), A(g+8, 2t..2t+1), A(g, 2t+8..2t+9), A(g+8, 2t+8..2t+9); b0 holds B(2t..2t+1, g), b1
// B(2t+8..2t+9, g); d[0..3] hold D(g, 2t), D(g, 2t+1), D(g+8, 2t), D(g+8, 2t+1); the lower half of
// each 32-bit word is the lower index. The matrices are assembled from the lanes' fragments and
// every lane gets its D elements, so a fragment in the wrong place gives a wrong D, as on a GPU.
void mma_m16n8k16_f32_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Site site = Site::here());

} // namespace wsp::host_target

// ---- index built-ins
#define threadIdx (::wsp::host_target::detail::current_builtins->thread_idx)
#define blockIdx  (::wsp::host_target::detail::current_builtins->block_idx)
#define blockDim  (::wsp::host_target::detail::current_builtins->block_dim)
#define gridDim   (::wsp::host_target::detail::current_builtins->grid_dim)

// a constant, not a macro: cudaDeviceProp has a field of that name
constexpr int warpSize = WSP_HOST_WARP_SIZE;

// ---- synchronisation
inline void __syncthreads(wsp::host_target::Site site = wsp::host_target::Site::here()) {
    wsp::host_target::syncthreads(site);
}

inline void __syncwarp(wsp_lane_mask_t        mask = WSP_GPU_FULL_MASK,
                       wsp::host_target::Site site = wsp::host_target::Site::here()) {
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::sync, mask, 0, WSP_HOST_WARP_SIZE, 0, nullptr, nullptr,
                                      site);
}

// Fibers of a block share an OS thread and switch only inside the built-ins, so ordering within
// a block needs the compiler not to move accesses; across blocks (OS threads) a real fence.
inline void __threadfence_block() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
inline void __threadfence_system() {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

[[noreturn]] inline void __trap(wsp::host_target::Site site = wsp::host_target::Site::here()) {
    wsp::host_target::trap(site);
}

// ---- warp collectives
template <typename T>
inline T __shfl_sync(wsp_lane_mask_t mask, T var, int src_lane, int width = WSP_HOST_WARP_SIZE,
                     wsp::host_target::Site site = wsp::host_target::Site::here()) {
    static_assert(std::is_trivially_copyable_v<T>, "shuffled values are copied as bytes");
    T out = var;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::shfl_idx, mask, src_lane, width, sizeof(T), &var, &out,
                                      site);
    return out;
}

template <typename T>
inline T __shfl_up_sync(wsp_lane_mask_t mask, T var, unsigned delta, int width = WSP_HOST_WARP_SIZE,
                        wsp::host_target::Site site = wsp::host_target::Site::here()) {
    static_assert(std::is_trivially_copyable_v<T>, "shuffled values are copied as bytes");
    T out = var;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::shfl_up, mask, (int) delta, width, sizeof(T), &var,
                                      &out, site);
    return out;
}

template <typename T>
inline T __shfl_down_sync(wsp_lane_mask_t mask, T var, unsigned delta, int width = WSP_HOST_WARP_SIZE,
                          wsp::host_target::Site site = wsp::host_target::Site::here()) {
    static_assert(std::is_trivially_copyable_v<T>, "shuffled values are copied as bytes");
    T out = var;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::shfl_down, mask, (int) delta, width, sizeof(T), &var,
                                      &out, site);
    return out;
}

template <typename T>
inline T __shfl_xor_sync(wsp_lane_mask_t mask, T var, int lane_mask, int width = WSP_HOST_WARP_SIZE,
                         wsp::host_target::Site site = wsp::host_target::Site::here()) {
    static_assert(std::is_trivially_copyable_v<T>, "shuffled values are copied as bytes");
    T out = var;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::shfl_xor, mask, lane_mask, width, sizeof(T), &var, &out,
                                      site);
    return out;
}

inline wsp_lane_mask_t __ballot_sync(wsp_lane_mask_t mask, int predicate,
                                     wsp::host_target::Site site = wsp::host_target::Site::here()) {
    const int       in  = predicate != 0;
    wsp_lane_mask_t out = 0;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::ballot, mask, 0, WSP_HOST_WARP_SIZE, sizeof(in), &in,
                                      &out, site);
    return out;
}

inline int __any_sync(wsp_lane_mask_t mask, int predicate,
                      wsp::host_target::Site site = wsp::host_target::Site::here()) {
    const int in = predicate != 0;
    int       out;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::any, mask, 0, WSP_HOST_WARP_SIZE, sizeof(in), &in, &out,
                                      site);
    return out;
}

inline int __all_sync(wsp_lane_mask_t mask, int predicate,
                      wsp::host_target::Site site = wsp::host_target::Site::here()) {
    const int in = predicate != 0;
    int       out;
    wsp::host_target::warp_collective(wsp::host_target::WarpOp::all, mask, 0, WSP_HOST_WARP_SIZE, sizeof(in), &in, &out,
                                      site);
    return out;
}

inline wsp_lane_mask_t __activemask() {
    return wsp::host_target::active_mask();
}

// ---- atomics: blocks run on different OS threads, so these are real atomics. Relaxed, as
// CUDA's are; __threadfence orders around them.
namespace wsp::host_target::detail {

template <typename T, typename F>
inline T atomic_update(T * p, F f) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

// float and double updates run on the bits, so a NaN or -0 is stored exactly as computed
template <typename F, typename U, typename Op>
inline F atomic_update_float(F * p, Op op) {
    static_assert(sizeof(F) == sizeof(U));
    const U old_bits = atomic_update(reinterpret_cast<U *>(p), [&](U bits) {
        F v;
        std::memcpy(&v, &bits, sizeof(v));
        v = op(v);
        U r;
        std::memcpy(&r, &v, sizeof(r));
        return r;
    });
    F       old;
    std::memcpy(&old, &old_bits, sizeof(old));
    return old;
}

} // namespace wsp::host_target::detail

#define WSP_HOST_ATOMIC_INTEGER(T)                                                              \
    inline T atomicAdd(T * p, T v) {                                                            \
        return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);                                      \
    }                                                                                           \
    inline T atomicSub(T * p, T v) {                                                            \
        return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED);                                      \
    }                                                                                           \
    inline T atomicAnd(T * p, T v) {                                                            \
        return __atomic_fetch_and(p, v, __ATOMIC_RELAXED);                                      \
    }                                                                                           \
    inline T atomicOr(T * p, T v) {                                                             \
        return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);                                       \
    }                                                                                           \
    inline T atomicXor(T * p, T v) {                                                            \
        return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED);                                      \
    }                                                                                           \
    inline T atomicExch(T * p, T v) {                                                           \
        return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);                                     \
    }                                                                                           \
    inline T atomicMax(T * p, T v) {                                                            \
        return wsp::host_target::detail::atomic_update(p, [v](T o) { return o < v ? v : o; });  \
    }                                                                                           \
    inline T atomicMin(T * p, T v) {                                                            \
        return wsp::host_target::detail::atomic_update(p, [v](T o) { return v < o ? v : o; });  \
    }                                                                                           \
    inline T atomicCAS(T * p, T compare, T v) {                                                 \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
        return compare;                                                                         \
    }

WSP_HOST_ATOMIC_INTEGER(int)
WSP_HOST_ATOMIC_INTEGER(unsigned)
WSP_HOST_ATOMIC_INTEGER(unsigned long long)
WSP_HOST_ATOMIC_INTEGER(long long)

#undef WSP_HOST_ATOMIC_INTEGER

inline float atomicAdd(float * p, float v) {
    return wsp::host_target::detail::atomic_update_float<float, uint32_t>(p, [v](float o) { return o + v; });
}

inline double atomicAdd(double * p, double v) {
    return wsp::host_target::detail::atomic_update_float<double, uint64_t>(p, [v](double o) { return o + v; });
}

inline float atomicExch(float * p, float v) {
    return wsp::host_target::detail::atomic_update_float<float, uint32_t>(p, [v](float) { return v; });
}

// CUDA's wrapping counters: inc returns to 0 past `v`, dec returns to `v` at 0 or above it
inline unsigned atomicInc(unsigned * p, unsigned v) {
    return wsp::host_target::detail::atomic_update(p, [v](unsigned o) { return o >= v ? 0u : o + 1; });
}

inline unsigned atomicDec(unsigned * p, unsigned v) {
    return wsp::host_target::detail::atomic_update(p, [v](unsigned o) { return (o == 0 || o > v) ? v : o - 1; });
}

// ---- math intrinsics
namespace wsp::host_target::detail {

// Keeps the compiler from contracting the value's operation with a neighbour into an FMA
// (GCC contracts across inlined calls with -ffp-contract=fast, its default): the value must
// exist, rounded, in a register. The _rn intrinsics are exactly rounded single operations.
inline void opaque(float & v) {
#if defined(__x86_64__) || defined(__i386__)
    asm("" : "+x"(v));
#elif defined(__aarch64__)
    asm("" : "+w"(v));
#else
    volatile float t = v;
    v                = t;
#endif
}

} // namespace wsp::host_target::detail

inline float __fadd_rn(float a, float b) {
    wsp::host_target::detail::opaque(a);
    wsp::host_target::detail::opaque(b);
    float r = a + b;
    wsp::host_target::detail::opaque(r);
    return r;
}

inline float __fsub_rn(float a, float b) {
    wsp::host_target::detail::opaque(a);
    wsp::host_target::detail::opaque(b);
    float r = a - b;
    wsp::host_target::detail::opaque(r);
    return r;
}

inline float __fmul_rn(float a, float b) {
    wsp::host_target::detail::opaque(a);
    wsp::host_target::detail::opaque(b);
    float r = a * b;
    wsp::host_target::detail::opaque(r);
    return r;
}

inline float __fdiv_rn(float a, float b) {
    wsp::host_target::detail::opaque(a);
    wsp::host_target::detail::opaque(b);
    float r = a / b;
    wsp::host_target::detail::opaque(r);
    return r;
}

inline float __fmaf_rn(float a, float b, float c) {
    return std::fma(a, b, c);
}

// the fast approximations of the GPU are given their exact counterparts here
inline float __expf(float x) {
    return std::exp(x);
}

inline float __logf(float x) {
    return std::log(x);
}

inline float __fdividef(float a, float b) {
    return a / b;
}

inline float rsqrtf(float x) {
    return 1.0f / std::sqrt(x);
}

inline float __saturatef(float x) {
    return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); // NaN -> 0
}

// cvt.rni.s32.f32: nearest even, saturating, NaN -> 0
inline int __float2int_rn(float x) {
    if (std::isnan(x)) {
        return 0;
    }
    if (x >= 2147483648.0f) {
        return INT_MAX;
    }
    if (x <= -2147483648.0f) {
        return INT_MIN;
    }
    return (int) std::nearbyint(x);
}

inline int __float2int_rz(float x) {
    if (std::isnan(x)) {
        return 0;
    }
    if (x >= 2147483648.0f) {
        return INT_MAX;
    }
    if (x <= -2147483648.0f) {
        return INT_MIN;
    }
    return (int) x;
}

// bit casts, through the project's own (core/fp16.h)
inline int __float_as_int(float x) {
    return (int) wsp::f32_bits(x);
}

inline unsigned __float_as_uint(float x) {
    return wsp::f32_bits(x);
}

inline float __int_as_float(int x) {
    return wsp::bits_f32((uint32_t) x);
}

inline float __uint_as_float(unsigned x) {
    return wsp::bits_f32(x);
}

// four signed (unsigned) bytes of a times those of b, plus c
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i) {
        c += (int) (int8_t) (a >> (8 * i)) * (int) (int8_t) (b >> (8 * i));
    }
    return c;
}

inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
    for (int i = 0; i < 4; ++i) {
        c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
    }
    return c;
}

// PTX prmt.b32, default mode: bytes 0-3 of x then 4-7 of y; nibble n of s picks result byte n
// with its 3 low bits, and its high bit replicates the picked byte's sign. (CUDA documents only
// the 3 low bits for __byte_perm; the hardware instruction behind it is prmt.)
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t bytes = ((uint64_t) y << 32) | x;
    unsigned       r     = 0;
    for (int n = 0; n < 4; ++n) {
        const unsigned sel = (s >> (4 * n)) & 0xfu;
        unsigned       b   = (unsigned) (bytes >> (8 * (sel & 7u))) & 0xffu;
        if (sel & 8u) {
            b = (b & 0x80u) ? 0xffu : 0u;
        }
        r |= b << (8 * n);
    }
    return r;
}

inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}

inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}

inline int __clz(int x) {
    return x == 0 ? 32 : __builtin_clz((unsigned) x);
}

inline int __clzll(long long x) {
    return x == 0 ? 64 : __builtin_clzll((unsigned long long) x);
}

inline int __ffs(int x) {
    return __builtin_ffs(x);
}

inline int __ffsll(long long x) {
    return __builtin_ffsll(x);
}

template <typename T>
inline T __ldg(const T * p) {
    return *p;
}

// CUDA's global min and max, found unqualified from kernels in any namespace: the usual
// arithmetic conversions, and fmin/fmax (NaN-ignoring) for floating point
template <typename A, typename B, typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
    using C = std::common_type_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) {
        return std::fmin((C) a, (C) b);
    } else {
        return (C) b < (C) a ? (C) b : (C) a;
    }
}

template <typename A, typename B, typename = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
    using C = std::common_type_t<A, B>;
    if constexpr (std::is_floating_point_v<C>) {
        return std::fmax((C) a, (C) b);
    } else {
        return (C) a < (C) b ? (C) b : (C) a;
    }
}
