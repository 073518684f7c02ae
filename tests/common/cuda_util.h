#pragma once

// Helpers for the CUDA suites: the skip for machines without a GPU, a comparison of every node
// of a graph computed on each CUDA device with the same graph on the CPU backend, the CUDA
// result of one node, operands in every layout and an NMSE check that also compares non-finite
// values.

#include "ggml-cuda.h"
#include "ggml-sim.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace wsp::test {

#define REQUIRE_GPU()                                                                                               \
    if (wsp_ggml_backend_cuda_get_device_count() == 0) {                                                            \
        GTEST_SKIP() << "no " WSP_GGML_CUDA_NAME " device (no driver or no GPU on this machine); run gpu-check.sh"; \
    }

// Note [refused capabilities]: a GPU machine may decline to pin host memory (cudaHostRegister, in
// some virtual machines and sandboxes) or to let one GPU read another's memory (no P2P between the
// two); the suites that need either skip there with the runtime's own answer. The runtime is asked
// directly, not through the backend under test: its functions looked up by name in the process
// (the CUDA runtime the backend loaded, or HIP's). The host target's are C++ names, not found:
// there nothing is refused, its presets choose what its emulated devices allow
// (WSP_GGML_CUDA_HOST_PEER).
namespace detail {
inline void * runtime_function(const char * cuda_name, const char * hip_name) {
    void * f = dlsym(RTLD_DEFAULT, cuda_name);
    return f != nullptr ? f : dlsym(RTLD_DEFAULT, hip_name);
}

// the runtime's name for an error code, and the error cleared (a refusal is not sticky)
inline std::string runtime_error(int code) {
    auto name  = reinterpret_cast<const char * (*) (int)>(runtime_function("cudaGetErrorString", "hipGetErrorString"));
    auto clear = reinterpret_cast<int (*)()>(runtime_function("cudaGetLastError", "hipGetLastError"));
    if (clear != nullptr) {
        clear();
    }
    return std::string(name != nullptr ? name(code) : "error") + " (" + std::to_string(code) + ")";
}
} // namespace detail

// why the runtime refuses to pin malloc'd memory, or "" when it pins it
inline std::string pinning_refused() {
    auto reg = reinterpret_cast<int (*)(void *, size_t, unsigned)>(
        detail::runtime_function("cudaHostRegister", "hipHostRegister"));
    auto unreg = reinterpret_cast<int (*)(void *)>(detail::runtime_function("cudaHostUnregister", "hipHostUnregister"));
    if (reg == nullptr || unreg == nullptr || wsp_ggml_backend_cuda_get_device_count() == 0) {
        return "";
    }
    std::vector<char> mem(1 << 16);
    if (const int e = reg(mem.data(), mem.size(), 0); e != 0) {
        return "this machine refuses to pin host memory: cudaHostRegister: " + detail::runtime_error(e);
    }
    unreg(mem.data());
    return "";
}

// why device a's kernels cannot read device b's memory, or "" when they can (devices of the CUDA
// backend; virtual devices share one GPU)
inline std::string peer_access_refused(int a, int b) {
    const char * virtual_n = std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES");
    if (a == b || (virtual_n != nullptr && std::atoi(virtual_n) > 0)) {
        return "";
    }
    auto can_access = reinterpret_cast<int (*)(int *, int, int)>(
        detail::runtime_function("cudaDeviceCanAccessPeer", "hipDeviceCanAccessPeer"));
    if (can_access == nullptr) {
        return "";
    }
    int               can  = 0;
    const int         e    = can_access(&can, a, b);
    const std::string pair = "device " + std::to_string(a) + " to device " + std::to_string(b);
    if (e != 0) {
        return "cudaDeviceCanAccessPeer(" + pair + "): " + detail::runtime_error(e);
    }
    return can ? "" : "the hardware refuses peer access from " + pair + " (cudaDeviceCanAccessPeer)";
}

#define REQUIRE_PINNING()                                                                     \
    if (const std::string why_refused = wsp::test::pinning_refused(); !why_refused.empty()) { \
        GTEST_SKIP() << why_refused;                                                          \
    }

#define REQUIRE_PEER_ACCESS(a, b)                                                                     \
    if (const std::string why_refused = wsp::test::peer_access_refused(a, b); !why_refused.empty()) { \
        GTEST_SKIP() << why_refused;                                                                  \
    }

// Emulated devices (the host target, sims) watch every stream with the process's happens-before
// checker (Note [happens-before checker]): a CUDA suite fails when anything it ran raced. ctest
// runs each test case in a process of its own, so the count is per test case.
// A test that makes races on purpose, to see them reported, adds them to expected_races.
inline size_t expected_races = 0;

class NoRacesEnvironment : public ::testing::Environment {
public:
    void TearDown() override {
        EXPECT_EQ(wsp_ggml_backend_sim_races(), expected_races)
            << "unordered accesses to device memory (see RACE: above)";
    }
};
inline ::testing::Environment * const no_races_environment =
    ::testing::AddGlobalTestEnvironment(new NoRacesEnvironment);

// a device tensor's values, read back and viewed with its own strides
inline std::vector<float> device_values(const wsp_ggml_tensor * t) {
    std::vector<uint8_t> raw(wsp_ggml_nbytes(t));
    wsp_ggml_backend_tensor_get(const_cast<wsp_ggml_tensor *>(t), raw.data(), 0, raw.size());
    wsp_ggml_tensor host = *t;
    host.data            = raw.data();
    host.buffer          = nullptr;
    host.view_src        = nullptr;
    return get_values(&host);
}

// build(ctx) makes a graph of ops CUDA supports; every node is compared with the CPU's. Float
// inputs get random values (a seed of their own each), I32 inputs zeros (valid row indices).
inline void compare_with_cpu(const std::function<wsp_ggml_tensor *(wsp_ggml_context *)> & build, double tolerance) {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        Graph             g;
        wsp_ggml_tensor * out = build(g.ctx());
        g.build(out);
        uint32_t seed = 5;
        for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(g.ctx()); t; t = wsp_ggml_get_next_tensor(g.ctx(), t)) {
            if ((t->flags & WSP_GGML_TENSOR_FLAG_INPUT) && t->type == WSP_GGML_TYPE_I32) {
                set_values(t, std::vector<float>((size_t) wsp_ggml_nelements(t), 0.0f));
            } else if (t->flags & WSP_GGML_TENSOR_FLAG_INPUT) {
                set_values(t, round_trip(t->type, random_values((size_t) wsp_ggml_nelements(t), seed++)));
            }
        }
        wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(d);
        struct Ctx {
            double tol;
            int    checked;
        } c{ tolerance, 0 };
        const bool ok = wsp_ggml_backend_compare_graph_backend(
            g.backend(), cuda, g.graph(),
            [](int i, wsp_ggml_tensor * t1, wsp_ggml_tensor * t2, void * ud) {
                auto * c = static_cast<Ctx *>(ud);
                if (t1->op == WSP_GGML_OP_NONE || wsp_ggml_is_empty(t1)) {
                    return true;
                }
                const std::vector<float> v1 = get_values(t1), v2 = device_values(t2);
                EXPECT_LT(nmse(v2, v1), c->tol) << "node " << i << " " << wsp_ggml_op_desc(t1) << " " << shape_str(t1);
                ++c->checked;
                return true;
            },
            &c);
        EXPECT_TRUE(ok);
        EXPECT_GT(c.checked, 0);
        wsp_ggml_backend_free(cuda);
    }
}

// The CUDA result of node `out` of g (whose inputs were set on the CPU side) on one device.
inline std::vector<float> cuda_output(Graph & g, wsp_ggml_tensor * out, int device) {
    struct Ctx {
        int                idx = -1;
        std::vector<float> values;
    } c;
    for (int i = 0; i < wsp_ggml_graph_n_nodes(g.graph()); ++i) {
        if (wsp_ggml_graph_node(g.graph(), i) == out) {
            c.idx = i;
        }
    }
    EXPECT_GE(c.idx, 0);
    wsp_ggml_backend_t cuda = wsp_ggml_backend_cuda_init(device);
    EXPECT_NE(cuda, nullptr);
    const bool ok = wsp_ggml_backend_compare_graph_backend(
        g.backend(), cuda, g.graph(),
        [](int i, wsp_ggml_tensor *, wsp_ggml_tensor * t2, void * ud) {
            auto * c = static_cast<Ctx *>(ud);
            if (i == c->idx) {
                c->values = device_values(t2);
            }
            return true;
        },
        &c);
    EXPECT_TRUE(ok);
    wsp_ggml_backend_free(cuda);
    return c.values;
}

// the operand layouts of the CUDA suites (test_util.h)
inline const std::vector<Layout> LAYOUTS = { Layout::Contiguous, Layout::Permuted, Layout::Strided };

// a new input of logical shape ne: contiguous, permuted (dims 0 and 1 swapped, over an input of
// shape [ne1, ne0, ...]) or strided (rows of ne0 inside rows of ne0 + 3, starting one element in)
inline wsp_ggml_tensor * operand(wsp_ggml_context * ctx, wsp_ggml_type type, std::vector<int64_t> ne, Layout layout) {
    ne.resize(4, 1);
    wsp_ggml_tensor * base;
    switch (layout) {
        case Layout::Contiguous: base = wsp_ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]); break;
        case Layout::Permuted: base = wsp_ggml_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]); break;
        default: base = wsp_ggml_new_tensor_4d(ctx, type, ne[0] + 3, ne[1], ne[2], ne[3]); break;
    }
    wsp_ggml_set_input(base);
    if (layout == Layout::Contiguous) {
        return base;
    }
    if (layout == Layout::Permuted) {
        return wsp_ggml_permute(ctx, base, 1, 0, 2, 3);
    }
    return wsp_ggml_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3],
                            wsp_ggml_type_size(type));
}

// NMSE over the pairs of finite values below tol; non-finite ones must be identical (NaN matching NaN)
inline void expect_close(const std::vector<float> & gpu, const std::vector<float> & cpu, double tol,
                         const std::string & what) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    double             err = 0.0, norm = 0.0, worst = -1.0;
    size_t             worst_i = 0, n_odd = 0;
    std::ostringstream odd;
    for (size_t i = 0; i < cpu.size(); ++i) {
        const float a = gpu[i], b = cpu[i];
        if (!std::isfinite(a) || !std::isfinite(b)) {
            if (!((std::isnan(a) && std::isnan(b)) || a == b) && n_odd++ < 4) {
                odd << " [" << i << "] gpu " << a << " cpu " << b;
            }
            continue;
        }
        const double d = (double) a - (double) b;
        err += d * d;
        norm += (double) b * b;
        if (std::fabs(d) > worst) {
            worst   = std::fabs(d);
            worst_i = i;
        }
    }
    EXPECT_EQ(n_odd, 0u) << what << ": non-finite values differ:" << odd.str();
    const double e = norm > 0.0 ? err / norm : err;
    EXPECT_LT(e, tol) << what << ": worst [" << worst_i << "] gpu " << gpu[worst_i] << " cpu " << cpu[worst_i];
}

// WSP_GGML_CUDA_GRAPHS for the CUDA backends made while it lives (each reads it when it starts),
// the setting before restored after
class GraphsSetting {
public:
    explicit GraphsSetting(const char * value) {
        const char * old = std::getenv("WSP_GGML_CUDA_GRAPHS");
        had_             = old != nullptr;
        old_             = had_ ? old : "";
        setenv("WSP_GGML_CUDA_GRAPHS", value, 1);
    }
    ~GraphsSetting() {
        if (had_) {
            setenv("WSP_GGML_CUDA_GRAPHS", old_.c_str(), 1);
        } else {
            unsetenv("WSP_GGML_CUDA_GRAPHS");
        }
    }

private:
    bool        had_;
    std::string old_;
};

} // namespace wsp::test
