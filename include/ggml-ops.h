#pragma once

// The rest of ggml.h's functions, as whisper.rn 0.4.0 declares them: the op builders besides
// those of ggml.h's first part (in-place forms, norms, rope, convolutions and pooling, layout and
// recurrent ops, custom ops of several sources), the training entry points (declared, and
// stopping with a message: this library does inference only) and a few utilities. Included by
// ggml.h, inside its extern "C" block; include ggml.h, not this file.

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

// convolutions. 1-D: a [KW, IC, OC], b [IW, IC, N] -> [OW, OC, N]; conv_1d_1s / _2s: stride 1 / 2,
// padding half the kernel; _dw: depthwise (a [KW, 1, C]). 2-D: a [KW, KH, IC, OC], b [IW, IH, IC, N]
// -> [OW, OH, OC, N]; _sk_p0: stride = kernel, no padding; _s1_ph: stride 1, half padding

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_1d_1s(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_1d_2s(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_1d_dw(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0,
        int                       p0,
        int                       d0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_1d_dw_ph(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0,
        int                       d0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_transpose_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0,
        int                       p0,
        int                       d0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_2d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0,
        int                       s1,
        int                       p0,
        int                       p1,
        int                       d0,
        int                       d1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_2d_sk_p0(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_2d_s1_ph(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_2d_dw(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0,
        int                       s1,
        int                       p0,
        int                       p1,
        int                       d0,
        int                       d1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_2d_dw_direct(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       stride0,
        int                       stride1,
        int                       pad0,
        int                       pad1,
        int                       dilation0,
        int                       dilation1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_transpose_2d_p0(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       stride);

// pooling over dim 0 (1-D) or dims 0 and 1 (2-D); padded elements do not count in the average

enum wsp_ggml_op_pool {
    WSP_GGML_OP_POOL_MAX,
    WSP_GGML_OP_POOL_AVG,
    WSP_GGML_OP_POOL_COUNT,
};

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_pool_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        enum wsp_ggml_op_pool     op,
        int                       k0,
        int                       s0,
        int                       p0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_pool_2d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        enum wsp_ggml_op_pool     op,
        int                       k0,
        int                       k1,
        int                       s0,
        int                       s1,
        float                     p0,
        float                     p1);

// mul_mat_id: experts as [K, N, n_expert], b [K, n_expert_used or 1, n_tokens], ids I32
// [n_expert_used, n_tokens] -> [N, n_expert_used, n_tokens]; out_prod: a [m, k], b [n, k] -> [m, n]

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_mul_mat_id(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * as,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * ids);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_out_prod(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

// recurrent layers: Mamba (ssm_conv, ssm_scan), RWKV 6 and 7, gated linear attention; each returns
// its outputs followed by the final state

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_ssm_conv(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * sx,
        struct wsp_ggml_tensor  * c);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_ssm_scan(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * s,
        struct wsp_ggml_tensor  * x,
        struct wsp_ggml_tensor  * dt,
        struct wsp_ggml_tensor  * A,
        struct wsp_ggml_tensor  * B,
        struct wsp_ggml_tensor  * C);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rwkv_wkv6(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * k,
        struct wsp_ggml_tensor  * v,
        struct wsp_ggml_tensor  * r,
        struct wsp_ggml_tensor  * tf,
        struct wsp_ggml_tensor  * td,
        struct wsp_ggml_tensor  * state);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rwkv_wkv7(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * r,
        struct wsp_ggml_tensor  * w,
        struct wsp_ggml_tensor  * k,
        struct wsp_ggml_tensor  * v,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * state);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gated_linear_attn(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * k,
        struct wsp_ggml_tensor  * v,
        struct wsp_ggml_tensor  * q,
        struct wsp_ggml_tensor  * g,
        struct wsp_ggml_tensor  * state,
        float                     scale);

// custom operators of two and three sources, and of any number (computed on the CPU)

typedef void (*wsp_ggml_custom2_op_t)(struct wsp_ggml_tensor * dst, const struct wsp_ggml_tensor * a,
                                      const struct wsp_ggml_tensor * b, int ith, int nth, void * userdata);
typedef void (*wsp_ggml_custom3_op_t)(struct wsp_ggml_tensor * dst, const struct wsp_ggml_tensor * a,
                                      const struct wsp_ggml_tensor * b, const struct wsp_ggml_tensor * c, int ith,
                                      int nth, void * userdata);
typedef void (*wsp_ggml_custom_op_t)(struct wsp_ggml_tensor * dst, int ith, int nth, void * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_map_custom2(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        wsp_ggml_custom2_op_t     fun,
        int                       n_tasks,
        void                    * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_map_custom2_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        wsp_ggml_custom2_op_t     fun,
        int                       n_tasks,
        void                    * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_map_custom3(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c,
        wsp_ggml_custom3_op_t     fun,
        int                       n_tasks,
        void                    * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_map_custom3_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c,
        wsp_ggml_custom3_op_t     fun,
        int                       n_tasks,
        void                    * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_custom_4d(
        struct wsp_ggml_context * ctx,
        enum wsp_ggml_type        type,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        int64_t                   ne3,
        struct wsp_ggml_tensor  ** args,
        int                       n_args,
        wsp_ggml_custom_op_t      fun,
        int                       n_tasks,
        void                    * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_custom_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  ** args,
        int                       n_args,
        wsp_ggml_custom_op_t      fun,
        int                       n_tasks,
        void                    * userdata);

// training: not supported by this library. Each of these stops the process with a message saying
// so (upstream's backward pass, gradients, losses and optimizer step)

WSP_GGML_API void wsp_ggml_set_param(struct wsp_ggml_tensor * tensor);

WSP_GGML_API void wsp_ggml_set_loss(struct wsp_ggml_tensor * tensor);

WSP_GGML_API void wsp_ggml_build_backward_expand(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_cgraph  * cgraph,
        struct wsp_ggml_tensor  ** grad_accs);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_graph_get_grad(
        const struct wsp_ggml_cgraph * cgraph,
        const struct wsp_ggml_tensor * node);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_graph_get_grad_acc(
        const struct wsp_ggml_cgraph * cgraph,
        const struct wsp_ggml_tensor * node);

WSP_GGML_API void wsp_ggml_graph_reset(struct wsp_ggml_cgraph * cgraph);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_opt_step_adamw(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * grad,
        struct wsp_ggml_tensor  * m,
        struct wsp_ggml_tensor  * v,
        struct wsp_ggml_tensor  * adamw_params);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cross_entropy_loss(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cross_entropy_loss_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_silu_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rms_norm_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_repeat_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_get_rows_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        struct wsp_ggml_tensor  * c);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_soft_max_ext_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        float                     scale,
        float                     max_bias);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_soft_max_ext_back_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        float                     scale,
        float                     max_bias);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_ext_back(
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

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_rope_multi_back(
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

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_im2col_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int64_t                 * ne,
        int                       s0,
        int                       s1,
        int                       p0,
        int                       p1,
        int                       d0,
        int                       d1,
        bool                      is_2D);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_pool_2d_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * af,
        enum wsp_ggml_op_pool     op,
        int                       k0,
        int                       k1,
        int                       s0,
        int                       s1,
        float                     p0,
        float                     p1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_flash_attn_back(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * q,
        struct wsp_ggml_tensor  * k,
        struct wsp_ggml_tensor  * v,
        struct wsp_ggml_tensor  * d,
        bool                      masked);

// utilities: fopen with a UTF-8 name; a graph in Graphviz dot form (gb, with gf's nodes marked);
// layout predicates; bytes per element as a fraction (block size / elements per block)

WSP_GGML_API FILE * wsp_ggml_fopen(
        const char * fname,
        const char * mode);

WSP_GGML_API void wsp_ggml_graph_dump_dot(
        const struct wsp_ggml_cgraph * gb,
        const struct wsp_ggml_cgraph * gf,
        const char                   * filename);

WSP_GGML_API bool wsp_ggml_is_contiguous_channels(const struct wsp_ggml_tensor * tensor);

WSP_GGML_API bool wsp_ggml_is_contiguously_allocated(const struct wsp_ggml_tensor * tensor);

WSP_GGML_DEPRECATED(WSP_GGML_API double wsp_ggml_type_sizef(enum wsp_ggml_type type),
        "use wsp_ggml_row_size() instead");

