#pragma once

// Note [reg hooks]: a reg made over another reg's devices (the all-GPU device over CUDA's GPUs or
// the sims) joins the registry through a hook, so the registry knows no such device by name.
// Every reg the registry adds is offered to every hook; the reg a hook makes over it is registered
// right after it, its devices after the reg's own (or before every GPU device, where the hook
// says so), and it goes when the reg it was made over goes. A hook added after regs were
// registered is offered those at once. Hooks are added by the library's own static initializers.

#include "ggml-backend.h"

namespace wsp::backend {

struct RegHook {
    // the reg made over reg's devices; NULL for none
    wsp_ggml_backend_reg_t (*make)(wsp_ggml_backend_reg_t reg);
    // the reg `over` was made over, NULL where `over` was not made by this hook
    wsp_ggml_backend_reg_t (*made_over)(wsp_ggml_backend_reg_t over);
    // true: the made reg's devices are listed before every GPU device
    bool (*listed_first)();
};

void add_reg_hook(const RegHook & hook);

} // namespace wsp::backend
