#pragma once

// Helpers for suites that run on sim devices: registration (4 devices of 256 MiB, once per
// process), backends for the first n devices plus the CPU (CPU last, as the scheduler wants),
// and a guard that fails the test when a kernel touched foreign memory.

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-sim.h"

#include <gtest/gtest.h>

#include <vector>

namespace wsp::test {

constexpr int SIM_DEVICES = 4;

inline wsp_ggml_backend_reg_t sim_reg() {
    static wsp_ggml_backend_reg_t reg = wsp_ggml_backend_sim_register(SIM_DEVICES, 256);
    return reg;
}

inline wsp_ggml_backend_dev_t sim_dev(int i) {
    return wsp_ggml_backend_reg_dev_get(sim_reg(), (size_t) i);
}

// n sim backends (with the given per-command delay) followed by a CPU backend
class SimBackends {
public:
    SimBackends(int n, int delay_us, int cpu_threads = 2) : SimBackends(first(n), delay_us, cpu_threads) {}

    // backends on the given devices (a device may appear in several SimBackends: streams differ)
    SimBackends(const std::vector<int> & devices, int delay_us, int cpu_threads) : delay_us_(delay_us) {
        for (int i : devices) {
            if (delay_us != 0) {
                wsp_ggml_backend_sim_set_delay_us(sim_dev(i), delay_us);
            }
            devices_.push_back(i);
            backends_.push_back(wsp_ggml_backend_dev_init(sim_dev(i), nullptr));
        }
        wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
        wsp_ggml_backend_cpu_set_n_threads(cpu, cpu_threads);
        backends_.push_back(cpu);
    }

    ~SimBackends() {
        for (wsp_ggml_backend_t b : backends_) {
            wsp_ggml_backend_free(b);
        }
        for (int i : devices_) {
            if (delay_us_ != 0) {
                wsp_ggml_backend_sim_set_delay_us(sim_dev(i), 0);
            }
        }
    }
    SimBackends(const SimBackends &)             = delete;
    SimBackends & operator=(const SimBackends &) = delete;

    std::vector<wsp_ggml_backend_t> & all() { return backends_; }
    wsp_ggml_backend_t                sim(int i) const { return backends_[(size_t) i]; }
    wsp_ggml_backend_t                cpu() const { return backends_.back(); }
    int                               n_sim() const { return (int) backends_.size() - 1; }

private:
    static std::vector<int> first(int n) {
        std::vector<int> v;
        for (int i = 0; i < n; ++i) {
            v.push_back(i);
        }
        return v;
    }

    int                             delay_us_ = 0;
    std::vector<int>                devices_;
    std::vector<wsp_ggml_backend_t> backends_;
};

// Fails the test when, during its life, a sim kernel touched memory of another device or the
// happens-before checker found a race. The counters are process-wide; a test that causes either
// on purpose must account for it.
class ForeignAccessGuard {
public:
    ForeignAccessGuard() : foreign_(wsp_ggml_backend_sim_foreign_accesses()), races_(wsp_ggml_backend_sim_races()) {}
    ~ForeignAccessGuard() {
        EXPECT_EQ(wsp_ggml_backend_sim_foreign_accesses(), foreign_) << "a sim kernel touched memory of another device";
        EXPECT_EQ(wsp_ggml_backend_sim_races(), races_) << "unordered accesses to sim device memory (see RACE: above)";
    }

private:
    size_t foreign_, races_;
};

} // namespace wsp::test
