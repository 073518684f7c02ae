#pragma once

// The second part of ggml-ops.h: convolutions and pooling, mul_mat_id and out_prod, the
// recurrent layers, custom ops of several sources, the training entry points (declared, and
// stopping with a message: this library does inference only) and a few utilities. Included by
// ggml-ops.h; include ggml.h, not this file.

#ifndef WSP_GGML_API
#    error "include ggml.h, not ggml-ops-nn.h"
#endif

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

