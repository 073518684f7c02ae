// Builders of the recurrent layers: Mamba's causal convolution (ssm_conv) and selective scan
// (ssm_scan), RWKV-6 and RWKV-7 time mixing (rwkv_wkv6, rwkv_wkv7) and gated linear attention.
// The scan-style ops return one F32 tensor holding their outputs followed by the final states,
// as upstream does: ssm_scan 1-D [n(x) + n(s)]; the others [S * H, n_tokens + S * n_seqs].

#include "impl.h"

namespace {

// shared checks of the RWKV / GLA family: every per-token operand [S, H, n_tokens], contiguous;
// the state holds S * S * H values per sequence and the tokens split evenly into the sequences
void check_heads(const char * op, const wsp_ggml_tensor * ref, const wsp_ggml_tensor * t) {
    WSP_OP_CHECK(t->type == WSP_GGML_TYPE_F32, op, ref, t, nullptr);
    WSP_OP_CHECK(wsp_ggml_is_contiguous(t), op, ref, t, nullptr);
    WSP_OP_CHECK(t->ne[0] == ref->ne[0] && t->ne[1] == ref->ne[1] && t->ne[2] == ref->ne[2] && t->ne[3] == 1, op, ref,
                 t, nullptr);
}

wsp_ggml_tensor * recurrent_result(wsp_ggml_context * ctx, const char * op, const wsp_ggml_tensor * k,
                                   const wsp_ggml_tensor * state) {
    const int64_t S = k->ne[0], H = k->ne[1], n_tokens = k->ne[2];
    WSP_OP_CHECK(state->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(state), op, k, state, nullptr);
    WSP_OP_CHECK(state->ne[1] >= 1 && wsp_ggml_nelements(state) == S * S * H * state->ne[1], op, k, state, nullptr);
    WSP_OP_CHECK(n_tokens % state->ne[1] == 0, op, k, state, nullptr);
    return wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, S * H, n_tokens + S * state->ne[1]);
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_ssm_conv(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * sx,
                                           struct wsp_ggml_tensor * c) {
    const char * op = "wsp_ggml_ssm_conv";
    WSP_OP_CHECK(sx->type == WSP_GGML_TYPE_F32 && c->type == WSP_GGML_TYPE_F32, op, sx, c, nullptr);
    WSP_OP_CHECK(sx->ne[3] == 1, op, sx, c, nullptr);
    WSP_OP_CHECK(c->ne[2] == 1 && c->ne[3] == 1, op, sx, c, nullptr);
    const int64_t d_conv = c->ne[0], d_inner = c->ne[1];
    WSP_OP_CHECK(d_conv >= 1 && sx->ne[0] >= d_conv - 1, op, sx, c, nullptr);
    WSP_OP_CHECK(sx->ne[1] == d_inner, op, sx, c, nullptr);
    const int64_t     n_t = sx->ne[0] - d_conv + 1;
    wsp_ggml_tensor * r   = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, d_inner, n_t, sx->ne[2]);
    r->op                 = WSP_GGML_OP_SSM_CONV;
    r->src[0]             = sx;
    r->src[1]             = c;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_ssm_scan(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * s,
                                           struct wsp_ggml_tensor * x, struct wsp_ggml_tensor * dt,
                                           struct wsp_ggml_tensor * A, struct wsp_ggml_tensor * B,
                                           struct wsp_ggml_tensor * C) {
    const char * op = "wsp_ggml_ssm_scan";
    for (const wsp_ggml_tensor * t : { s, x, dt, A, B, C }) {
        WSP_OP_CHECK(t->type == WSP_GGML_TYPE_F32, op, s, t, nullptr);
    }
    WSP_OP_CHECK(wsp_ggml_is_contiguous(s) && wsp_ggml_is_contiguous(x), op, s, x, nullptr);
    WSP_OP_CHECK(wsp_ggml_is_contiguous(dt) && wsp_ggml_is_contiguous(A), op, dt, A, nullptr);
    WSP_OP_CHECK(B->nb[0] == sizeof(float) && C->nb[0] == sizeof(float), op, B, C, nullptr);
    const int64_t d_state = s->ne[0], d_inner = s->ne[1], n_t = x->ne[1], n_s = x->ne[2];
    WSP_OP_CHECK(s->ne[2] == n_s && s->ne[3] == 1 && x->ne[3] == 1, op, s, x, nullptr);
    WSP_OP_CHECK(x->ne[0] == d_inner, op, s, x, nullptr);
    WSP_OP_CHECK(wsp_ggml_are_same_shape(x, dt), op, x, dt, nullptr);
    WSP_OP_CHECK(A->ne[0] == d_state && A->ne[1] == d_inner && A->ne[2] == 1 && A->ne[3] == 1, op, s, A, nullptr);
    WSP_OP_CHECK(B->ne[0] == d_state && B->ne[1] == n_t && B->ne[2] == n_s && B->ne[3] == 1, op, s, B, nullptr);
    WSP_OP_CHECK(wsp_ggml_are_same_shape(B, C), op, B, C, nullptr);
    // y [d_inner, n_t, n_s] then the final states [d_state, d_inner, n_s]
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, wsp_ggml_nelements(x) + wsp_ggml_nelements(s));
    r->op               = WSP_GGML_OP_SSM_SCAN;
    r->src[0]           = s;
    r->src[1]           = x;
    r->src[2]           = dt;
    r->src[3]           = A;
    r->src[4]           = B;
    r->src[5]           = C;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_rwkv_wkv6(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * k,
                                            struct wsp_ggml_tensor * v, struct wsp_ggml_tensor * r,
                                            struct wsp_ggml_tensor * tf, struct wsp_ggml_tensor * td,
                                            struct wsp_ggml_tensor * state) {
    const char * op = "wsp_ggml_rwkv_wkv6";
    check_heads(op, k, k);
    check_heads(op, k, v);
    check_heads(op, k, r);
    check_heads(op, k, td);
    WSP_OP_CHECK(tf->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_contiguous(tf), op, k, tf, nullptr);
    WSP_OP_CHECK(wsp_ggml_nelements(tf) == k->ne[0] * k->ne[1], op, k, tf, nullptr);
    wsp_ggml_tensor * out = recurrent_result(ctx, op, k, state);
    out->op               = WSP_GGML_OP_RWKV_WKV6;
    out->src[0]           = k;
    out->src[1]           = v;
    out->src[2]           = r;
    out->src[3]           = tf;
    out->src[4]           = td;
    out->src[5]           = state;
    return out;
}

struct wsp_ggml_tensor * wsp_ggml_rwkv_wkv7(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * r,
                                            struct wsp_ggml_tensor * w, struct wsp_ggml_tensor * k,
                                            struct wsp_ggml_tensor * v, struct wsp_ggml_tensor * a,
                                            struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * state) {
    const char * op = "wsp_ggml_rwkv_wkv7";
    for (const wsp_ggml_tensor * t : { k, r, w, v, a, b }) {
        check_heads(op, k, t);
    }
    wsp_ggml_tensor * out = recurrent_result(ctx, op, k, state);
    out->op               = WSP_GGML_OP_RWKV_WKV7;
    out->src[0]           = r;
    out->src[1]           = w;
    out->src[2]           = k;
    out->src[3]           = v;
    out->src[4]           = a;
    out->src[5]           = b;
    out->src[6]           = state;
    return out;
}

struct wsp_ggml_tensor * wsp_ggml_gated_linear_attn(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * k,
                                                    struct wsp_ggml_tensor * v, struct wsp_ggml_tensor * q,
                                                    struct wsp_ggml_tensor * g, struct wsp_ggml_tensor * state,
                                                    float scale) {
    const char * op = "wsp_ggml_gated_linear_attn";
    for (const wsp_ggml_tensor * t : { k, v, q, g }) {
        check_heads(op, k, t);
    }
    wsp_ggml_tensor * out = recurrent_result(ctx, op, k, state);
    wsp::set_op_param_f32(out, 0, scale);
    out->op     = WSP_GGML_OP_GATED_LINEAR_ATTN;
    out->src[0] = k;
    out->src[1] = v;
    out->src[2] = q;
    out->src[3] = g;
    out->src[4] = state;
    return out;
}

} // extern "C"
