// Builders of rotary position embeddings (OP_ROPE) and YaRN's correction dims. op_params in
// upstream's layout: i32 n_past (0), n_dims, mode, n_ctx (0), n_ctx_orig, then f32 freq_base,
// freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, then i32 sections[4] (multi-section
// modes; zeros otherwise). src: a, positions b (I32), optional frequency factors c (F32).

#include "impl.h"

#include <algorithm>
#include <cmath>

namespace {

struct RopeArgs {
    int   n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
};

wsp_ggml_tensor * rope_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b, wsp_ggml_tensor * c,
                            const RopeArgs & r, const int * sections, bool inplace, const char * op) {
    WSP_OP_CHECK((r.mode & 1) == 0, op, a, b, c);
    WSP_OP_CHECK(b->type == WSP_GGML_TYPE_I32 && wsp_ggml_is_vector(b), op, a, b, c);
    WSP_OP_CHECK(r.n_dims > 0 && r.n_dims % 2 == 0 && r.n_dims <= a->ne[0], op, a, b, c);
    const bool multi = (r.mode & WSP_GGML_ROPE_TYPE_MROPE) != 0;
    if (multi) {
        // four positions per token: time, height, width and an extra one
        WSP_OP_CHECK(a->ne[2] * 4 == b->ne[0], op, a, b, c);
    } else {
        WSP_OP_CHECK(a->ne[2] == b->ne[0], op, a, b, c);
    }
    if (r.mode == WSP_GGML_ROPE_TYPE_VISION) {
        // vision pairs element i with i + n_dims: n_dims is half the row
        WSP_OP_CHECK(2 * r.n_dims == a->ne[0], op, a, b, c);
    }
    WSP_OP_CHECK(!multi || sections != nullptr, op, a, b, c);
    if (c != nullptr) {
        // one factor per rotated pair (vision rotates n_dims pairs)
        const int64_t n_pairs = r.mode == WSP_GGML_ROPE_TYPE_VISION ? r.n_dims : r.n_dims / 2;
        WSP_OP_CHECK(c->type == WSP_GGML_TYPE_F32 && c->ne[0] >= n_pairs, op, a, b, c);
    }
    wsp_ggml_tensor * t          = inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
    int32_t           params[15] = { 0, r.n_dims, r.mode, 0, r.n_ctx_orig };
    const float       f[6]       = { r.freq_base, r.freq_scale, r.ext_factor, r.attn_factor, r.beta_fast, r.beta_slow };
    std::memcpy(params + 5, f, sizeof(f));
    if (multi && sections != nullptr) {
        std::memcpy(params + 11, sections, 4 * sizeof(int32_t));
    }
    wsp::set_op_params(t, params, sizeof(params));
    t->op     = WSP_GGML_OP_ROPE;
    t->src[0] = a;
    t->src[1] = b;
    t->src[2] = c;
    return t;
}

// the dim at which the wavelength of dim i spans n_rot rotations over n_ctx_orig positions
float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float) n_dims * std::log((float) n_ctx_orig / (n_rot * 2.0f * (float) M_PI)) / (2.0f * std::log(base));
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_rope(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                       struct wsp_ggml_tensor * b, int n_dims, int mode) {
    const RopeArgs r = { n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f };
    return rope_impl(ctx, a, b, nullptr, r, nullptr, false, "wsp_ggml_rope");
}

struct wsp_ggml_tensor * wsp_ggml_rope_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                               struct wsp_ggml_tensor * b, int n_dims, int mode) {
    const RopeArgs r = { n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f };
    return rope_impl(ctx, a, b, nullptr, r, nullptr, true, "wsp_ggml_rope_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_rope_ext(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                           struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * c, int n_dims, int mode,
                                           int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                           float attn_factor, float beta_fast, float beta_slow) {
    const RopeArgs r = {
        n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
    };
    return rope_impl(ctx, a, b, c, r, nullptr, false, "wsp_ggml_rope_ext");
}

struct wsp_ggml_tensor * wsp_ggml_rope_ext_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                   struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * c, int n_dims,
                                                   int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                                   float ext_factor, float attn_factor, float beta_fast,
                                                   float beta_slow) {
    const RopeArgs r = {
        n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
    };
    return rope_impl(ctx, a, b, c, r, nullptr, true, "wsp_ggml_rope_ext_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_rope_multi(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * c, int n_dims,
                                             int sections[4], int mode, int n_ctx_orig, float freq_base,
                                             float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                             float beta_slow) {
    const char * op = "wsp_ggml_rope_multi";
    WSP_OP_CHECK((mode & WSP_GGML_ROPE_TYPE_MROPE) != 0, op, a, b, c);
    WSP_OP_CHECK(sections != nullptr && sections[0] >= 0 && sections[1] >= 0 && sections[2] >= 0 && sections[3] >= 0 &&
                     sections[0] + sections[1] + sections[2] + sections[3] > 0,
                 op, a, b, c);
    const RopeArgs r = {
        n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
    };
    return rope_impl(ctx, a, b, c, r, sections, false, op);
}

struct wsp_ggml_tensor * wsp_ggml_rope_custom(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b, int n_dims, int mode, int n_ctx_orig,
                                              float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                              float beta_fast, float beta_slow) {
    const RopeArgs r = {
        n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
    };
    return rope_impl(ctx, a, b, nullptr, r, nullptr, false, "wsp_ggml_rope_custom");
}

struct wsp_ggml_tensor * wsp_ggml_rope_custom_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                      struct wsp_ggml_tensor * b, int n_dims, int mode, int n_ctx_orig,
                                                      float freq_base, float freq_scale, float ext_factor,
                                                      float attn_factor, float beta_fast, float beta_slow) {
    const RopeArgs r = {
        n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow
    };
    return rope_impl(ctx, a, b, nullptr, r, nullptr, true, "wsp_ggml_rope_custom_inplace");
}

// YaRN blends interpolation and extrapolation between the dims whose wavelengths make beta_fast
// and beta_slow rotations over the original context
void wsp_ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                                  float dims[2]) {
    const float start = std::floor(corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    const float end   = std::ceil(corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0]           = std::max(0.0f, start);
    dims[1]           = std::min((float) (n_dims - 1), end);
}

} // extern "C"
