// Builders of the convolution family beyond conv_1d: the im2col compositions (conv_1d_1s/_2s,
// depthwise 1-D and 2-D, conv_2d and its short forms), the direct ops (depthwise conv_2d,
// transposed convolutions, pooling) and the expert / outer products (mul_mat_id, out_prod).
// The compositions add no op of their own: IM2COL + MUL_MAT (+ reshapes, a permute and a CONT),
// so every backend with those kernels computes them. Their columns are kept in the kernel's type.

#include "impl.h"

#include <cmath>

namespace {

using wsp::describe;

int64_t conv_output_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins + 2 * (int64_t) p - (int64_t) d * (ks - 1) - 1) / s + 1;
}

bool is_float(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
}

// reshapes need contiguous tensors; a strided operand is copied first
wsp_ggml_tensor * contiguous(wsp_ggml_context * ctx, wsp_ggml_tensor * t) {
    return wsp_ggml_is_contiguous(t) ? t : wsp_ggml_cont(ctx, t);
}

void check_conv_params(const char * op, wsp_ggml_tensor * a, wsp_ggml_tensor * b, int s, int p, int d) {
    WSP_OP_CHECK(s > 0 && p >= 0 && d > 0, op, a, b, nullptr);
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_conv_1d_1s(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             struct wsp_ggml_tensor * b) {
    return wsp_ggml_conv_1d_ph(ctx, a, b, 1, 1);
}

struct wsp_ggml_tensor * wsp_ggml_conv_1d_2s(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             struct wsp_ggml_tensor * b) {
    return wsp_ggml_conv_1d_ph(ctx, a, b, 2, 1);
}

// Depthwise 1-D: every channel is its own batch of one input channel. Columns [KW, OW, C*N]
// viewed as [KW, OW, C, N] times the kernel [KW, 1, C] (one weight row per channel, broadcast
// over N) give [1, OW, C, N].
struct wsp_ggml_tensor * wsp_ggml_conv_1d_dw(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             struct wsp_ggml_tensor * b, int s0, int p0, int d0) {
    const char * op = "wsp_ggml_conv_1d_dw";
    WSP_OP_CHECK(is_float(a->type), op, a, b, nullptr);
    WSP_OP_CHECK(a->ne[1] == 1 && a->ne[3] == 1, op, a, b, nullptr);
    WSP_OP_CHECK(a->ne[2] == b->ne[1] && b->ne[3] == 1, op, a, b, nullptr);
    check_conv_params(op, a, b, s0, p0, d0);
    a                    = contiguous(ctx, a);
    b                    = contiguous(ctx, b);
    const int64_t     KW = a->ne[0], C = b->ne[1], N = b->ne[2];
    wsp_ggml_tensor * col = wsp_ggml_im2col(ctx, a, wsp_ggml_reshape_3d(ctx, b, b->ne[0], 1, C * N), s0, 0, p0, 0, d0,
                                            0, false, a->type); // [KW, OW, C*N]
    const int64_t     OW  = col->ne[1];
    wsp_ggml_tensor * r   = wsp_ggml_mul_mat(ctx, wsp_ggml_reshape_4d(ctx, a, KW, 1, C, 1),
                                             wsp_ggml_reshape_4d(ctx, col, KW, OW, C, N)); // [1, OW, C, N]
    return wsp_ggml_reshape_3d(ctx, r, OW, C, N);
}

struct wsp_ggml_tensor * wsp_ggml_conv_1d_dw_ph(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                struct wsp_ggml_tensor * b, int s0, int d0) {
    return wsp_ggml_conv_1d_dw(ctx, a, b, s0, (int) (a->ne[0] / 2), d0);
}

// 2-D: columns [IC*KH*KW, OW, OH, N] as [K, OW*OH*N] rows times the kernel as [K, OC] give
// [OW*OH*N, OC], i.e. [OW, OH, N, OC], made [OW, OH, OC, N] by a permute and a copy.
struct wsp_ggml_tensor * wsp_ggml_conv_2d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          struct wsp_ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1) {
    const char * op = "wsp_ggml_conv_2d";
    WSP_OP_CHECK(is_float(a->type), op, a, b, nullptr);
    WSP_OP_CHECK(a->ne[2] == b->ne[2], op, a, b, nullptr);
    check_conv_params(op, a, b, s0, p0, d0);
    check_conv_params(op, a, b, s1, p1, d1);
    a                     = contiguous(ctx, a);
    wsp_ggml_tensor * col = wsp_ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, a->type);
    const int64_t     K = col->ne[0], OW = col->ne[1], OH = col->ne[2], N = col->ne[3], OC = a->ne[3];
    wsp_ggml_tensor * r = wsp_ggml_mul_mat(ctx, wsp_ggml_reshape_2d(ctx, col, K, OW * OH * N),
                                           wsp_ggml_reshape_2d(ctx, a, K, OC)); // [OW*OH*N, OC]
    r                   = wsp_ggml_reshape_4d(ctx, r, OW, OH, N, OC);
    return wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, r, 0, 1, 3, 2));
}

struct wsp_ggml_tensor * wsp_ggml_conv_2d_sk_p0(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                struct wsp_ggml_tensor * b) {
    return wsp_ggml_conv_2d(ctx, a, b, (int) a->ne[0], (int) a->ne[1], 0, 0, 1, 1);
}

struct wsp_ggml_tensor * wsp_ggml_conv_2d_s1_ph(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                struct wsp_ggml_tensor * b) {
    return wsp_ggml_conv_2d(ctx, a, b, 1, 1, (int) (a->ne[0] / 2), (int) (a->ne[1] / 2), 1, 1);
}

// Depthwise 2-D through im2col: channels become batches of one input channel, columns
// [KW*KH, OW, OH, C*N] viewed as [KW*KH, OW*OH, C, N] times the kernel [KW*KH, 1, C].
struct wsp_ggml_tensor * wsp_ggml_conv_2d_dw(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             struct wsp_ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
                                             int d1) {
    const char * op = "wsp_ggml_conv_2d_dw";
    WSP_OP_CHECK(is_float(a->type), op, a, b, nullptr);
    WSP_OP_CHECK(a->ne[2] == 1 && a->ne[3] == b->ne[2], op, a, b, nullptr);
    check_conv_params(op, a, b, s0, p0, d0);
    check_conv_params(op, a, b, s1, p1, d1);
    a                    = contiguous(ctx, a);
    b                    = contiguous(ctx, b);
    const int64_t     KW = a->ne[0], KH = a->ne[1], C = b->ne[2], N = b->ne[3];
    wsp_ggml_tensor * col = wsp_ggml_im2col(ctx, a, wsp_ggml_reshape_4d(ctx, b, b->ne[0], b->ne[1], 1, C * N), s0, s1,
                                            p0, p1, d0, d1, true, a->type); // [KW*KH, OW, OH, C*N]
    const int64_t     OW = col->ne[1], OH = col->ne[2];
    wsp_ggml_tensor * r = wsp_ggml_mul_mat(ctx, wsp_ggml_reshape_4d(ctx, a, KW * KH, 1, C, 1),
                                           wsp_ggml_reshape_4d(ctx, col, KW * KH, OW * OH, C, N)); // [1, OW*OH, C, N]
    return wsp_ggml_reshape_4d(ctx, r, OW, OH, C, N);
}

// CONV_2D_DW: a [KW, KH, 1, C], b [W, H, C, N] -> [OW, OH, C, N] in b's type. A channels-innermost
// b gives a channels-innermost result (same permutation of the same dims), as upstream.
struct wsp_ggml_tensor * wsp_ggml_conv_2d_dw_direct(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                    struct wsp_ggml_tensor * b, int stride0, int stride1, int pad0,
                                                    int pad1, int dilation0, int dilation1) {
    const char * op = "wsp_ggml_conv_2d_dw_direct";
    WSP_OP_CHECK(a->ne[2] == 1 && a->ne[3] == b->ne[2], op, a, b, nullptr);
    WSP_OP_CHECK(is_float(b->type), op, a, b, nullptr);
    check_conv_params(op, a, b, stride0, pad0, dilation0);
    check_conv_params(op, a, b, stride1, pad1, dilation1);
    const int64_t ne[4] = {
        conv_output_size(b->ne[0], a->ne[0], stride0, pad0, dilation0),
        conv_output_size(b->ne[1], a->ne[1], stride1, pad1, dilation1),
        b->ne[2],
        b->ne[3],
    };
    if (ne[0] <= 0 || ne[1] <= 0) {
        WSP_GGML_ABORT("%s: kernel %s does not fit the input %s with these paddings and dilations", op,
                       describe(a).c_str(), describe(b).c_str());
    }
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, b->type, 4, ne);
    if (wsp_ggml_is_contiguous_channels(b)) {
        const size_t es = wsp_ggml_type_size(r->type);
        r->nb[0]        = (size_t) r->ne[2] * es;
        r->nb[1]        = (size_t) r->ne[0] * r->nb[0];
        r->nb[2]        = es;
        r->nb[3]        = (size_t) r->ne[1] * r->nb[1];
    }
    const int32_t params[6] = { stride0, stride1, pad0, pad1, dilation0, dilation1 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_CONV_2D_DW;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

// CONV_TRANSPOSE_1D: a [K, OC, IC], b [L, IC] -> [(L - 1)*s0 + K, OC]; as upstream, no padding
// and no dilation (the parameters exist for the signature only).
struct wsp_ggml_tensor * wsp_ggml_conv_transpose_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                    struct wsp_ggml_tensor * b, int s0, int p0, int d0) {
    const char * op = "wsp_ggml_conv_transpose_1d";
    WSP_OP_CHECK(wsp_ggml_is_matrix(b), op, a, b, nullptr);
    WSP_OP_CHECK(a->ne[2] == b->ne[1] && a->ne[3] == 1, op, a, b, nullptr);
    WSP_OP_CHECK(s0 > 0, op, a, b, nullptr);
    WSP_OP_CHECK(p0 == 0, op, a, b, nullptr);
    WSP_OP_CHECK(d0 == 1, op, a, b, nullptr);
    const int64_t     ne[4]     = { (b->ne[0] - 1) * s0 + a->ne[0], a->ne[1], 1, 1 };
    wsp_ggml_tensor * r         = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_F32, 2, ne);
    const int32_t     params[3] = { s0, p0, d0 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_CONV_TRANSPOSE_1D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

// CONV_TRANSPOSE_2D: a [KW, KH, OC, IC], b [W, H, IC, N] -> [(W-1)*s + KW, (H-1)*s + KH, OC, N]
struct wsp_ggml_tensor * wsp_ggml_conv_transpose_2d_p0(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                       struct wsp_ggml_tensor * b, int stride) {
    const char * op = "wsp_ggml_conv_transpose_2d_p0";
    WSP_OP_CHECK(a->ne[3] == b->ne[2], op, a, b, nullptr);
    WSP_OP_CHECK(stride > 0, op, a, b, nullptr);
    const int64_t     ne[4] = { (b->ne[0] - 1) * stride + a->ne[0], (b->ne[1] - 1) * stride + a->ne[1], a->ne[2],
                                b->ne[3] };
    wsp_ggml_tensor * r     = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_F32, 4, ne);
    wsp::set_op_param_i32(r, 0, stride);
    r->op     = WSP_GGML_OP_CONV_TRANSPOSE_2D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

// Note [pooling padding]: a padded position is no element at all. MAX takes the largest element
// inside the input (-FLT_MAX for a window entirely in the padding) and AVG divides the sum by the
// number of elements inside the input (0 for an empty window), which is what include/ggml-ops.h
// promises (count_include_pad = false; upstream ggml's pool_2d kernels divide by k0*k1 whatever
// the padding: the two agree wherever a window lies inside the input). pool_2d's float paddings
// give the output size as upstream computes it, (in + 2p - k) / s + 1 truncated, and are stored
// (and applied) truncated to integers, as upstream's op_params hold them.
struct wsp_ggml_tensor * wsp_ggml_pool_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          enum wsp_ggml_op_pool op, int k0, int s0, int p0) {
    const char * name = "wsp_ggml_pool_1d";
    WSP_OP_CHECK(op == WSP_GGML_OP_POOL_MAX || op == WSP_GGML_OP_POOL_AVG, name, a, nullptr, nullptr);
    WSP_OP_CHECK(k0 > 0 && s0 > 0 && p0 >= 0, name, a, nullptr, nullptr);
    const int64_t ow = (a->ne[0] + 2 * (int64_t) p0 - k0) / s0 + 1;
    if (a->ne[0] + 2 * (int64_t) p0 < k0 || ow <= 0) {
        WSP_GGML_ABORT("%s: a window of %d does not fit %s padded by %d", name, k0, describe(a).c_str(), p0);
    }
    const int64_t     ne[4]     = { ow, a->ne[1], a->ne[2], a->ne[3] };
    wsp_ggml_tensor * r         = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_F32, 4, ne);
    const int32_t     params[4] = { (int32_t) op, k0, s0, p0 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_POOL_1D;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_pool_2d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          enum wsp_ggml_op_pool op, int k0, int k1, int s0, int s1, float p0,
                                          float p1) {
    const char * name = "wsp_ggml_pool_2d";
    WSP_OP_CHECK(op == WSP_GGML_OP_POOL_MAX || op == WSP_GGML_OP_POOL_AVG, name, a, nullptr, nullptr);
    WSP_OP_CHECK(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0, name, a, nullptr, nullptr);
    WSP_OP_CHECK(p0 >= 0.0f && p1 >= 0.0f && std::isfinite(p0) && std::isfinite(p1), name, a, nullptr, nullptr);
    const float w = ((float) a->ne[0] + 2.0f * p0 - (float) k0) / (float) s0 + 1.0f;
    const float h = ((float) a->ne[1] + 2.0f * p1 - (float) k1) / (float) s1 + 1.0f;
    if (!(w >= 1.0f && h >= 1.0f)) {
        WSP_GGML_ABORT("%s: a %dx%d window does not fit %s padded by %g, %g", name, k0, k1, describe(a).c_str(),
                       (double) p0, (double) p1);
    }
    const int64_t     ne[4]     = { (int64_t) w, (int64_t) h, a->ne[2], a->ne[3] };
    wsp_ggml_tensor * r         = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_F32, 4, ne);
    const int32_t     params[7] = { (int32_t) op, k0, k1, s0, s1, (int32_t) p0, (int32_t) p1 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_POOL_2D;
    r->src[0] = a;
    return r;
}

// MUL_MAT_ID: dst[:, e, t] = as[:, :, ids[e, t]] x b[:, e % b->ne[1], t]
struct wsp_ggml_tensor * wsp_ggml_mul_mat_id(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * as,
                                             struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * ids) {
    const char * op = "wsp_ggml_mul_mat_id";
    WSP_OP_CHECK(!wsp_ggml_is_transposed(as), op, as, b, ids);
    WSP_OP_CHECK(ids->type == WSP_GGML_TYPE_I32, op, as, b, ids);
    WSP_OP_CHECK(as->ne[3] == 1 && b->ne[3] == 1, op, as, b, ids);
    WSP_OP_CHECK(ids->ne[2] == 1 && ids->ne[3] == 1, op, as, b, ids);
    WSP_OP_CHECK(ids->ne[1] == b->ne[2], op, as, b, ids);
    WSP_OP_CHECK(as->ne[0] == b->ne[0], op, as, b, ids);
    WSP_OP_CHECK(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0, op, as, b, ids);
    const int64_t     ne[4] = { as->ne[1], ids->ne[0], b->ne[2], 1 };
    wsp_ggml_tensor * r     = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_F32, 4, ne);
    r->op                   = WSP_GGML_OP_MUL_MAT_ID;
    r->src[0]               = as;
    r->src[1]               = b;
    r->src[2]               = ids;
    return r;
}

// OUT_PROD: dst[i, j, i2, i3] = sum_l a[i, l, i2 / r2, i3 / r3] * b[j, l, i2, i3]
struct wsp_ggml_tensor * wsp_ggml_out_prod(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                           struct wsp_ggml_tensor * b) {
    const char * op = "wsp_ggml_out_prod";
    WSP_OP_CHECK(a->ne[1] == b->ne[1], op, a, b, nullptr);
    WSP_OP_CHECK(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, op, a, b, nullptr);
    WSP_OP_CHECK(!wsp_ggml_is_transposed(a), op, a, b, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, a->ne[0], b->ne[0], b->ne[2], b->ne[3]);
    r->op               = WSP_GGML_OP_OUT_PROD;
    r->src[0]           = a;
    r->src[1]           = b;
    return r;
}

} // extern "C"
