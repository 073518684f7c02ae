// Builders of layout ops: views, reshapes, permutes (metadata only), copies and casts
// (computed), and get_rows.

#include "impl.h"

#include <cstdio>

namespace {

using wsp::describe;

wsp_ggml_tensor * view_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, int n_dims, const int64_t * ne, size_t offset,
                            const char * op) {
    // the arena's own check (a dense view must fit its root source) would not name the op
    size_t bytes = wsp_ggml_row_size(a->type, ne[0]);
    for (int i = 1; i < n_dims; ++i) {
        bytes *= (size_t) ne[i];
    }
    const wsp_ggml_tensor * root = a->view_src ? a->view_src : a;
    const size_t            offs = offset + (a->view_src ? a->view_offs : 0);
    if (bytes > 0 && offs + bytes > wsp_ggml_nbytes(root)) {
        WSP_GGML_ABORT("%s: a view of %zu bytes at offset %zu of %s is out of the bounds of %s (%zu bytes)", op, bytes,
                       offset, describe(a).c_str(), describe(root).c_str(), wsp_ggml_nbytes(root));
    }
    wsp_ggml_tensor * r = wsp::new_tensor_impl(ctx, a->type, n_dims, ne, a, offset);
    wsp_ggml_format_name(r, "%s (view)", a->name);
    wsp::set_op_params(r, &offset, sizeof(offset));
    r->op     = WSP_GGML_OP_VIEW;
    r->src[0] = a;
    return r;
}

// a view's last element must lie inside a
void check_view_bounds(const wsp_ggml_tensor * a, const wsp_ggml_tensor * v, size_t offset, const char * op) {
    if (wsp_ggml_is_empty(v)) {
        return;
    }
    const size_t end = offset + wsp_ggml_nbytes(v);
    if (end > wsp_ggml_nbytes(a)) {
        WSP_GGML_ABORT("%s: view %s with offset %zu ends at byte %zu, beyond the %zu bytes of %s", op,
                       describe(v).c_str(), offset, end, wsp_ggml_nbytes(a), describe(a).c_str());
    }
}

wsp_ggml_tensor * reshape_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, int n_dims, const int64_t * ne,
                               const char * op) {
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) {
        n *= ne[i];
    }
    WSP_OP_CHECK(wsp_ggml_is_contiguous(a), op, a, nullptr, nullptr);
    if (n != wsp_ggml_nelements(a)) {
        WSP_GGML_ABORT("%s: cannot reshape %s (%lld elements) to %lld elements", op, describe(a).c_str(),
                       (long long) wsp_ggml_nelements(a), (long long) n);
    }
    wsp_ggml_tensor * r = wsp::new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    wsp_ggml_format_name(r, "%s (reshaped)", a->name);
    r->op     = WSP_GGML_OP_RESHAPE;
    r->src[0] = a;
    return r;
}

wsp_ggml_tensor * cont_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, const int64_t * ne, const char * op) {
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    if (n != wsp_ggml_nelements(a)) {
        WSP_GGML_ABORT("%s: %s has %lld elements, the requested shape %lld", op, describe(a).c_str(),
                       (long long) wsp_ggml_nelements(a), (long long) n);
    }
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, a->type, WSP_GGML_MAX_DIMS, ne);
    wsp_ggml_format_name(r, "%s (cont)", a->name);
    r->op     = WSP_GGML_OP_CONT;
    r->src[0] = a;
    return r;
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_view_tensor(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * src) {
    wsp_ggml_tensor * r = wsp::new_tensor_impl(ctx, src->type, WSP_GGML_MAX_DIMS, src->ne, src, 0);
    wsp_ggml_format_name(r, "%s (view)", src->name);
    for (int i = 0; i < WSP_GGML_MAX_DIMS; ++i) {
        r->nb[i] = src->nb[i];
    }
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_view_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          size_t offset) {
    return view_impl(ctx, a, 1, &ne0, offset, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_view_2d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          int64_t ne1, size_t nb1, size_t offset) {
    const int64_t     ne[2] = { ne0, ne1 };
    wsp_ggml_tensor * r     = view_impl(ctx, a, 2, ne, offset, __func__);
    r->nb[1]                = nb1;
    r->nb[2]                = r->nb[1] * (size_t) ne1;
    r->nb[3]                = r->nb[2];
    check_view_bounds(a, r, offset, __func__);
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_view_3d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    const int64_t     ne[3] = { ne0, ne1, ne2 };
    wsp_ggml_tensor * r     = view_impl(ctx, a, 3, ne, offset, __func__);
    r->nb[1]                = nb1;
    r->nb[2]                = nb2;
    r->nb[3]                = r->nb[2] * (size_t) ne2;
    check_view_bounds(a, r, offset, __func__);
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_view_4d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3,
                                          size_t offset) {
    const int64_t     ne[4] = { ne0, ne1, ne2, ne3 };
    wsp_ggml_tensor * r     = view_impl(ctx, a, 4, ne, offset, __func__);
    r->nb[1]                = nb1;
    r->nb[2]                = nb2;
    r->nb[3]                = nb3;
    check_view_bounds(a, r, offset, __func__);
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_reshape(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                          struct wsp_ggml_tensor * b) {
    return reshape_impl(ctx, a, wsp_ggml_n_dims(b), b->ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_reshape_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0) {
    return reshape_impl(ctx, a, 1, &ne0, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_reshape_2d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                             int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return reshape_impl(ctx, a, 2, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_reshape_3d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                             int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return reshape_impl(ctx, a, 3, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_reshape_4d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                             int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return reshape_impl(ctx, a, 4, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_permute(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int axis0,
                                          int axis1, int axis2, int axis3) {
    const int axes[4] = { axis0, axis1, axis2, axis3 };
    bool      seen[4] = { false, false, false, false };
    for (int i = 0; i < 4; ++i) {
        if (axes[i] < 0 || axes[i] >= WSP_GGML_MAX_DIMS || seen[axes[i]]) {
            WSP_GGML_ABORT("wsp_ggml_permute: axes (%d, %d, %d, %d) of %s are not a permutation of 0..3", axis0, axis1,
                           axis2, axis3, describe(a).c_str());
        }
        seen[axes[i]] = true;
    }
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, a);
    wsp_ggml_format_name(r, "%s (permuted)", a->name);
    for (int i = 0; i < 4; ++i) {
        r->ne[axes[i]] = a->ne[i];
        r->nb[axes[i]] = a->nb[i];
    }
    r->op     = WSP_GGML_OP_PERMUTE;
    r->src[0] = a;
    for (int i = 0; i < 4; ++i) {
        wsp::set_op_param_i32(r, i, axes[i]);
    }
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_transpose(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, a);
    wsp_ggml_format_name(r, "%s (transposed)", a->name);
    r->ne[0]  = a->ne[1];
    r->ne[1]  = a->ne[0];
    r->nb[0]  = a->nb[1];
    r->nb[1]  = a->nb[0];
    r->op     = WSP_GGML_OP_TRANSPOSE;
    r->src[0] = a;
    wsp::set_op_param_i32(r, 0, 1);
    wsp::set_op_param_i32(r, 1, 0);
    wsp::set_op_param_i32(r, 2, 2);
    wsp::set_op_param_i32(r, 3, 3);
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_cpy(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b) {
    WSP_OP_CHECK(wsp_ggml_nelements(a) == wsp_ggml_nelements(b), "wsp_ggml_cpy", a, b, nullptr);
    // the result is a view of b, so that b's users see the copy
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, b);
    if (b->name[0] != '\0') {
        wsp_ggml_format_name(r, "%s (copy of %s)", b->name, a->name);
    } else {
        wsp_ggml_format_name(r, "%s (copy)", a->name);
    }
    r->op     = WSP_GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_cast(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                       enum wsp_ggml_type type) {
    if (type < 0 || type >= WSP_GGML_TYPE_COUNT || wsp_ggml_blck_size(type) == 0) {
        WSP_GGML_ABORT("wsp_ggml_cast: invalid target type id %d for %s", (int) type, describe(a).c_str());
    }
    if (a->ne[0] % wsp_ggml_blck_size(type) != 0) {
        WSP_GGML_ABORT("wsp_ggml_cast: rows of %s are not a multiple of the %s block size %lld", describe(a).c_str(),
                       wsp_ggml_type_name(type), (long long) wsp_ggml_blck_size(type));
    }
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, type, WSP_GGML_MAX_DIMS, a->ne);
    wsp_ggml_format_name(r, "%s (copy)", a->name);
    r->op     = WSP_GGML_OP_CPY;
    r->src[0] = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_cont(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return cont_impl(ctx, a, a->ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_cont_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0) {
    const int64_t ne[4] = { ne0, 1, 1, 1 };
    return cont_impl(ctx, a, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_cont_2d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          int64_t ne1) {
    const int64_t ne[4] = { ne0, ne1, 1, 1 };
    return cont_impl(ctx, a, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_cont_3d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          int64_t ne1, int64_t ne2) {
    const int64_t ne[4] = { ne0, ne1, ne2, 1 };
    return cont_impl(ctx, a, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_cont_4d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int64_t ne0,
                                          int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return cont_impl(ctx, a, ne, __func__);
}

struct wsp_ggml_tensor * wsp_ggml_get_rows(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                           struct wsp_ggml_tensor * b) {
    const char * op = "wsp_ggml_get_rows";
    WSP_OP_CHECK(b->type == WSP_GGML_TYPE_I32, op, a, b, nullptr);
    WSP_OP_CHECK(a->ne[2] == b->ne[1], op, a, b, nullptr);
    WSP_OP_CHECK(b->ne[3] == 1, op, a, b, nullptr);
    const wsp_ggml_type type = a->type == WSP_GGML_TYPE_I32 ? WSP_GGML_TYPE_I32 : WSP_GGML_TYPE_F32;
    wsp_ggml_tensor *   r    = wsp_ggml_new_tensor_4d(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
    r->op                    = WSP_GGML_OP_GET_ROWS;
    r->src[0]                = a;
    r->src[1]                = b;
    return r;
}

} // extern "C"
