// Registration of the sim devices in the backend registry. Built into libwsp-ggml with the
// registry, so that the sim library itself does not depend on the library that loads it.

#include "sim.h"

#include <mutex>

namespace {
std::mutex             g_mutex;
wsp_ggml_backend_reg_t g_registered = nullptr;
} // namespace

extern "C" {

wsp_ggml_backend_reg_t wsp_ggml_backend_sim_register(int n_devices, size_t memory_mb) {
    wsp_ggml_backend_reg_t reg = wsp::sim::create_devices_once(n_devices, memory_mb);
    if (reg == nullptr) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_registered == nullptr) {
        g_registered = reg;
        wsp_ggml_backend_register(reg);
    }
    return reg;
}

wsp_ggml_backend_reg_t wsp_ggml_backend_sim_reg(void) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_registered;
}

} // extern "C"
