#pragma once

// op_params of the custom ops of two, three and any number of sources (MAP_CUSTOM2, MAP_CUSTOM3,
// CUSTOM): the user's function, its task count (WSP_GGML_N_TASKS_MAX: one per thread) and its
// userdata, stored by the builders (ops_custom.cpp) and read by the CPU kernels (cpu/custom.cpp).

#include "impl.h"

namespace wsp {

struct CustomOp2Params {
    wsp_ggml_custom2_op_t fun;
    int                   n_tasks;
    void *                userdata;
};

struct CustomOp3Params {
    wsp_ggml_custom3_op_t fun;
    int                   n_tasks;
    void *                userdata;
};

struct CustomOpParams {
    wsp_ggml_custom_op_t fun;
    int                  n_tasks;
    void *               userdata;
};

static_assert(sizeof(CustomOpParams) <= WSP_GGML_MAX_OP_PARAMS, "custom op params fit op_params");

// the params struct P stored in t's op_params
template <typename P>
P custom_params_of(const wsp_ggml_tensor * t) {
    P p;
    std::memcpy(&p, t->op_params, sizeof(p));
    return p;
}

} // namespace wsp
