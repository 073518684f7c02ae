// wsp_ggml_backend_dev_get_counters: asks the device's reg (Note [counters]).

#include "counters.h"

#include "ggml-backend-impl.h"

#include <cstring>

extern "C" void wsp_ggml_backend_dev_get_counters(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_counters * out) {
    if (out == nullptr) {
        return;
    }
    std::memset(out, 0, sizeof(*out));
    if (dev == nullptr || dev->reg == nullptr) {
        return;
    }
    auto get =
        reinterpret_cast<wsp::GetCountersFn>(wsp_ggml_backend_reg_get_proc_address(dev->reg, wsp::COUNTERS_PROC));
    if (get != nullptr) {
        get(dev, out);
    }
}
