#pragma once

// Which MUL_MAT path a node takes: the packed GEMM (exact weights, F32 accumulation) for batches
// of many rows, the dot-product kernels for small batches. Chosen from the weight type and the
// shape alone, never the thread count. Header-only and free of internal dependencies so that
// tests can state which numerics a shape gets.

#include "ggml.h"

#include <cstdint>

namespace wsp::cpu::mm {

enum class Path {
    gemm,      // packed F32 panels, register-blocked micro-kernel
    dot_float, // few rows, F32 accumulation of exact weights and activations
    dot_q8,    // few rows, activations quantized to 8 bits, integer block dot products
};

// the K-quants, whose dot_q8 nodes quantize the activations to Q8_K (mul_mat_kq.cpp)
inline bool is_k_quant(wsp_ggml_type t) {
    switch (t) {
        case WSP_GGML_TYPE_Q2_K:
        case WSP_GGML_TYPE_Q3_K:
        case WSP_GGML_TYPE_Q4_K:
        case WSP_GGML_TYPE_Q5_K:
        case WSP_GGML_TYPE_Q6_K: return true;
        default: return false;
    }
}

// the grid i-quants, whose dot_q8 nodes quantize the activations to Q8_K too (mul_mat_iq.cpp);
// only where the build has their codebooks do they compute at all
inline bool is_grid_iquant(wsp_ggml_type t) {
    switch (t) {
        case WSP_GGML_TYPE_IQ2_XXS:
        case WSP_GGML_TYPE_IQ2_XS:
        case WSP_GGML_TYPE_IQ2_S:
        case WSP_GGML_TYPE_IQ3_XXS:
        case WSP_GGML_TYPE_IQ3_S:
        case WSP_GGML_TYPE_IQ1_S:
        case WSP_GGML_TYPE_IQ1_M: return true;
        default: return false;
    }
}

// weight types whose small-batch path quantizes the activations to 8 bits
inline bool uses_q8_activations(wsp_ggml_type a_type) {
    switch (a_type) {
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q4_1:
        case WSP_GGML_TYPE_Q5_0:
        case WSP_GGML_TYPE_Q5_1:
        case WSP_GGML_TYPE_Q8_0: return true;
        default: return is_k_quant(a_type) || is_grid_iquant(a_type);
    }
}

// Note [path thresholds]: measured with bench-like runs at K = 1280, N = 5120 on Zen 5 (AVX-512),
// 2 threads, quiet machine, each path forced in turn, best of 3 (GEMM vs dot, GFLOP/s). The dot
// kernels read every weight once per group of b rows and need no packing; the GEMM converts and
// transposes every weight before its fast kernel uses it for all rows, so it wins once there
// are enough rows to pay for that:
//   F32 from 20 rows  (M = 16: 117 vs 129, M = 20: 140 vs 134),
//   F16 from 72       (M = 64: 222 vs 229, M = 80: 246 vs 231),
//   BF16 from 64      (M = 48: 212 vs 220, M = 64: 233 vs 226),
//   Q8_0 from 32      (M = 28: 167 vs 171, M = 32: 172 vs 163),
//   Q4_0 from 48      (M = 44: 145 vs 147, M = 48: 153 vs 149; Q4_1, Q5_0, Q5_1 decode alike).
// The K-quants' dot_q8 kernels (mul_mat_kq.cpp) hold 180-205 at every M while their GEMM, which
// converts through to_float, climbs with M (same setup, 2026-12, dot vs GEMM):
//   Q4_K from 64      (M = 64: 200 vs 203, M = 96: 205 vs 237; Q2_K alike, Q5_K taken as Q4_K),
//   Q6_K from 144     (M = 128: 190 vs 185, M = 160: 190 vs 201; Q3_K taken as Q6_K);
//   at M = 1500 (an encoder) the GEMM gives 314 and 302 against 175 and 161.
// Narrow weights (few rows N, many b rows) fill few NR-wide panels and reuse each packed b panel
// little; there dot_float wins below 32 rows (M = 1500, F32/F16/Q4_0: N = 24 GEMM 73/70/55 vs
// dot_float 76/72/62; N = 32 F32/F16/Q8_0/Q4_0 GEMM 99/95/91/91 vs 79/79/77/77).
//
// Note [numerics by M]: whether the activations are quantized to 8 bits depends on the weight
// type and M only, never on N: a weight split by rows over several devices computes each slice
// with the numerics of the whole. N only picks between the two exact F32 paths.
constexpr int64_t GEMM_MIN_N = 32;

inline int64_t gemm_min_rows(wsp_ggml_type a_type) {
    switch (a_type) {
        case WSP_GGML_TYPE_F32: return 20;
        case WSP_GGML_TYPE_F16: return 72;
        case WSP_GGML_TYPE_BF16: return 64;
        case WSP_GGML_TYPE_Q8_0: return 32;
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q4_1:
        case WSP_GGML_TYPE_Q5_0:
        case WSP_GGML_TYPE_Q5_1: return 48;
        case WSP_GGML_TYPE_Q2_K:
        case WSP_GGML_TYPE_Q4_K:
        case WSP_GGML_TYPE_Q5_K: return 64;
        case WSP_GGML_TYPE_Q3_K:
        case WSP_GGML_TYPE_Q6_K: return 144;
        default: return 20; // other types convert their rows through to_float, then read as F32
    }
}

// Note [paired rows by M]: the dot_q8 path's paired kernels (Note [nibble pairs],
// mul_mat_q8_pairs.cpp) read each b row as 3 K bytes against the general tile's 1.1 K; once a
// tile's rows no longer stay in L1 the tile wins. Measured (2 threads, 192 MiB of weights, two
// rounds interleaved, GFLOP/s tile -> paired): K = 1280 (a row 3.75 KiB): Q5_0 M = 2 110 -> 160,
// 4 142 -> 200, 8 172 -> 212, 16 172 -> 123; Q5_1 / Q4_1 M = 2 +25%, 4 +17%, 8 -4% (their mins
// are one more read per row). K = 5120 (15 KiB a row): M = 2 +5-30%, M = 4 -15 to -30%. So: the
// rows of a node in at most 32 KiB, and at most 8 (Q4_0, Q5_0) or 4 (Q4_1, Q5_1) of them; Q8_0
// at M = 1 alone (Note [Q8_0 pairs]). 0: no paired kernel.
inline int64_t paired_max_rows(wsp_ggml_type a_type, int64_t K) {
    int64_t most = 0;
    switch (a_type) {
        case WSP_GGML_TYPE_Q4_0:
        case WSP_GGML_TYPE_Q5_0: most = 8; break;
        case WSP_GGML_TYPE_Q4_1:
        case WSP_GGML_TYPE_Q5_1: most = 4; break;
        case WSP_GGML_TYPE_Q8_0: return 1;
        default: return 0;
    }
    const int64_t fit = (32 * 1024) / (3 * (K > 0 ? K : 1));
    return fit < 1 ? 1 : fit < most ? fit : most;
}

// N: weight rows (dst ne0), M: b rows per batch (dst ne1)
inline Path choose_path(wsp_ggml_type a_type, int64_t N, int64_t M) {
    if (M >= gemm_min_rows(a_type)) {
        return N >= GEMM_MIN_N ? Path::gemm : Path::dot_float;
    }
    return uses_q8_activations(a_type) ? Path::dot_q8 : Path::dot_float;
}

} // namespace wsp::cpu::mm
