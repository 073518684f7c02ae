// MAP_CUSTOM1/2/3 and CUSTOM: the user's function runs on n_tasks threads (all of them for
// WSP_GGML_N_TASKS_MAX), each call told its task index and the task count. The function owns the
// computation, so the CPU accepts every node of these ops whatever its types and layouts.

#include "../core/ops_custom.h"
#include "ops.h"

namespace wsp::cpu {

namespace {

template <typename P>
int custom_tasks(const wsp_ggml_tensor * dst, int n_threads) {
    const int n = custom_params_of<P>(dst).n_tasks;
    return n == WSP_GGML_N_TASKS_MAX ? n_threads : (n < n_threads ? n : n_threads);
}

void compute1(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const auto params = custom_params_of<CustomOp1Params>(dst);
    params.fun(dst, dst->src[0], p.ith, p.nth, params.userdata);
}

void compute2(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const auto params = custom_params_of<CustomOp2Params>(dst);
    params.fun(dst, dst->src[0], dst->src[1], p.ith, p.nth, params.userdata);
}

void compute3(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const auto params = custom_params_of<CustomOp3Params>(dst);
    params.fun(dst, dst->src[0], dst->src[1], dst->src[2], p.ith, p.nth, params.userdata);
}

void compute_any(const ComputeParams & p, wsp_ggml_tensor * dst) {
    const auto params = custom_params_of<CustomOpParams>(dst);
    params.fun(dst, p.ith, p.nth, params.userdata);
}

bool supported(const wsp_ggml_tensor *) {
    return true;
}

} // namespace

const OpKernel kernel_custom1 = { supported, custom_tasks<CustomOp1Params>, nullptr, compute1 };
const OpKernel kernel_custom2 = { supported, custom_tasks<CustomOp2Params>, nullptr, compute2 };
const OpKernel kernel_custom3 = { supported, custom_tasks<CustomOp3Params>, nullptr, compute3 };
const OpKernel kernel_custom  = { supported, custom_tasks<CustomOpParams>, nullptr, compute_any };

} // namespace wsp::cpu
