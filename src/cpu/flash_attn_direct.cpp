// Few-query path of the flash attention (decode steps, nq <= DIRECT_MAX_Q): K and V rows are read
// in their storage type and converted in registers, so each element is touched once per block
// instead of being written to and read back from a converted copy. Q.K^T is one dot product per
// (query, key) with the vector lanes along D; P.V is the shared register tile.

#include "flash_attn_simd.h"

namespace wsp::cpu::fa {

using namespace simd;

namespace {

template <class L, int R>
void qk_direct_rows(const float * q, int64_t ldq, const char * k0, size_t nb1, int64_t nk, int64_t D, float * s) {
    const int64_t full = D / LANES * LANES;
    const int     rest = (int) (D - full);
    for (int64_t j = 0; j < nk; ++j) {
        const char * row = k0 + j * nb1;
        VecF         acc[R];
        for (int r = 0; r < R; ++r) {
            acc[r] = vzero();
        }
        for (int64_t d = 0; d < full; d += LANES) {
            const VecF kv = L::load(row + (size_t) d * L::SIZE);
            for (int r = 0; r < R; ++r) {
                acc[r] = vfma(vload(q + r * ldq + d), kv, acc[r]);
            }
        }
        if (rest > 0) {
            const VecF kv = L::load_n(row + (size_t) full * L::SIZE, rest);
            for (int r = 0; r < R; ++r) {
                acc[r] = vfma(vload_n(q + r * ldq + full, rest), kv, acc[r]);
            }
        }
        for (int r = 0; r < R; ++r) {
            s[r * BLOCK_K + j] = vhsum(acc[r]);
        }
    }
}

// qk_direct_rows for nq (1..DIRECT_MAX_Q) chosen at run time
template <class L, int R = DIRECT_MAX_Q>
void qk_direct_any(int64_t nq, const float * q, int64_t ldq, const char * k0, size_t nb1, int64_t nk, int64_t D,
                   float * s) {
    if constexpr (R > 1) {
        if (nq < R) {
            qk_direct_any<L, R - 1>(nq, q, ldq, k0, nb1, nk, D, s);
            return;
        }
    }
    qk_direct_rows<L, R>(q, ldq, k0, nb1, nk, D, s);
}

} // namespace

void qk_direct(wsp_ggml_type type, const float * q, int64_t ldq, int64_t nq, const char * k0, size_t nb1, int64_t nk,
               int64_t D, float * s) {
    switch (type) {
        case WSP_GGML_TYPE_F16: qk_direct_any<Rows<WSP_GGML_TYPE_F16>>(nq, q, ldq, k0, nb1, nk, D, s); break;
        case WSP_GGML_TYPE_BF16: qk_direct_any<Rows<WSP_GGML_TYPE_BF16>>(nq, q, ldq, k0, nb1, nk, D, s); break;
        default: qk_direct_any<Rows<WSP_GGML_TYPE_F32>>(nq, q, ldq, k0, nb1, nk, D, s); break;
    }
}

void pv_direct(wsp_ggml_type type, const float * p, int64_t nq, const char * v0, size_t nb1, int64_t nk, int64_t Dv,
               const float * alpha, float * o, int64_t ldo) {
    switch (type) {
        case WSP_GGML_TYPE_F16: pv_rows<Rows<WSP_GGML_TYPE_F16>>(p, nq, v0, nb1, nk, Dv, alpha, o, ldo); break;
        case WSP_GGML_TYPE_BF16: pv_rows<Rows<WSP_GGML_TYPE_BF16>>(p, nq, v0, nb1, nk, Dv, alpha, o, ldo); break;
        default: pv_rows<Rows<WSP_GGML_TYPE_F32>>(p, nq, v0, nb1, nk, Dv, alpha, o, ldo); break;
    }
}

} // namespace wsp::cpu::fa
