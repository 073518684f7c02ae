#pragma once

// ggml.h's op builders in whisper.rn 0.4.0's order: the ops whisper.cpp's graphs are made of
// (copies, arithmetic, norms, mat-muls, views, attention, convolutions, custom maps). Included
// by ggml.h, inside its extern "C" block, where the API puts them; include ggml.h, not this file.
// The other builders are in ggml-ops.h and ggml-ops-nn.h.

#ifndef WSP_GGML_API
#    error "include ggml.h, not ggml-ops-core.h"
#endif

//
// operations on tensors (builders: they record the op, a backend computes it)
//

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_dup(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// elementwise binary ops: b is broadcast over a (a->ne[i] % b->ne[i] == 0)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_add_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sub(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_mul(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_mul_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_div(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sqr(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sqrt(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// mean of each row: [ne0, ne1, ne2, ne3] -> [1, ne1, ne2, ne3]
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_mean(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// a and b equal in every dim but `dim`
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_concat(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       dim);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_unary(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        enum wsp_ggml_unary_op    op);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_unary_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        enum wsp_ggml_unary_op    op);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_abs       (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sgn       (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_neg       (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_step      (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_tanh      (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_elu       (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_relu      (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_sigmoid   (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gelu      (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gelu_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gelu_erf  (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_gelu_quick(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_silu      (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_hardswish (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_hardsigmoid(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_exp       (struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a);

// normalize each row to zero mean and unit variance
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_norm(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     eps);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_norm_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     eps);

// A: k columns, n rows => [ne03, ne02, n, k]
// B: k columns, m rows  (i.e. we transpose it internally) => [ne03 * x, ne02 * y, m, k]
// result is n columns, m rows => [ne03 * x, ne02 * y, m, n]
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_mul_mat(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

// change the precision of a matrix multiplication
WSP_GGML_API void wsp_ggml_mul_mat_set_prec(
        struct wsp_ggml_tensor * a,
        enum wsp_ggml_prec       prec);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_scale(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     s);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_scale_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        float                     s);

// a -> b, return view(b)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cpy(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cast(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        enum   wsp_ggml_type      type);

// make contiguous
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cont(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// make contiguous, with a new shape
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cont_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cont_2d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cont_3d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_cont_4d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        int64_t                   ne3);

// return view(a); b specifies the new shape (a must be contiguous)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_reshape(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_reshape_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_reshape_2d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_reshape_3d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_reshape_4d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        int64_t                   ne3);

// offset in bytes
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_view_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_view_2d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        size_t                    nb1, // row stride in bytes
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_view_3d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        size_t                    nb1, // row   stride in bytes
        size_t                    nb2, // slice stride in bytes
        size_t                    offset);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_view_4d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int64_t                   ne0,
        int64_t                   ne1,
        int64_t                   ne2,
        int64_t                   ne3,
        size_t                    nb1, // row   stride in bytes
        size_t                    nb2, // slice stride in bytes
        size_t                    nb3,
        size_t                    offset);

// axis i of a becomes axis axis_i of the result
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_permute(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       axis0,
        int                       axis1,
        int                       axis2,
        int                       axis3);

// alias for permute(ctx, a, 1, 0, 2, 3)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_transpose(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// supports 3d a: a [n_embd, ne1, ne2], b I32 [n_rows, ne2] => [n_embd, n_rows, ne2]
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_get_rows(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,  // data
        struct wsp_ggml_tensor  * b); // row indices

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_soft_max(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a);

// softmax(a*scale + mask*(ALiBi slope))
// mask is optional, F16 or F32, [ne0, >= ne1] and broadcast over dims 2-3
// max_bias = 0.0f for no ALiBi
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_soft_max_ext(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * mask,
        float                     scale,
        float                     max_bias);

// im2col: a is the convolution kernel, b the data
// 1-D: a [KW, IC, OC], b [IW, IC, N] => [IC*KW, OW, N]
// 2-D: a [KW, KH, IC, OC], b [IW, IH, IC, N] => [IC*KH*KW, OW, OH, N]
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_im2col(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0, // stride dimension 0
        int                       s1, // stride dimension 1
        int                       p0, // padding dimension 0
        int                       p1, // padding dimension 1
        int                       d0, // dilation dimension 0
        int                       d1, // dilation dimension 1
        bool                      is_2D,
        enum wsp_ggml_type        dst_type);

// a [KW, IC, OC] kernel, b [IW, IC, N] data => [OW, OC, N]
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s0,  // stride
        int                       p0,  // padding
        int                       d0); // dilation

// conv_1d with padding = half
// alias for conv_1d(a, b, s, a->ne[0]/2, d)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_conv_1d_ph(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        struct wsp_ggml_tensor  * b,
        int                       s,
        int                       d);

// pad each row of a by reflection: p0 values before, p1 after (p0, p1 < ne0)
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_pad_reflect_1d(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        int                       p0,
        int                       p1);

#define WSP_GGML_KQ_MASK_PAD 64

// q:    [n_embd_k, n_batch,     n_head,    ne3 ]
// k:    [n_embd_k, n_kv,        n_head_kv, ne3 ]
// v:    [n_embd_v, n_kv,        n_head_kv, ne3 ] !! not transposed !!
// mask: [n_kv,     n_batch_pad, ne32,      ne33] !! n_batch_pad = WSP_GGML_PAD(n_batch, WSP_GGML_KQ_MASK_PAD) !!
// res:  [n_embd_v, n_head,      n_batch,   ne3 ] !! permuted !!
WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_flash_attn_ext(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * q,
        struct wsp_ggml_tensor  * k,
        struct wsp_ggml_tensor  * v,
        struct wsp_ggml_tensor  * mask,
        float                     scale,
        float                     max_bias,
        float                     logit_softcap);

WSP_GGML_API void wsp_ggml_flash_attn_ext_set_prec(
        struct wsp_ggml_tensor * a,
        enum wsp_ggml_prec       prec);

WSP_GGML_API enum wsp_ggml_prec wsp_ggml_flash_attn_ext_get_prec(
        const struct wsp_ggml_tensor * a);

// custom operators (computed on the CPU)

typedef void (*wsp_ggml_custom1_op_t)(struct wsp_ggml_tensor * dst, const struct wsp_ggml_tensor * a,
                                      int ith, int nth, void * userdata);

#define WSP_GGML_N_TASKS_MAX (-1) // n_tasks: as many as there are threads

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_map_custom1(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        wsp_ggml_custom1_op_t     fun,
        int                       n_tasks,
        void                    * userdata);

WSP_GGML_API struct wsp_ggml_tensor * wsp_ggml_map_custom1_inplace(
        struct wsp_ggml_context * ctx,
        struct wsp_ggml_tensor  * a,
        wsp_ggml_custom1_op_t     fun,
        int                       n_tasks,
        void                    * userdata);
