// Builders of the neural-network ops: norm, mul_mat, soft_max, flash attention, im2col and
// the 1-D convolution built on it, reflection padding.

#include "impl.h"

namespace {

using wsp::describe;

int64_t conv_output_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins + 2 * p - (int64_t) d * (ks - 1) - 1) / s + 1;
}

wsp_ggml_tensor * norm_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, float eps, bool inplace) {
    wsp_ggml_tensor * r = inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
    wsp::set_op_param_f32(r, 0, eps);
    r->op     = WSP_GGML_OP_NORM;
    r->src[0] = a;
    return r;
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_norm(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, false);
}

struct wsp_ggml_tensor * wsp_ggml_norm_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, true);
}

struct wsp_ggml_tensor * wsp_ggml_mul_mat(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          struct wsp_ggml_tensor * b) {
    const char * op = "wsp_ggml_mul_mat";
    WSP_OP_CHECK(a->ne[0] == b->ne[0], op, a, b, nullptr);
    WSP_OP_CHECK(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, op, a, b, nullptr);
    WSP_OP_CHECK(!wsp_ggml_is_transposed(a), op, a, b, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3]);
    r->op               = WSP_GGML_OP_MUL_MAT;
    r->src[0]           = a;
    r->src[1]           = b;
    return r;
}

void wsp_ggml_mul_mat_set_prec(struct wsp_ggml_tensor * a, enum wsp_ggml_prec prec) {
    WSP_OP_CHECK(a->op == WSP_GGML_OP_MUL_MAT, "wsp_ggml_mul_mat_set_prec", a, nullptr, nullptr);
    wsp::set_op_param_i32(a, 0, (int32_t) prec);
}

struct wsp_ggml_tensor * wsp_ggml_soft_max_ext(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                               struct wsp_ggml_tensor * mask, float scale, float max_bias) {
    const char * op = "wsp_ggml_soft_max_ext";
    WSP_OP_CHECK(wsp_ggml_is_contiguous(a), op, a, mask, nullptr);
    if (mask != nullptr) {
        WSP_OP_CHECK(mask->type == WSP_GGML_TYPE_F16 || mask->type == WSP_GGML_TYPE_F32, op, a, mask, nullptr);
        WSP_OP_CHECK(wsp_ggml_is_contiguous(mask), op, a, mask, nullptr);
        WSP_OP_CHECK(mask->ne[0] == a->ne[0], op, a, mask, nullptr);
        WSP_OP_CHECK(mask->ne[1] >= a->ne[1], op, a, mask, nullptr);
        WSP_OP_CHECK(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0, op, a, mask, nullptr);
    }
    WSP_OP_CHECK(max_bias == 0.0f || mask != nullptr, op, a, mask, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_dup_tensor(ctx, a);
    wsp::set_op_param_f32(r, 0, scale);
    wsp::set_op_param_f32(r, 1, max_bias);
    r->op     = WSP_GGML_OP_SOFT_MAX;
    r->src[0] = a;
    r->src[1] = mask;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_soft_max(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return wsp_ggml_soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f);
}

struct wsp_ggml_tensor * wsp_ggml_flash_attn_ext(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * q,
                                                 struct wsp_ggml_tensor * k, struct wsp_ggml_tensor * v,
                                                 struct wsp_ggml_tensor * mask, float scale, float max_bias,
                                                 float logit_softcap) {
    const char * op = "wsp_ggml_flash_attn_ext";
    WSP_OP_CHECK(k->ne[0] == q->ne[0], op, q, k, v);
    WSP_OP_CHECK(v->ne[1] == k->ne[1], op, q, k, v);
    WSP_OP_CHECK(q->ne[2] % k->ne[2] == 0 && q->ne[3] % k->ne[3] == 0, op, q, k, v);
    WSP_OP_CHECK(v->ne[2] == k->ne[2] && v->ne[3] == k->ne[3], op, q, k, v);
    if (mask != nullptr) {
        WSP_OP_CHECK(mask->type == WSP_GGML_TYPE_F16 || mask->type == WSP_GGML_TYPE_F32, op, q, k, mask);
        WSP_OP_CHECK(wsp_ggml_is_contiguous(mask), op, q, k, mask);
        WSP_OP_CHECK(mask->ne[0] == k->ne[1], op, q, k, mask);
        WSP_OP_CHECK(mask->ne[1] >= WSP_GGML_PAD(q->ne[1], WSP_GGML_KQ_MASK_PAD), op, q, k, mask);
        WSP_OP_CHECK(q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0, op, q, k, mask);
    }
    WSP_OP_CHECK(max_bias == 0.0f || mask != nullptr, op, q, k, mask);

    // the result is permuted: [n_embd_v, n_head, n_batch, ne3]
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, v->ne[0], q->ne[2], q->ne[1], q->ne[3]);
    wsp::set_op_param_f32(r, 0, scale);
    wsp::set_op_param_f32(r, 1, max_bias);
    wsp::set_op_param_f32(r, 2, logit_softcap);
    wsp::set_op_param_i32(r, 3, WSP_GGML_PREC_DEFAULT);
    r->op     = WSP_GGML_OP_FLASH_ATTN_EXT;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    return r;
}

void wsp_ggml_flash_attn_ext_set_prec(struct wsp_ggml_tensor * a, enum wsp_ggml_prec prec) {
    WSP_OP_CHECK(a->op == WSP_GGML_OP_FLASH_ATTN_EXT, "wsp_ggml_flash_attn_ext_set_prec", a, nullptr, nullptr);
    wsp::set_op_param_i32(a, 3, (int32_t) prec);
}

enum wsp_ggml_prec wsp_ggml_flash_attn_ext_get_prec(const struct wsp_ggml_tensor * a) {
    WSP_OP_CHECK(a->op == WSP_GGML_OP_FLASH_ATTN_EXT, "wsp_ggml_flash_attn_ext_get_prec", a, nullptr, nullptr);
    return (enum wsp_ggml_prec) wsp::get_op_param_i32(a, 3);
}

struct wsp_ggml_tensor * wsp_ggml_im2col(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                         struct wsp_ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1,
                                         bool is_2D, enum wsp_ggml_type dst_type) {
    const char * op = "wsp_ggml_im2col";
    WSP_OP_CHECK(s0 > 0 && d0 > 0 && p0 >= 0, op, a, b, nullptr);
    if (is_2D) {
        WSP_OP_CHECK(s1 > 0 && d1 > 0 && p1 >= 0, op, a, b, nullptr);
        WSP_OP_CHECK(a->ne[2] == b->ne[2], op, a, b, nullptr);
    } else {
        WSP_OP_CHECK(a->ne[1] == b->ne[1], op, a, b, nullptr);
        WSP_OP_CHECK(b->ne[3] == 1, op, a, b, nullptr);
    }
    WSP_OP_CHECK(dst_type == WSP_GGML_TYPE_F32 || dst_type == WSP_GGML_TYPE_F16 || dst_type == WSP_GGML_TYPE_BF16, op,
                 a, b, nullptr);
    const int64_t OH = is_2D ? conv_output_size(b->ne[1], a->ne[1], s1, p1, d1) : 0;
    const int64_t OW = conv_output_size(b->ne[0], a->ne[0], s0, p0, d0);
    if (OW <= 0 || (is_2D && OH <= 0)) {
        WSP_GGML_ABORT("wsp_ggml_im2col: kernel %s does not fit the input %s with these paddings and dilations",
                       describe(a).c_str(), describe(b).c_str());
    }
    const int64_t ne[4] = {
        is_2D ? a->ne[2] * a->ne[1] * a->ne[0] : a->ne[1] * a->ne[0],
        OW,
        is_2D ? OH : b->ne[2],
        is_2D ? b->ne[3] : 1,
    };
    wsp_ggml_tensor * r         = wsp_ggml_new_tensor(ctx, dst_type, 4, ne);
    const int32_t     params[7] = { s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_IM2COL;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_conv_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          struct wsp_ggml_tensor * b, int s0, int p0, int d0) {
    // columns in the kernel's precision (F16 for half kernels, as upstream), F32 kernels keep F32
    const wsp_ggml_type col_type = a->type == WSP_GGML_TYPE_F32 ? WSP_GGML_TYPE_F32 : WSP_GGML_TYPE_F16;
    wsp_ggml_tensor *   im2col   = wsp_ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, col_type); // [IC*K, OL, N]
    wsp_ggml_tensor *   r =
        wsp_ggml_mul_mat(ctx, wsp_ggml_reshape_2d(ctx, im2col, im2col->ne[0], im2col->ne[2] * im2col->ne[1]),
                         wsp_ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2])); // [OL*N, OC]
    return wsp_ggml_reshape_3d(ctx, r, im2col->ne[1], a->ne[2], im2col->ne[2]);       // [OL, OC, N]
}

struct wsp_ggml_tensor * wsp_ggml_conv_1d_ph(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             struct wsp_ggml_tensor * b, int s, int d) {
    return wsp_ggml_conv_1d(ctx, a, b, s, (int) (a->ne[0] / 2), d);
}

struct wsp_ggml_tensor * wsp_ggml_pad_reflect_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int p0,
                                                 int p1) {
    const char * op = "wsp_ggml_pad_reflect_1d";
    WSP_OP_CHECK(p0 >= 0 && p1 >= 0, op, a, nullptr, nullptr);
    WSP_OP_CHECK(p0 < a->ne[0] && p1 < a->ne[0], op, a, nullptr, nullptr);
    WSP_OP_CHECK(wsp_ggml_is_contiguous(a), op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->type == WSP_GGML_TYPE_F32, op, a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, a->type, a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]);
    wsp::set_op_param_i32(r, 0, p0);
    wsp::set_op_param_i32(r, 1, p1);
    r->op     = WSP_GGML_OP_PAD_REFLECT_1D;
    r->src[0] = a;
    return r;
}

} // extern "C"
