// The training entry points of ggml.h: parameters and losses, the backward graph, gradients,
// the optimizer step, the losses and the *_back ops. This library does inference only; each of
// them stops the process with a message that says so and names the function, so a training
// program fails at its first call instead of computing something else.

#include "impl.h"

namespace {

[[noreturn]] void no_training(const char * fn) {
    WSP_GGML_ABORT("%s: training is not supported by this library (wsp-ggml does inference only: no "
                   "backward pass, gradients, losses or optimizer)",
                   fn);
}

} // namespace

extern "C" {

void wsp_ggml_set_param(struct wsp_ggml_tensor *) {
    no_training(__func__);
}

void wsp_ggml_set_loss(struct wsp_ggml_tensor *) {
    no_training(__func__);
}

void wsp_ggml_build_backward_expand(struct wsp_ggml_context *, struct wsp_ggml_cgraph *, struct wsp_ggml_tensor **) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_graph_get_grad(const struct wsp_ggml_cgraph *, const struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_graph_get_grad_acc(const struct wsp_ggml_cgraph *, const struct wsp_ggml_tensor *) {
    no_training(__func__);
}

void wsp_ggml_graph_reset(struct wsp_ggml_cgraph *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_opt_step_adamw(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                 struct wsp_ggml_tensor *, struct wsp_ggml_tensor *,
                                                 struct wsp_ggml_tensor *, struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_cross_entropy_loss(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                     struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_cross_entropy_loss_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                          struct wsp_ggml_tensor *, struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_silu_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                            struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_rms_norm_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                struct wsp_ggml_tensor *, float) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_repeat_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                              struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_get_rows_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                struct wsp_ggml_tensor *, struct wsp_ggml_tensor *) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_soft_max_ext_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                    struct wsp_ggml_tensor *, float, float) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_soft_max_ext_back_inplace(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                            struct wsp_ggml_tensor *, float, float) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_rope_ext_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                struct wsp_ggml_tensor *, struct wsp_ggml_tensor *, int, int, int,
                                                float, float, float, float, float, float) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_rope_multi_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                  struct wsp_ggml_tensor *, struct wsp_ggml_tensor *, int, int[4], int,
                                                  int, float, float, float, float, float, float) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_im2col_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                              struct wsp_ggml_tensor *, int64_t *, int, int, int, int, int, int, bool) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_pool_2d_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                               struct wsp_ggml_tensor *, enum wsp_ggml_op_pool, int, int, int, int,
                                               float, float) {
    no_training(__func__);
}

struct wsp_ggml_tensor * wsp_ggml_flash_attn_back(struct wsp_ggml_context *, struct wsp_ggml_tensor *,
                                                  struct wsp_ggml_tensor *, struct wsp_ggml_tensor *,
                                                  struct wsp_ggml_tensor *, bool) {
    no_training(__func__);
}

} // extern "C"
