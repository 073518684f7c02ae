// MAP_CUSTOM1: the user's function runs on n_tasks threads (all of them for
// WSP_GGML_N_TASKS_MAX), each call told its task index and the task count.

#include "ops.h"

namespace wsp::cpu {

namespace {

CustomOp1Params params_of(const wsp_ggml_tensor * dst) {
    CustomOp1Params params;
    std::memcpy(&params, dst->op_params, sizeof(params));
    return params;
}

void compute(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const CustomOp1Params params = params_of(dst);
    params.fun(dst, dst->src[0], p.ith, p.nth, params.userdata);
}

int n_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const int n = params_of(dst).n_tasks;
    return n == WSP_GGML_N_TASKS_MAX ? n_threads : (n < n_threads ? n : n_threads);
}

bool supported(const wsp_ggml_tensor *) {
    return true;
}

} // namespace

const OpKernel kernel_custom1 = { supported, n_tasks, nullptr, compute };

} // namespace wsp::cpu
