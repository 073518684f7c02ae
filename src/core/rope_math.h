#pragma once

// The math of ROPE shared by the CPU kernel (src/cpu/rope.cpp) and the CUDA kernel
// (src/cuda/kernels/rope.cu), so that both compute the same angles the same way: the op's
// parameters decoded once on the host, the rotation angle of pair i of token i2 (in double), and
// which two elements of a row pair i rotates. Include after the GPU vendor header in GPU sources.

#include "ggml.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__host__)
#    define WSP_ROPE_FN __host__ __device__ inline
#else
#    define WSP_ROPE_FN inline
#endif

namespace wsp::rope {

struct Params {
    int     n_dims;
    int     n_pairs;   // rotated pairs per row
    int64_t n_rotated; // elements [0, n_rotated) are rotated, the rest copied
    bool    multi;     // positions per section (MROPE, VISION)
    bool    vision;    // pairs (i, i + n_dims), exponents restart at each section
    bool    neox;      // pairs (i, i + n_dims / 2)
    float   freq_base, freq_scale, ext_factor, attn_factor;
    float   corr[2]; // YaRN's ramp between these pair indices
    int     sections[4];
};

inline Params params_of(const wsp_ggml_tensor * t) {
    Params p;
    std::memset(&p, 0, sizeof(p)); // the padding too: kernel arguments are copied byte for byte
    const int32_t * ip = t->op_params;
    p.n_dims           = ip[1];
    const int mode     = ip[2];
    p.multi            = (mode & WSP_GGML_ROPE_TYPE_MROPE) != 0;
    p.vision           = mode == WSP_GGML_ROPE_TYPE_VISION;
    p.neox             = !p.vision && (p.multi || (mode & WSP_GGML_ROPE_TYPE_NEOX) != 0);
    p.n_pairs          = p.vision ? p.n_dims : p.n_dims / 2;
    p.n_rotated        = p.vision ? 2 * (int64_t) p.n_dims : p.n_dims;
    float f[6];
    std::memcpy(f, ip + 5, sizeof(f));
    p.freq_base   = f[0];
    p.freq_scale  = f[1];
    p.ext_factor  = f[2];
    p.attn_factor = f[3];
    wsp_ggml_rope_yarn_corr_dims(p.n_dims, ip[4], f[0], f[4], f[5], p.corr);
    std::memcpy(p.sections, ip + 11, sizeof(p.sections));
    return p;
}

// shapes and layouts the kernels handle: a and dst alike, I32 positions (4 per token for the
// multi-section modes), F32 frequency factors for every pair, both contiguous
inline bool supported_shape(const wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * a      = dst->src[0];
    const wsp_ggml_tensor * b      = dst->src[1];
    const wsp_ggml_tensor * c      = dst->src[2];
    const Params            p      = params_of(dst);
    const int               n_sect = p.sections[0] + p.sections[1] + p.sections[2] + p.sections[3];
    if (!wsp_ggml_are_same_shape(a, dst) || b == nullptr || b->type != WSP_GGML_TYPE_I32 || b->nb[0] != 4 ||
        b->ne[0] != (p.multi ? 4 : 1) * a->ne[2] || p.n_dims <= 0 || p.n_dims % 2 != 0 || p.n_rotated > a->ne[0] ||
        (dst->op_params[2] & 1) != 0) {
        return false;
    }
    if (p.multi && (n_sect <= 0 || p.sections[0] < 0 || p.sections[1] < 0 || p.sections[2] < 0 || p.sections[3] < 0)) {
        return false;
    }
    if (p.vision && p.n_rotated != a->ne[0]) {
        return false;
    }
    return c == nullptr || (c->type == WSP_GGML_TYPE_F32 && c->nb[0] == 4 && c->ne[0] >= p.n_pairs);
}

// the two elements pair i rotates
WSP_ROPE_FN void pair_of(const Params & p, int i, int64_t & j0, int64_t & j1) {
    if (p.vision) {
        j0 = i;
        j1 = i + p.n_dims;
    } else if (p.neox) {
        j0 = i;
        j1 = i + p.n_dims / 2;
    } else {
        j0 = 2 * (int64_t) i;
        j1 = j0 + 1;
    }
}

// cos and sin of pair i's angle for token i2 of ne2 tokens, times YaRN's mscale
WSP_ROPE_FN void angle(const Params & p, const int32_t * pos, int64_t ne2, int64_t i2, int i, const float * ff,
                       double & c, double & s) {
    int64_t e   = i;  // the exponent's index
    int64_t idx = i2; // the position's index
    if (p.multi) {
        const int n_sect = p.sections[0] + p.sections[1] + p.sections[2] + p.sections[3];
        const int sector = i % n_sect;
        int       sec = 0, start = 0;
        while (sec < 3 && sector >= start + p.sections[sec]) {
            start += p.sections[sec];
            ++sec;
        }
        idx = i2 + ne2 * sec;
        if (p.vision) {
            e = sector - start;
        }
    }
    double extrap = (double) pos[idx] * ::pow((double) p.freq_base, -2.0 * (double) e / (double) p.n_dims);
    if (ff != nullptr) {
        extrap /= (double) ff[i];
    }
    const double interp = (double) p.freq_scale * extrap;
    double       theta = interp, mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        const double span = (double) p.corr[1] - (double) p.corr[0];
        const double y    = ((double) i - (double) p.corr[0]) / (span > 0.001 ? span : 0.001);
        const double ramp = 1.0 - (y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y));
        const double mix  = ramp * (double) p.ext_factor;
        theta             = interp * (1.0 - mix) + extrap * mix;
        mscale *= 1.0 + 0.1 * ::log(1.0 / (double) p.freq_scale);
    }
    c = ::cos(theta) * mscale;
    s = ::sin(theta) * mscale;
}

} // namespace wsp::rope
