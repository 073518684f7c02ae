#pragma once

// Building blocks of the FLASH_ATTN_EXT kernel (flash_attn.cpp): a block of up to BLOCK_Q queries
// meets a block of BLOCK_K keys. Block path: K is converted to F32 and transposed once per block
// (keys along the vector lanes) so Q.K^T is a rank-1-update micro-kernel, V is converted once so
// P.V is another. Few-query path (decode, nq <= DIRECT_MAX_Q): a conversion would cost more than
// it saves, so K and V rows are read in their storage type. Buffers are F32, strides as named.

#include "vec.h"

#include <cstddef>
#include <cstdint>

namespace wsp::cpu::fa {

constexpr int64_t BLOCK_Q = 128;
constexpr int64_t BLOCK_K = 64; // keys per block; the row stride of Kt and of the score block
// up to this many queries the few-query path is faster than converting K and V blocks
constexpr int DIRECT_MAX_Q = 8;

// floats rounded up to whole vectors, so every row of a buffer starts on a vector boundary
inline int64_t pad_lanes(int64_t n) {
    return (n + simd::LANES - 1) / simd::LANES * simd::LANES;
}

// Kt[d * BLOCK_K + j] = element d of key row j (row j at k0 + j * nb1, elements nb0 apart),
// for j < nk <= BLOCK_K and d < D; columns nk..BLOCK_K-1 are zero. tmp holds D floats.
void load_k_transposed(wsp_ggml_type type, const char * k0, size_t nb0, size_t nb1, int64_t nk, int64_t D, float * kt,
                       float * tmp);

// vb[j * ldv + d] = element d of value row j for j < nk, d < Dv; columns Dv..ldv-1 are zero
void load_v_rows(wsp_ggml_type type, const char * v0, size_t nb0, size_t nb1, int64_t nk, int64_t Dv, int64_t ldv,
                 float * vb);

// s[i * BLOCK_K + j] = sum_d q[i * ldq + d] * kt[d * BLOCK_K + j] for i < nq, j < BLOCK_K
void qk_block(const float * q, int64_t ldq, int64_t nq, const float * kt, int64_t D, float * s);

// o[i * ldv + :] = alpha[i] * o[i * ldv + :] + sum_{j < nk} p[i * BLOCK_K + j] * vb[j * ldv + :]
// for i < nq, over all ldv columns (ldv a multiple of the vector width)
void pv_block(const float * p, int64_t nq, const float * vb, int64_t ldv, int64_t nk, const float * alpha, float * o);

// few-query path, rows contiguous along D (element stride = type size):
// s[i * BLOCK_K + j] = sum_d q[i * ldq + d] * K_j[d], K_j at k0 + j * nb1, i < nq, j < nk
void qk_direct(wsp_ggml_type type, const float * q, int64_t ldq, int64_t nq, const char * k0, size_t nb1, int64_t nk,
               int64_t D, float * s);
// o[i * ldo + :Dv] = alpha[i] * o[...] + sum_{j < nk} p[i * BLOCK_K + j] * V_j[:Dv], V_j at v0 + j * nb1
void pv_direct(wsp_ggml_type type, const float * p, int64_t nq, const char * v0, size_t nb1, int64_t nk, int64_t Dv,
               const float * alpha, float * o, int64_t ldo);

// s[j] += slope * m[j] for j < n, m a contiguous F16/F32/BF16 mask row
void add_mask_row(wsp_ggml_type type, const char * m, float slope, float * s, int64_t n);
// every mask entry of rows 0..nq-1 (rows nb1 apart), columns kb..kb+nk-1 is -inf
bool mask_block_all_inf(wsp_ggml_type type, const char * mask0, size_t nb1, int64_t nq, int64_t kb, int64_t nk);

// One step of the online softmax for one query row: s holds BLOCK_K final scores (-inf where
// masked or past the last key). Turns s into exp(s - m_new), updates the running max m and
// sum l, and returns the factor exp(m_old - m_new) by which earlier accumulations shrink.
float online_softmax_row(float * s, float & m, float & l);

} // namespace wsp::cpu::fa
