#pragma once

// __half, __half2 and __nv_bfloat16 of the host target: 16-bit storage types (kernels keep them in
// quantized block structs and reinterpret memory as them, so they are 2 bytes and trivially
// copyable), converted by the project's own fp16.h, round to nearest even, so that the host
// target and the CPU backend agree bit for bit. No CUDA header is involved.

#include "../core/fp16.h"

#include <cstdint>
#include <type_traits>

struct alignas(2) __half {
    uint16_t bits_;

    __half() = default;
    __half(float f) : bits_(wsp::fp32_to_fp16(f)) {}
    operator float() const { return wsp::fp16_to_fp32(bits_); }
};

struct alignas(4) __half2 {
    __half x, y;
};

struct alignas(2) __nv_bfloat16 {
    uint16_t bits_;

    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : bits_(wsp::fp32_to_bf16(f)) {}
    operator float() const { return wsp::bf16_to_fp32(bits_); }
};

static_assert(sizeof(__half) == 2 && std::is_trivially_copyable_v<__half> && std::is_standard_layout_v<__half>);
static_assert(sizeof(__half2) == 4 && std::is_trivially_copyable_v<__half2>);
static_assert(sizeof(__nv_bfloat16) == 2 && std::is_trivially_copyable_v<__nv_bfloat16>);

inline __half __ushort_as_half(unsigned short u) {
    __half h;
    h.bits_ = u;
    return h;
}

inline unsigned short __half_as_ushort(__half h) {
    return h.bits_;
}

inline __half __short_as_half(short s) {
    return __ushort_as_half((unsigned short) s);
}

inline short __half_as_short(__half h) {
    return (short) h.bits_;
}

inline __half __float2half_rn(float f) {
    return __ushort_as_half(wsp::fp32_to_fp16(f));
}

// CUDA's __float2half rounds to nearest even as well
inline __half __float2half(float f) {
    return __float2half_rn(f);
}

inline float __half2float(__half h) {
    return wsp::fp16_to_fp32(h.bits_);
}

// Half arithmetic is done in float and rounded once: float's 24-bit significand is at least
// 2 * 11 + 2 bits, so for +, -, * and / the double rounding gives the correctly rounded half.
inline __half __hadd(__half a, __half b) {
    return __float2half_rn(__half2float(a) + __half2float(b));
}

inline __half __hsub(__half a, __half b) {
    return __float2half_rn(__half2float(a) - __half2float(b));
}

inline __half __hmul(__half a, __half b) {
    return __float2half_rn(__half2float(a) * __half2float(b));
}

inline __half __hdiv(__half a, __half b) {
    return __float2half_rn(__half2float(a) / __half2float(b));
}

inline __half __hneg(__half a) {
    return __ushort_as_half((unsigned short) (a.bits_ ^ 0x8000u));
}

inline bool __hisnan(__half a) {
    return (a.bits_ & 0x7fffu) > 0x7c00u;
}

inline bool __heq(__half a, __half b) {
    return __half2float(a) == __half2float(b);
}

inline bool __hlt(__half a, __half b) {
    return __half2float(a) < __half2float(b);
}

inline bool __hgt(__half a, __half b) {
    return __half2float(a) > __half2float(b);
}

inline __half2 __halves2half2(__half lo, __half hi) {
    return __half2{ lo, hi };
}

inline __half2 __floats2half2_rn(float lo, float hi) {
    return __half2{ __float2half_rn(lo), __float2half_rn(hi) };
}

inline __half2 __float2half2_rn(float f) {
    return __floats2half2_rn(f, f);
}

inline float __low2float(__half2 h) {
    return __half2float(h.x);
}

inline float __high2float(__half2 h) {
    return __half2float(h.y);
}

inline __half2 __hadd2(__half2 a, __half2 b) {
    return __half2{ __hadd(a.x, b.x), __hadd(a.y, b.y) };
}

inline __half2 __hmul2(__half2 a, __half2 b) {
    return __half2{ __hmul(a.x, b.x), __hmul(a.y, b.y) };
}

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __nv_bfloat16 b;
    b.bits_ = u;
    return b;
}

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) {
    return b.bits_;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    return __ushort_as_bfloat16(wsp::fp32_to_bf16(f));
}

inline __nv_bfloat16 __float2bfloat16(float f) {
    return __float2bfloat16_rn(f);
}

inline float __bfloat162float(__nv_bfloat16 b) {
    return wsp::bf16_to_fp32(b.bits_);
}
