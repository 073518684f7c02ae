#pragma once

// Scalar fp16 / bf16 conversions, round-to-nearest-even, shared by every layer.
// With F16C the hardware instruction is used; the portable path gives identical bits
// (NaN payloads aside), which tests/test_types.cpp checks over all 2^16 halves.

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#    include <immintrin.h>
#endif

namespace wsp {

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
}

inline float bits_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

// portable fp32 -> fp16, round to nearest even, overflow to inf, NaN stays NaN (quiet)
inline uint16_t fp32_to_fp16_soft(float f) {
    const uint32_t x    = f32_bits(f);
    const uint16_t sign = (uint16_t) ((x >> 16) & 0x8000u);
    uint32_t       ax   = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { // inf or nan
        return (uint16_t) (sign | 0x7c00u | (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
    }
    if (ax >= 0x477ff000u) { // >= 65520 rounds to inf
        return (uint16_t) (sign | 0x7c00u);
    }
    if (ax < 0x38800000u) { // below 2^-14: half subnormal (or zero)
        // adding 0.5f puts the half's 2^-24 step in the float's last mantissa bit, and the
        // float addition rounds to nearest even for us
        const float t = bits_f32(ax) + 0.5f;
        return (uint16_t) (sign | (f32_bits(t) - 0x3f000000u));
    }
    const uint32_t odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + odd; // rebias the exponent by -112 and round half to even
    return (uint16_t) (sign | (ax >> 13));
}

inline float fp16_to_fp32_soft(uint16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t exp  = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        const float v = (float) mant * 5.9604644775390625e-08f; // 2^-24
        return bits_f32(sign | f32_bits(v));
    }
    if (exp == 31) {
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
    return (uint16_t) _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    return fp32_to_fp16_soft(f);
#endif
}

inline float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return fp16_to_fp32_soft(h);
#endif
}

// bf16 keeps the upper 16 bits of the float, rounded to nearest even; NaN is kept quiet
inline uint16_t fp32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t) ((u >> 16) | 64u);
    }
    return (uint16_t) ((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

inline float bf16_to_fp32(uint16_t b) {
    return bits_f32((uint32_t) b << 16);
}

} // namespace wsp
