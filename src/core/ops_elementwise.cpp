// Builders of elementwise ops: binary arithmetic with broadcast, unary functions, scale, sqrt,
// mean, concat, dup and custom maps. Builders only record the op and check shapes.

#include "impl.h"

namespace {

using wsp::describe;

// Inplace ops return a view of a that carries the op; the allocator knows such a node
// computes into its source's memory.
wsp_ggml_tensor * result_like(wsp_ggml_context * ctx, wsp_ggml_tensor * a, bool inplace) {
    return inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
}

wsp_ggml_tensor * binary_op(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b, wsp_ggml_op op,
                            bool inplace, const char * name) {
    WSP_OP_CHECK(wsp_ggml_can_repeat(b, a), name, a, b, nullptr);
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    r->op               = op;
    r->src[0]           = a;
    r->src[1]           = b;
    return r;
}

wsp_ggml_tensor * plain_unary_op(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_op op) {
    wsp_ggml_tensor * r = wsp_ggml_dup_tensor(ctx, a);
    r->op               = op;
    r->src[0]           = a;
    return r;
}

wsp_ggml_tensor * unary_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_unary_op op, bool inplace) {
    if (op < 0 || op >= WSP_GGML_UNARY_OP_COUNT) {
        WSP_GGML_ABORT("wsp_ggml_unary: invalid unary op id %d for %s", (int) op, describe(a).c_str());
    }
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    wsp::set_op_param_i32(r, 0, (int32_t) op);
    r->op     = WSP_GGML_OP_UNARY;
    r->src[0] = a;
    return r;
}

wsp_ggml_tensor * scale_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, float s, bool inplace) {
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    wsp::set_op_param_f32(r, 0, s);
    wsp::set_op_param_f32(r, 1, 0.0f); // bias, kept for the layout of later scale_bias ops
    r->op     = WSP_GGML_OP_SCALE;
    r->src[0] = a;
    return r;
}

wsp_ggml_tensor * map_custom1_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_custom1_op_t fun, int n_tasks,
                                   void * userdata, bool inplace) {
    if (fun == nullptr) {
        WSP_GGML_ABORT("wsp_ggml_map_custom1: the function of the custom op on %s is NULL", describe(a).c_str());
    }
    if (n_tasks != WSP_GGML_N_TASKS_MAX && n_tasks <= 0) {
        WSP_GGML_ABORT("wsp_ggml_map_custom1: n_tasks must be positive or WSP_GGML_N_TASKS_MAX, got %d", n_tasks);
    }
    wsp_ggml_tensor *          r      = result_like(ctx, a, inplace);
    const wsp::CustomOp1Params params = { fun, n_tasks, userdata };
    wsp::set_op_params(r, &params, sizeof(params));
    r->op     = WSP_GGML_OP_MAP_CUSTOM1;
    r->src[0] = a;
    return r;
}

} // namespace

extern "C" {

struct wsp_ggml_tensor * wsp_ggml_dup(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_unary_op(ctx, a, WSP_GGML_OP_DUP);
}

struct wsp_ggml_tensor * wsp_ggml_add(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b) {
    return binary_op(ctx, a, b, WSP_GGML_OP_ADD, false, "wsp_ggml_add");
}

struct wsp_ggml_tensor * wsp_ggml_add_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b) {
    return binary_op(ctx, a, b, WSP_GGML_OP_ADD, true, "wsp_ggml_add_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_sub(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b) {
    return binary_op(ctx, a, b, WSP_GGML_OP_SUB, false, "wsp_ggml_sub");
}

struct wsp_ggml_tensor * wsp_ggml_mul(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b) {
    return binary_op(ctx, a, b, WSP_GGML_OP_MUL, false, "wsp_ggml_mul");
}

struct wsp_ggml_tensor * wsp_ggml_mul_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b) {
    return binary_op(ctx, a, b, WSP_GGML_OP_MUL, true, "wsp_ggml_mul_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_div(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b) {
    return binary_op(ctx, a, b, WSP_GGML_OP_DIV, false, "wsp_ggml_div");
}

struct wsp_ggml_tensor * wsp_ggml_sqr(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_unary_op(ctx, a, WSP_GGML_OP_SQR);
}

struct wsp_ggml_tensor * wsp_ggml_sqrt(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_unary_op(ctx, a, WSP_GGML_OP_SQRT);
}

struct wsp_ggml_tensor * wsp_ggml_mean(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    wsp_ggml_tensor * r = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
    r->op               = WSP_GGML_OP_MEAN;
    r->src[0]           = a;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_concat(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                         struct wsp_ggml_tensor * b, int dim) {
    const char * op = "wsp_ggml_concat";
    WSP_OP_CHECK(dim >= 0 && dim < WSP_GGML_MAX_DIMS, op, a, b, nullptr);
    WSP_OP_CHECK(a->type == b->type, op, a, b, nullptr);
    WSP_OP_CHECK(!wsp_ggml_is_quantized(a->type), op, a, b, nullptr);
    int64_t ne[WSP_GGML_MAX_DIMS];
    for (int d = 0; d < WSP_GGML_MAX_DIMS; ++d) {
        if (d == dim) {
            ne[d] = a->ne[d] + b->ne[d];
            continue;
        }
        WSP_OP_CHECK(a->ne[d] == b->ne[d], op, a, b, nullptr);
        ne[d] = a->ne[d];
    }
    wsp_ggml_tensor * r = wsp_ggml_new_tensor(ctx, a->type, WSP_GGML_MAX_DIMS, ne);
    wsp::set_op_param_i32(r, 0, dim);
    r->op     = WSP_GGML_OP_CONCAT;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct wsp_ggml_tensor * wsp_ggml_unary(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                        enum wsp_ggml_unary_op op) {
    return unary_impl(ctx, a, op, false);
}

struct wsp_ggml_tensor * wsp_ggml_unary_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                enum wsp_ggml_unary_op op) {
    return unary_impl(ctx, a, op, true);
}

#define WSP_UNARY_BUILDER(name, id)                                                                       \
    struct wsp_ggml_tensor * wsp_ggml_##name(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) { \
        return unary_impl(ctx, a, id, false);                                                             \
    }

WSP_UNARY_BUILDER(abs, WSP_GGML_UNARY_OP_ABS)
WSP_UNARY_BUILDER(sgn, WSP_GGML_UNARY_OP_SGN)
WSP_UNARY_BUILDER(neg, WSP_GGML_UNARY_OP_NEG)
WSP_UNARY_BUILDER(step, WSP_GGML_UNARY_OP_STEP)
WSP_UNARY_BUILDER(tanh, WSP_GGML_UNARY_OP_TANH)
WSP_UNARY_BUILDER(elu, WSP_GGML_UNARY_OP_ELU)
WSP_UNARY_BUILDER(relu, WSP_GGML_UNARY_OP_RELU)
WSP_UNARY_BUILDER(sigmoid, WSP_GGML_UNARY_OP_SIGMOID)
WSP_UNARY_BUILDER(gelu, WSP_GGML_UNARY_OP_GELU)
WSP_UNARY_BUILDER(gelu_erf, WSP_GGML_UNARY_OP_GELU_ERF)
WSP_UNARY_BUILDER(gelu_quick, WSP_GGML_UNARY_OP_GELU_QUICK)
WSP_UNARY_BUILDER(silu, WSP_GGML_UNARY_OP_SILU)
WSP_UNARY_BUILDER(hardswish, WSP_GGML_UNARY_OP_HARDSWISH)
WSP_UNARY_BUILDER(hardsigmoid, WSP_GGML_UNARY_OP_HARDSIGMOID)
WSP_UNARY_BUILDER(exp, WSP_GGML_UNARY_OP_EXP)

#undef WSP_UNARY_BUILDER

struct wsp_ggml_tensor * wsp_ggml_gelu_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return unary_impl(ctx, a, WSP_GGML_UNARY_OP_GELU, true);
}

struct wsp_ggml_tensor * wsp_ggml_scale(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float s) {
    return scale_impl(ctx, a, s, false);
}

struct wsp_ggml_tensor * wsp_ggml_scale_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float s) {
    return scale_impl(ctx, a, s, true);
}

struct wsp_ggml_tensor * wsp_ggml_map_custom1(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              wsp_ggml_custom1_op_t fun, int n_tasks, void * userdata) {
    return map_custom1_impl(ctx, a, fun, n_tasks, userdata, false);
}

struct wsp_ggml_tensor * wsp_ggml_map_custom1_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                      wsp_ggml_custom1_op_t fun, int n_tasks, void * userdata) {
    return map_custom1_impl(ctx, a, fun, n_tasks, userdata, true);
}

} // extern "C"
