// Builders of the ops that move elements by position: repeat, zero padding, roll, SAM's windows
// and relative positions, upscaling, arange, timestep embeddings and argsort / top_k. Each records
// its parameters in op_params in upstream's layout (the kernels of every backend read them there)
// and checks shapes as upstream does.

#include "impl.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace {

wsp_ggml_tensor * add_rel_pos_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * pw,
                                   wsp_ggml_tensor * ph, bool inplace) {
    const char * op = inplace ? "wsp_ggml_add_rel_pos_inplace" : "wsp_ggml_add_rel_pos";
    WSP_OP_CHECK(wsp_ggml_are_same_shape(pw, ph), op, a, pw, ph);
    WSP_OP_CHECK(wsp_ggml_is_contiguous(a) && wsp_ggml_is_contiguous(pw) && wsp_ggml_is_contiguous(ph), op, a, pw, ph);
    WSP_OP_CHECK(a->type == WSP_GGML_TYPE_F32 && pw->type == WSP_GGML_TYPE_F32 && ph->type == WSP_GGML_TYPE_F32, op, a,
                 pw, ph);
    WSP_OP_CHECK(pw->ne[0] * pw->ne[0] == a->ne[0], op, a, pw, ph);
    WSP_OP_CHECK(pw->ne[1] * pw->ne[2] == a->ne[1], op, a, pw, ph);
    WSP_OP_CHECK(pw->ne[3] == a->ne[2] && a->ne[3] == 1, op, a, pw, ph);
    wsp_ggml_tensor * r = inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
    wsp::set_op_param_i32(r, 0, inplace ? 1 : 0);
    r->op     = WSP_GGML_OP_ADD_REL_POS;
    r->src[0] = a;
    r->src[1] = pw;
    r->src[2] = ph;
    return r;
}

wsp_ggml_tensor * upscale_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                               int64_t ne3, wsp_ggml_scale_mode mode, const char * op) {
    WSP_OP_CHECK(mode == WSP_GGML_SCALE_MODE_NEAREST || mode == WSP_GGML_SCALE_MODE_BILINEAR, op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->ne[0] <= ne0 && a->ne[1] <= ne1 && a->ne[2] <= ne2 && a->ne[3] <= ne3, op, a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    wsp::set_op_param_i32(r, 0, (int32_t) mode);
    r->op     = WSP_GGML_OP_UPSCALE;
    r->src[0] = a;
    return r;
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_repeat(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                         struct wsp_ggml_tensor * b) {
    WSP_OP_CHECK(wsp_ggml_can_repeat(a, b), "wsp_ggml_repeat", a, b, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, a->type, WSP_GGML_MAX_DIMS, b->ne);
    r->op               = WSP_GGML_OP_REPEAT;
    r->src[0]           = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_repeat_4d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                            int64_t ne1, int64_t ne2, int64_t ne3) {
    const bool can_repeat = wsp_ggml_is_empty(a) ||
                            (ne0 % a->ne[0] == 0 && ne1 % a->ne[1] == 0 && ne2 % a->ne[2] == 0 && ne3 % a->ne[3] == 0);
    WSP_OP_CHECK(can_repeat, "wsp_ggml_repeat_4d", a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    r->op               = WSP_GGML_OP_REPEAT;
    r->src[0]           = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_pad(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int p0, int p1, int p2,
                                      int p3) {
    WSP_OP_CHECK(p0 >= 0 && p1 >= 0 && p2 >= 0 && p3 >= 0, "wsp_ggml_pad", a, nullptr, nullptr);
    wsp_ggml_tensor * r =
        wsp_ggml_new_tensor_4d(ctx, a->type, a->ne[0] + p0, a->ne[1] + p1, a->ne[2] + p2, a->ne[3] + p3);
    const int32_t params[4] = { p0, p1, p2, p3 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_PAD;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_roll(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int shift0,
                                       int shift1, int shift2, int shift3) {
    const char * op = "wsp_ggml_roll";
    WSP_OP_CHECK(a->nb[0] == wsp_ggml_type_size(a->type), op, a, nullptr, nullptr);
    WSP_OP_CHECK(std::abs(shift0) < a->ne[0] && std::abs(shift1) < a->ne[1] && std::abs(shift2) < a->ne[2] &&
                     std::abs(shift3) < a->ne[3],
                 op, a, nullptr, nullptr);
    wsp_ggml_tensor * r         = wsp_ggml_dup_tensor(ctx, a);
    const int32_t     params[4] = { shift0, shift1, shift2, shift3 };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_ROLL;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_win_part(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int w) {
    const char * op = "wsp_ggml_win_part";
    WSP_OP_CHECK(w > 0, op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->ne[3] == 1 && a->type == WSP_GGML_TYPE_F32, op, a, nullptr, nullptr);
    // windows cover the image padded with zeros to a multiple of w in dims 1 and 2
    const int         npx       = (int) ((a->ne[1] + w - 1) / w);
    const int         npy       = (int) ((a->ne[2] + w - 1) / w);
    wsp_ggml_tensor * r         = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, a->ne[0], w, w, (int64_t) npx * npy);
    const int32_t     params[3] = { npx, npy, w };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_WIN_PART;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_win_unpart(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int w0, int h0,
                                             int w) {
    const char * op = "wsp_ggml_win_unpart";
    WSP_OP_CHECK(w > 0 && w0 > 0 && h0 > 0, op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->type == WSP_GGML_TYPE_F32 && a->ne[1] == w && a->ne[2] == w, op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->ne[3] == (int64_t) ((w0 + w - 1) / w) * ((h0 + w - 1) / w), op, a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, a->ne[0], w0, h0);
    wsp::set_op_param_i32(r, 0, w);
    r->op     = WSP_GGML_OP_WIN_UNPART;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_get_rel_pos(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int qh,
                                              int kh) {
    const char * op = "wsp_ggml_get_rel_pos";
    WSP_OP_CHECK(qh == kh && qh > 0, op, a, nullptr, nullptr);
    WSP_OP_CHECK(2 * (int64_t) (qh > kh ? qh : kh) - 1 == a->ne[1], op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->type == WSP_GGML_TYPE_F16 || a->type == WSP_GGML_TYPE_F32 || a->type == WSP_GGML_TYPE_BF16, op, a,
                 nullptr, nullptr);
    // upstream makes the result F16 (SAM's embeddings are F16); other float types keep theirs
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_3d(ctx, a->type, a->ne[0], kh, qh);
    r->op               = WSP_GGML_OP_GET_REL_POS;
    r->src[0]           = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_add_rel_pos(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * pw, struct wsp_ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, false);
}

struct wsp_ggml_tensor * wsp_ggml_add_rel_pos_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                      struct wsp_ggml_tensor * pw, struct wsp_ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, true);
}

struct wsp_ggml_tensor * wsp_ggml_upscale(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int scale_factor,
                                          enum wsp_ggml_scale_mode mode) {
    WSP_OP_CHECK(scale_factor >= 1, "wsp_ggml_upscale", a, nullptr, nullptr);
    return upscale_impl(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3], mode,
                        "wsp_ggml_upscale");
}

struct wsp_ggml_tensor * wsp_ggml_upscale_ext(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int ne0,
                                              int ne1, int ne2, int ne3, enum wsp_ggml_scale_mode mode) {
    return upscale_impl(ctx, a, ne0, ne1, ne2, ne3, mode, "wsp_ggml_upscale_ext");
}

struct wsp_ggml_tensor * wsp_ggml_arange(struct wsp_ggml_context * ctx, float start, float stop, float step) {
    if (!(stop > start) || !(step > 0.0f)) {
        WSP_GGML_ABORT("wsp_ggml_arange: needs stop > start and step > 0, got start %g, stop %g, step %g",
                       (double) start, (double) stop, (double) step);
    }
    const int64_t     steps     = (int64_t) std::ceil((stop - start) / step);
    wsp_ggml_tensor * r         = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, steps);
    const float       params[3] = { start, stop, step };
    wsp::set_op_params(r, params, sizeof(params));
    r->op = WSP_GGML_OP_ARANGE;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_timestep_embedding(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * timesteps,
                                                     int dim, int max_period) {
    const char * op = "wsp_ggml_timestep_embedding";
    WSP_OP_CHECK(dim > 0 && max_period > 0, op, timesteps, nullptr, nullptr);
    WSP_OP_CHECK(timesteps->type == WSP_GGML_TYPE_F32 && wsp_ggml_is_vector(timesteps), op, timesteps, nullptr,
                 nullptr);
    // an odd dim gets one more column, zero (as upstream)
    const int64_t     actual_dim = dim % 2 != 0 ? dim + 1 : dim;
    wsp_ggml_tensor * r          = wsp_ggml_new_tensor_2d(ctx, WSP_GGML_TYPE_F32, actual_dim, timesteps->ne[0]);
    const int32_t     params[2]  = { dim, max_period };
    wsp::set_op_params(r, params, sizeof(params));
    r->op     = WSP_GGML_OP_TIMESTEP_EMBEDDING;
    r->src[0] = timesteps;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_argsort(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          enum wsp_ggml_sort_order order) {
    const char * op = "wsp_ggml_argsort";
    WSP_OP_CHECK(order == WSP_GGML_SORT_ORDER_ASC || order == WSP_GGML_SORT_ORDER_DESC, op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->ne[0] <= INT32_MAX, op, a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, WSP_GGML_TYPE_I32, WSP_GGML_MAX_DIMS, a->ne);
    wsp::set_op_param_i32(r, 0, (int32_t) order);
    r->op     = WSP_GGML_OP_ARGSORT;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_top_k(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int k) {
    WSP_OP_CHECK(k >= 1 && a->ne[0] >= k, "wsp_ggml_top_k", a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_argsort(ctx, a, WSP_GGML_SORT_ORDER_DESC);
    return wsp_ggml_view_4d(ctx, r, k, r->ne[1], r->ne[2], r->ne[3], r->nb[1], r->nb[2], r->nb[3], 0);
}

} // extern "C"
