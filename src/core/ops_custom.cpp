// Builders of the custom ops of two and three sources (MAP_CUSTOM2/3, result shaped as a or a
// view of a) and of any number of sources (CUSTOM: a new tensor of the given type and shape, or
// a view of a with a as src[0]). The CPU alone computes them; other backends decline them and the
// scheduler runs them on the CPU.

#include "ops_custom.h"

namespace {

using wsp::describe;

void check_custom(const char * op, const void * fun, int n_tasks, const wsp_ggml_tensor * a) {
    if (fun == nullptr) {
        WSP_GGML_ABORT("%s: the function of the custom op on %s is NULL", op, a ? describe(a).c_str() : "(none)");
    }
    if (n_tasks != WSP_GGML_N_TASKS_MAX && n_tasks <= 0) {
        WSP_GGML_ABORT("%s: n_tasks must be positive or WSP_GGML_N_TASKS_MAX, got %d", op, n_tasks);
    }
}

void check_args(const char * op, wsp_ggml_tensor ** args, int n_args, int max_args) {
    if (n_args < 0 || n_args > max_args) {
        WSP_GGML_ABORT("%s: %d arguments, at most %d fit the node's sources", op, n_args, max_args);
    }
    if (n_args > 0 && args == nullptr) {
        WSP_GGML_ABORT("%s: %d arguments but args is NULL", op, n_args);
    }
    for (int i = 0; i < n_args; ++i) {
        if (args[i] == nullptr) {
            WSP_GGML_ABORT("%s: argument %d is NULL", op, i);
        }
    }
}

wsp_ggml_tensor * map_custom2_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b,
                                   wsp_ggml_custom2_op_t fun, int n_tasks, void * userdata, bool inplace) {
    check_custom(inplace ? "wsp_ggml_map_custom2_inplace" : "wsp_ggml_map_custom2", (const void *) fun, n_tasks, a);
    wsp_ggml_tensor *          r      = inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
    const wsp::CustomOp2Params params = { fun, n_tasks, userdata };
    wsp::set_op_params(r, &params, sizeof(params));
    r->op     = WSP_GGML_OP_MAP_CUSTOM2;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

wsp_ggml_tensor * map_custom3_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b,
                                   wsp_ggml_tensor * c, wsp_ggml_custom3_op_t fun, int n_tasks, void * userdata,
                                   bool inplace) {
    check_custom(inplace ? "wsp_ggml_map_custom3_inplace" : "wsp_ggml_map_custom3", (const void *) fun, n_tasks, a);
    wsp_ggml_tensor *          r      = inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
    const wsp::CustomOp3Params params = { fun, n_tasks, userdata };
    wsp::set_op_params(r, &params, sizeof(params));
    r->op     = WSP_GGML_OP_MAP_CUSTOM3;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_map_custom2(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b, wsp_ggml_custom2_op_t fun, int n_tasks,
                                              void * userdata) {
    return map_custom2_impl(ctx, a, b, fun, n_tasks, userdata, false);
}

struct wsp_ggml_tensor * wsp_ggml_map_custom2_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                      struct wsp_ggml_tensor * b, wsp_ggml_custom2_op_t fun,
                                                      int n_tasks, void * userdata) {
    return map_custom2_impl(ctx, a, b, fun, n_tasks, userdata, true);
}

struct wsp_ggml_tensor * wsp_ggml_map_custom3(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * c,
                                              wsp_ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return map_custom3_impl(ctx, a, b, c, fun, n_tasks, userdata, false);
}

struct wsp_ggml_tensor * wsp_ggml_map_custom3_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                      struct wsp_ggml_tensor * b, struct wsp_ggml_tensor * c,
                                                      wsp_ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return map_custom3_impl(ctx, a, b, c, fun, n_tasks, userdata, true);
}

struct wsp_ggml_tensor * wsp_ggml_custom_4d(struct wsp_ggml_context * ctx, enum wsp_ggml_type type, int64_t ne0,
                                            int64_t ne1, int64_t ne2, int64_t ne3, struct wsp_ggml_tensor ** args,
                                            int n_args, wsp_ggml_custom_op_t fun, int n_tasks, void * userdata) {
    const char * op = "wsp_ggml_custom_4d";
    check_custom(op, (const void *) fun, n_tasks, nullptr);
    check_args(op, args, n_args, WSP_GGML_MAX_SRC);
    wsp_ggml_tensor *         r      = wsp_ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    const wsp::CustomOpParams params = { fun, n_tasks, userdata };
    wsp::set_op_params(r, &params, sizeof(params));
    r->op = WSP_GGML_OP_CUSTOM;
    for (int i = 0; i < n_args; ++i) {
        r->src[i] = args[i];
    }
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_custom_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                 struct wsp_ggml_tensor ** args, int n_args, wsp_ggml_custom_op_t fun,
                                                 int n_tasks, void * userdata) {
    const char * op = "wsp_ggml_custom_inplace";
    check_custom(op, (const void *) fun, n_tasks, a);
    check_args(op, args, n_args, WSP_GGML_MAX_SRC - 1);
    wsp_ggml_tensor *         r      = wsp_ggml_view_tensor(ctx, a);
    const wsp::CustomOpParams params = { fun, n_tasks, userdata };
    wsp::set_op_params(r, &params, sizeof(params));
    r->op     = WSP_GGML_OP_CUSTOM;
    r->src[0] = a;
    for (int i = 0; i < n_args; ++i) {
        r->src[i + 1] = args[i];
    }
    return r;
}

} // extern "C"
