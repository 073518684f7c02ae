#pragma once

// The rest of ggml.h's functions, as whisper.rn 0.4.0 declares them: the op builders besides
// those of ggml-ops-core.h (in-place forms, elementwise math, reductions, norms, layout ops,
// rope), then, through ggml-ops-nn.h, the others. Included by ggml.h, inside its extern "C"
// block; include ggml.h, not this file.

#ifndef WSP_GGML_API
#    error "include ggml.h, not ggml-ops.h"
#endif

#define WSP_GGML_ROPE_TYPE_MROPE  8
#define WSP_GGML_ROPE_TYPE_VISION 24


// in-place forms of ggml.h's ops: the result is a view of a (the allocator computes it in a's memory)

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_dup_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sub_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_div_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sqr_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sqrt_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_abs_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sgn_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_neg_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_step_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_tanh_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_elu_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_relu_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sigmoid_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gelu_erf_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gelu_quick_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_silu_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_exp_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_soft_max_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// elementwise: add1 adds the single value of b; add_cast computes a + b in `type`; acc adds b into
// the view of a given by (nb1, nb2, nb3, offset) and returns all of a

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add1(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add1_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add_cast(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        enum wsp_ggml_type        type);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_acc(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    nb1,
        size_t                    nb2,
        size_t                    nb3,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_acc_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    nb1,
        size_t                    nb2,
        size_t                    nb3,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_log(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_log_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sin(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sin_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cos(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cos_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// clamp to [min, max]; leaky_relu: x < 0 ? negative_slope * x : x

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_clamp(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     min,
        float                     max);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_leaky_relu(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     negative_slope,
        bool                      inplace);

// reductions: sum of all elements -> [1]; sum of each row -> [1, ne1, ne2, ne3]; argmax of each row
// of a matrix -> I32 [ne1]; count_equal -> I64 [1], the number of equal elements of a and b

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sum(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sum_rows(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_argmax(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_count_equal(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

// row norms: x / sqrt(mean(x^2) + eps); x / max(||x||, eps); group_norm normalises n_groups
// groups of channels (dim 2) over dims 0, 1 and the channels of the group

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rms_norm(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rms_norm_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_l2_norm(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_l2_norm_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_group_norm(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       n_groups,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_group_norm_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       n_groups,
        float                     eps);

// set: a copy of a (or a itself, in place) with b written over the view (nb1, nb2, nb3, offset)

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    nb1,
        size_t                    nb2,
        size_t                    nb3,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    nb1,
        size_t                    nb2,
        size_t                    nb3,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_1d_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_2d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    nb1,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_set_2d_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        size_t                    nb1,
        size_t                    offset);

// diag: a row vector [n, 1] -> the diagonal matrix [n, n]; diag_mask_*: elements with column >
// n_past + row set to -INFINITY or 0

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_diag(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_diag_mask_inf(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       n_past);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_diag_mask_inf_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       n_past);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_diag_mask_zero(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       n_past);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_diag_mask_zero_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       n_past);

// layout: repeat a to the shape of b (or ne0..ne3); zero padding at the end of each dim; roll each
// dim by a shift (elements wrap around)

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_repeat(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_repeat_4d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        int64_t                   ne3);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_pad(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       p0,
        int                       p1,
        int                       p2,
        int                       p3);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_roll(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       shift0,
        int                       shift1,
        int                       shift2,
        int                       shift3);

// windows (SAM-style attention): win_part splits [C, W, H, 1] into w x w windows (zero padded)
// [C, w, w, n_windows]; win_unpart reverses it for a w0 x h0 image; get_rel_pos gathers the
// relative position embeddings for qh x kh; add_rel_pos adds pw and ph to the attention scores

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_win_part(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       w);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_win_unpart(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       w0,
        int                       h0,
        int                       w);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_get_rel_pos(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       qh,
        int                       kh);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add_rel_pos(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * pw,
        struct wsp_ggml_tensor  * ph);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add_rel_pos_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * pw,
        struct wsp_ggml_tensor  * ph);

// upscaling of dims 0 and 1 by an integer factor, or to a given size (nearest or bilinear)

enum wsp_ggml_scale_mode {
    WSP_GGML_SCALE_MODE_NEAREST  = 0,
    WSP_GGML_SCALE_MODE_BILINEAR = 1,

    WSP_GGML_SCALE_MODE_COUNT
};

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_upscale(
        struct wsp_ggml_context  * ctx,
        struct wsp_ggml_tensor   * a,
        int                        scale_factor,
        enum wsp_ggml_scale_mode   mode);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_upscale_ext(
        struct wsp_ggml_context  * ctx,
        struct wsp_ggml_tensor   * a,
        int                        ne0,
        int                        ne1,
        int                        ne2,
        int                        ne3,
        enum wsp_ggml_scale_mode   mode);

// F32 [ceil((stop - start) / step)] holding start, start + step, ...; sinusoidal embeddings of
// timesteps [N] -> [dim, N]

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_arange(
        struct wsp_ggml_context * ctx,
        float                     start,
        float                     stop,
        float                     step);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_timestep_embedding(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * timesteps,
        int                       dim,
        int                       max_period);

// argsort: the I32 indices that sort each row; top_k: the indices of the k largest of each row

enum wsp_ggml_sort_order {
    WSP_GGML_SORT_ORDER_ASC,
    WSP_GGML_SORT_ORDER_DESC,
};

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_argsort(
        struct wsp_ggml_context  * ctx,
        struct wsp_ggml_tensor   * a,
        enum wsp_ggml_sort_order   order);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_top_k(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       k);

// rotary position embeddings. b: I32 positions [ne2] (4 * ne2 for rope_multi); c: optional F32
// frequency factors [n_dims / 2]; mode: 0 (normal), WSP_GGML_ROPE_TYPE_NEOX, _MROPE or _VISION

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       n_dims,
        int                       mode);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       n_dims,
        int                       mode);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_ext(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c,
        int                       n_dims,
        int                       mode,
        int                       n_ctx_orig,
        float                     freq_base,
        float                     freq_scale,
        float                     ext_factor,
        float                     attn_factor,
        float                     beta_fast,
        float                     beta_slow);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_ext_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c,
        int                       n_dims,
        int                       mode,
        int                       n_ctx_orig,
        float                     freq_base,
        float                     freq_scale,
        float                     ext_factor,
        float                     attn_factor,
        float                     beta_fast,
        float                     beta_slow);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_multi(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c,
        int                       n_dims,
        int                       sections[4],
        int                       mode,
        int                       n_ctx_orig,
        float                     freq_base,
        float                     freq_scale,
        float                     ext_factor,
        float                     attn_factor,
        float                     beta_fast,
        float                     beta_slow);

WSP_GGML_DEPRECATED(WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_custom(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       n_dims,
        int                       mode,
        int                       n_ctx_orig,
        float                     freq_base,
        float                     freq_scale,
        float                     ext_factor,
        float                     attn_factor,
        float                     beta_fast,
        float                     beta_slow),
        "use wsp_ggml_rope_ext instead");

WSP_GGML_DEPRECATED(WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_custom_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       n_dims,
        int                       mode,
        int                       n_ctx_orig,
        float                     freq_base,
        float                     freq_scale,
        float                     ext_factor,
        float                     attn_factor,
        float                     beta_fast,
        float                     beta_slow),
        "use wsp_ggml_rope_ext_inplace instead");

// the dims where YaRN blends interpolation and extrapolation
WSP_GGML_API void wsp_ggml_rope_yarn_corr_dims(
        int     n_dims,
        int     n_ctx_orig,
        float   freq_base,
        float   beta_fast,
        float   beta_slow,
        float   dims[2]);

// convolutions, pooling, expert mat-muls, recurrent layers, custom ops, training, utilities
#include "ggml-ops-nn.h"
