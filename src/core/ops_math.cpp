// Builders of the math family: the in-place forms of ggml.h's elementwise ops, add1, add_cast,
// acc and set (b added or written over a strided view of a, op_params { nb1, nb2, nb3, offset,
// inplace } as int32 like upstream), log / sin / cos, clamp, leaky_relu, the reductions sum,
// sum_rows, argmax and count_equal, the row norms rms_norm, l2_norm, group_norm, and diag with the
// causal masks. In-place forms return a view of a: the allocator computes them in a's memory.

#include "impl.h"

#include <climits>

namespace {

using wsp::describe;

wsp_ggml_tensor * result_like(wsp_ggml_context * ctx, wsp_ggml_tensor * a, bool inplace) {
    return inplace ? wsp_ggml_view_tensor(ctx, a) : wsp_ggml_dup_tensor(ctx, a);
}

wsp_ggml_tensor * with_op(wsp_ggml_tensor * r, wsp_ggml_op op, wsp_ggml_tensor * a, wsp_ggml_tensor * b = nullptr) {
    r->op     = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

bool is_float(wsp_ggml_type t) {
    return t == WSP_GGML_TYPE_F32 || t == WSP_GGML_TYPE_F16 || t == WSP_GGML_TYPE_BF16;
}

wsp_ggml_tensor * binary_inplace(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b, wsp_ggml_op op,
                                 const char * name) {
    WSP_OP_CHECK(wsp_ggml_can_repeat(b, a), name, a, b, nullptr);
    return with_op(wsp_ggml_view_tensor(ctx, a), op, a, b);
}

wsp_ggml_tensor * unary_inplace(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_unary_op op) {
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, a);
    wsp::set_op_param_i32(r, 0, (int32_t) op);
    return with_op(r, WSP_GGML_OP_UNARY, a);
}

wsp_ggml_tensor * add1_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b, bool inplace) {
    const char * op = inplace ? "wsp_ggml_add1_inplace" : "wsp_ggml_add1";
    WSP_OP_CHECK(wsp_ggml_is_scalar(b), op, a, b, nullptr);
    return with_op(result_like(ctx, a, inplace), WSP_GGML_OP_ADD1, a, b);
}

// the byte span the view (b's shape, strides nb1..nb3 over a's element size, at offset) touches
bool view_fits(const wsp_ggml_tensor * dst, const wsp_ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
               size_t offset) {
    if (wsp_ggml_is_empty(b)) {
        return true;
    }
    const size_t es  = wsp_ggml_type_size(dst->type);
    const size_t end = offset + (size_t) (b->ne[0] - 1) * es + (size_t) (b->ne[1] - 1) * nb1 +
                       (size_t) (b->ne[2] - 1) * nb2 + (size_t) (b->ne[3] - 1) * nb3 + es;
    return end <= wsp_ggml_nbytes(dst);
}

// ACC and SET: dst is a (or a copy of it) with b combined into the view (nb1, nb2, nb3, offset)
wsp_ggml_tensor * view_write_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_tensor * b, size_t nb1,
                                  size_t nb2, size_t nb3, size_t offset, bool inplace, wsp_ggml_op op_id,
                                  const char * op) {
    WSP_OP_CHECK(wsp_ggml_nelements(b) <= wsp_ggml_nelements(a), op, a, b, nullptr);
    WSP_OP_CHECK(!wsp_ggml_is_quantized(a->type) && !wsp_ggml_is_quantized(b->type), op, a, b, nullptr);
    if (op_id == WSP_GGML_OP_ACC) {
        WSP_OP_CHECK(is_float(a->type) && is_float(b->type), op, a, b, nullptr);
    } else {
        WSP_OP_CHECK(a->type == b->type || (is_float(a->type) && is_float(b->type)), op, a, b, nullptr);
    }
    // upstream keeps the strides and the offset as int32 op params
    WSP_OP_CHECK(nb1 <= INT32_MAX && nb2 <= INT32_MAX && nb3 <= INT32_MAX && offset <= INT32_MAX, op, a, b, nullptr);
    WSP_OP_CHECK(offset % wsp_ggml_type_size(a->type) == 0, op, a, b, nullptr);
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    if (!view_fits(r, b, nb1, nb2, nb3, offset)) {
        WSP_GGML_ABORT("%s: the view of %s (strides %zu, %zu, %zu, offset %zu) does not fit in a = %s", op,
                       describe(b).c_str(), nb1, nb2, nb3, offset, describe(a).c_str());
    }
    const int32_t params[5] = { (int32_t) nb1, (int32_t) nb2, (int32_t) nb3, (int32_t) offset, inplace ? 1 : 0 };
    wsp::set_op_params(r, params, sizeof(params));
    return with_op(r, op_id, a, b);
}

wsp_ggml_tensor * plain_map(wsp_ggml_context * ctx, wsp_ggml_tensor * a, wsp_ggml_op op, bool inplace) {
    return with_op(result_like(ctx, a, inplace), op, a);
}

wsp_ggml_tensor * leaky_relu_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, float slope, bool inplace) {
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    wsp::set_op_param_f32(r, 0, slope);
    wsp::set_op_param_i32(r, 1, inplace ? 1 : 0);
    return with_op(r, WSP_GGML_OP_LEAKY_RELU, a);
}

wsp_ggml_tensor * eps_norm(wsp_ggml_context * ctx, wsp_ggml_tensor * a, float eps, bool inplace, wsp_ggml_op op) {
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    wsp::set_op_param_f32(r, 0, eps);
    return with_op(r, op, a);
}

wsp_ggml_tensor * group_norm_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, int n_groups, float eps, bool inplace) {
    WSP_OP_CHECK(n_groups > 0, inplace ? "wsp_ggml_group_norm_inplace" : "wsp_ggml_group_norm", a, nullptr, nullptr);
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    wsp::set_op_param_i32(r, 0, n_groups);
    wsp::set_op_param_f32(r, 1, eps);
    return with_op(r, WSP_GGML_OP_GROUP_NORM, a);
}

wsp_ggml_tensor * diag_mask_impl(wsp_ggml_context * ctx, wsp_ggml_tensor * a, int n_past, bool inplace,
                                 wsp_ggml_op op) {
    wsp_ggml_tensor * r = result_like(ctx, a, inplace);
    wsp::set_op_param_i32(r, 0, n_past);
    return with_op(r, op, a);
}

} // namespace

extern "C" {

// ---- in-place forms of ggml.h's ops

struct wsp_ggml_tensor * wsp_ggml_dup_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return with_op(wsp_ggml_view_tensor(ctx, a), WSP_GGML_OP_DUP, a);
}

struct wsp_ggml_tensor * wsp_ggml_sub_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b) {
    return binary_inplace(ctx, a, b, WSP_GGML_OP_SUB, "wsp_ggml_sub_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_div_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b) {
    return binary_inplace(ctx, a, b, WSP_GGML_OP_DIV, "wsp_ggml_div_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_sqr_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_SQR, true);
}

struct wsp_ggml_tensor * wsp_ggml_sqrt_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_SQRT, true);
}

#define WSP_UNARY_INPLACE_BUILDER(name, id)                                                                         \
    struct wsp_ggml_tensor * wsp_ggml_##name##_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) { \
        return unary_inplace(ctx, a, id);                                                                           \
    }

WSP_UNARY_INPLACE_BUILDER(abs, WSP_GGML_UNARY_OP_ABS)
WSP_UNARY_INPLACE_BUILDER(sgn, WSP_GGML_UNARY_OP_SGN)
WSP_UNARY_INPLACE_BUILDER(neg, WSP_GGML_UNARY_OP_NEG)
WSP_UNARY_INPLACE_BUILDER(step, WSP_GGML_UNARY_OP_STEP)
WSP_UNARY_INPLACE_BUILDER(tanh, WSP_GGML_UNARY_OP_TANH)
WSP_UNARY_INPLACE_BUILDER(elu, WSP_GGML_UNARY_OP_ELU)
WSP_UNARY_INPLACE_BUILDER(relu, WSP_GGML_UNARY_OP_RELU)
WSP_UNARY_INPLACE_BUILDER(sigmoid, WSP_GGML_UNARY_OP_SIGMOID)
WSP_UNARY_INPLACE_BUILDER(gelu_erf, WSP_GGML_UNARY_OP_GELU_ERF)
WSP_UNARY_INPLACE_BUILDER(gelu_quick, WSP_GGML_UNARY_OP_GELU_QUICK)
WSP_UNARY_INPLACE_BUILDER(silu, WSP_GGML_UNARY_OP_SILU)
WSP_UNARY_INPLACE_BUILDER(exp, WSP_GGML_UNARY_OP_EXP)

#undef WSP_UNARY_INPLACE_BUILDER

struct wsp_ggml_tensor * wsp_ggml_soft_max_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    WSP_OP_CHECK(wsp_ggml_is_contiguous(a), "wsp_ggml_soft_max_inplace", a, nullptr, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, a);
    wsp::set_op_param_f32(r, 0, 1.0f); // scale
    wsp::set_op_param_f32(r, 1, 0.0f); // max_bias
    return with_op(r, WSP_GGML_OP_SOFT_MAX, a);
}

// ---- elementwise

struct wsp_ggml_tensor * wsp_ggml_add1(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                       struct wsp_ggml_tensor * b) {
    return add1_impl(ctx, a, b, false);
}

struct wsp_ggml_tensor * wsp_ggml_add1_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                               struct wsp_ggml_tensor * b) {
    return add1_impl(ctx, a, b, true);
}

struct wsp_ggml_tensor * wsp_ggml_add_cast(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                           struct wsp_ggml_tensor * b, enum wsp_ggml_type type) {
    const char * op = "wsp_ggml_add_cast";
    WSP_OP_CHECK(wsp_ggml_can_repeat(b, a), op, a, b, nullptr);
    // the kernels add float elements: quantized a (upstream's LoRA merge) is refused here
    WSP_OP_CHECK(is_float(a->type) && is_float(b->type), op, a, b, nullptr);
    if (!is_float(type)) {
        WSP_GGML_ABORT("%s: result type %s is not F32, F16 or BF16 (a = %s)", op, wsp_ggml_type_name(type),
                       describe(a).c_str());
    }
    return with_op(wsp_ggml_new_tensor(ctx, type, WSP_GGML_MAX_DIMS, a->ne), WSP_GGML_OP_ADD, a, b);
}

struct wsp_ggml_tensor * wsp_ggml_acc(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, false, WSP_GGML_OP_ACC, "wsp_ggml_acc");
}

struct wsp_ggml_tensor * wsp_ggml_acc_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                                              size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, true, WSP_GGML_OP_ACC, "wsp_ggml_acc_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_log(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_LOG, false);
}

struct wsp_ggml_tensor * wsp_ggml_log_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_LOG, true);
}

struct wsp_ggml_tensor * wsp_ggml_sin(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_SIN, false);
}

struct wsp_ggml_tensor * wsp_ggml_sin_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_SIN, true);
}

struct wsp_ggml_tensor * wsp_ggml_cos(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_COS, false);
}

struct wsp_ggml_tensor * wsp_ggml_cos_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return plain_map(ctx, a, WSP_GGML_OP_COS, true);
}

// as upstream, clamp computes in place: the result is a view of a
struct wsp_ggml_tensor * wsp_ggml_clamp(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float min,
                                        float max) {
    wsp_ggml_tensor * r = wsp_ggml_view_tensor(ctx, a);
    wsp::set_op_param_f32(r, 0, min);
    wsp::set_op_param_f32(r, 1, max);
    return with_op(r, WSP_GGML_OP_CLAMP, a);
}

struct wsp_ggml_tensor * wsp_ggml_leaky_relu(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                             float negative_slope, bool inplace) {
    return leaky_relu_impl(ctx, a, negative_slope, inplace);
}

// ---- reductions

struct wsp_ggml_tensor * wsp_ggml_sum(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return with_op(wsp_ggml_new_tensor_1d(ctx, a->type, 1), WSP_GGML_OP_SUM, a);
}

struct wsp_ggml_tensor * wsp_ggml_sum_rows(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    return with_op(wsp_ggml_new_tensor_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]), WSP_GGML_OP_SUM_ROWS, a);
}

struct wsp_ggml_tensor * wsp_ggml_argmax(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    const char * op = "wsp_ggml_argmax";
    WSP_OP_CHECK(wsp_ggml_is_matrix(a), op, a, nullptr, nullptr);
    WSP_OP_CHECK(a->ne[0] <= INT32_MAX, op, a, nullptr, nullptr);
    return with_op(wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I32, a->ne[1]), WSP_GGML_OP_ARGMAX, a);
}

struct wsp_ggml_tensor * wsp_ggml_count_equal(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b) {
    WSP_OP_CHECK(wsp_ggml_are_same_shape(a, b), "wsp_ggml_count_equal", a, b, nullptr);
    return with_op(wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_I64, 1), WSP_GGML_OP_COUNT_EQUAL, a, b);
}

// ---- norms

struct wsp_ggml_tensor * wsp_ggml_rms_norm(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float eps) {
    return eps_norm(ctx, a, eps, false, WSP_GGML_OP_RMS_NORM);
}

struct wsp_ggml_tensor * wsp_ggml_rms_norm_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                   float eps) {
    return eps_norm(ctx, a, eps, true, WSP_GGML_OP_RMS_NORM);
}

struct wsp_ggml_tensor * wsp_ggml_l2_norm(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, float eps) {
    return eps_norm(ctx, a, eps, false, WSP_GGML_OP_L2_NORM);
}

struct wsp_ggml_tensor * wsp_ggml_l2_norm_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                  float eps) {
    return eps_norm(ctx, a, eps, true, WSP_GGML_OP_L2_NORM);
}

struct wsp_ggml_tensor * wsp_ggml_group_norm(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int n_groups,
                                             float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, false);
}

struct wsp_ggml_tensor * wsp_ggml_group_norm_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                     int n_groups, float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, true);
}

// ---- set

struct wsp_ggml_tensor * wsp_ggml_set(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                      struct wsp_ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, false, WSP_GGML_OP_SET, "wsp_ggml_set");
}

struct wsp_ggml_tensor * wsp_ggml_set_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                              struct wsp_ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                                              size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, true, WSP_GGML_OP_SET, "wsp_ggml_set_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_set_1d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                         struct wsp_ggml_tensor * b, size_t offset) {
    return view_write_impl(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false, WSP_GGML_OP_SET, "wsp_ggml_set_1d");
}

struct wsp_ggml_tensor * wsp_ggml_set_1d_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                 struct wsp_ggml_tensor * b, size_t offset) {
    return view_write_impl(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true, WSP_GGML_OP_SET,
                           "wsp_ggml_set_1d_inplace");
}

struct wsp_ggml_tensor * wsp_ggml_set_2d(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                         struct wsp_ggml_tensor * b, size_t nb1, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, false, WSP_GGML_OP_SET, "wsp_ggml_set_2d");
}

struct wsp_ggml_tensor * wsp_ggml_set_2d_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                 struct wsp_ggml_tensor * b, size_t nb1, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, true, WSP_GGML_OP_SET,
                           "wsp_ggml_set_2d_inplace");
}

// ---- diag and the causal masks

struct wsp_ggml_tensor * wsp_ggml_diag(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a) {
    WSP_OP_CHECK(a->ne[1] == 1, "wsp_ggml_diag", a, nullptr, nullptr);
    return with_op(wsp_ggml_new_tensor_4d(ctx, a->type, a->ne[0], a->ne[0], a->ne[2], a->ne[3]), WSP_GGML_OP_DIAG, a);
}

struct wsp_ggml_tensor * wsp_ggml_diag_mask_inf(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a, int n_past) {
    return diag_mask_impl(ctx, a, n_past, false, WSP_GGML_OP_DIAG_MASK_INF);
}

struct wsp_ggml_tensor * wsp_ggml_diag_mask_inf_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                        int n_past) {
    return diag_mask_impl(ctx, a, n_past, true, WSP_GGML_OP_DIAG_MASK_INF);
}

struct wsp_ggml_tensor * wsp_ggml_diag_mask_zero(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                 int n_past) {
    return diag_mask_impl(ctx, a, n_past, false, WSP_GGML_OP_DIAG_MASK_ZERO);
}

struct wsp_ggml_tensor * wsp_ggml_diag_mask_zero_inplace(struct wsp_ggml_context * ctx, struct wsp_ggml_tensor * a,
                                                         int n_past) {
    return diag_mask_impl(ctx, a, n_past, true, WSP_GGML_OP_DIAG_MASK_ZERO);
}

} // extern "C"
