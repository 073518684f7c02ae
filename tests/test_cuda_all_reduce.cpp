// The CUDA reg's all-reduce, the proc "wsp_ggml_backend_all_reduce" (Note [NCCL all-reduce] in
// src/cuda/nccl.cuh): one F32 tensor per device summed in place, ordered on each backend's stream
// after the work queued there and before the work queued later; false with every tensor untouched
// where it cannot run (no NCCL, WSP_GGML_CUDA_NCCL=0, virtual devices, a subset of the GPUs, other
// tensors). The host target runs it on 2 devices (the cuda-host presets) and on 3
// (CudaNccl.AllReduceOnThreeDevices); skipped without a GPU.

#include "ggml-cuda.h"
#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace wsp::test {
namespace {

wsp_ggml_backend_all_reduce_t all_reduce_proc() {
    return reinterpret_cast<wsp_ggml_backend_all_reduce_t>(
        wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_cuda_reg(), "wsp_ggml_backend_all_reduce"));
}

bool env_is_zero(const char * name) {
    const char * v = std::getenv(name);
    return v != nullptr && std::atoi(v) == 0;
}

// Note [NCCL all-reduce]: NCCL built in, not turned off, and one rank per GPU (no virtual devices)
bool nccl_usable() {
    auto get = reinterpret_cast<wsp_ggml_backend_get_features_t>(
        wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_cuda_reg(), "wsp_ggml_backend_get_features"));
    bool built = false;
    for (wsp_ggml_backend_feature * f = get ? get(wsp_ggml_backend_cuda_reg()) : nullptr; f && f->name; ++f) {
        built = built || (std::strcmp(f->name, "NCCL") == 0 && std::strcmp(f->value, "1") == 0);
    }
    const char * virt = std::getenv("WSP_GGML_CUDA_VIRTUAL_DEVICES");
    return built && !env_is_zero("WSP_GGML_CUDA_NCCL") && !(virt != nullptr && std::atoi(virt) >= 1);
}

// device d's addend: integers and quarters of magnitude below 64, so that every sum is exact in
// F32 whatever order NCCL adds in
std::vector<float> addend(int d, size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = (float) ((i * 7 + (size_t) d * 13) % 101) - 50.0f + 0.25f * (float) d;
    }
    return v;
}

// A backend and a context per CUDA device; the context's tensors are allocated in that device's
// memory by alloc()
class PerDevice {
public:
    explicit PerDevice(int n) {
        for (int d = 0; d < n; ++d) {
            wsp_ggml_init_params p{ 16 * wsp_ggml_tensor_overhead(), nullptr, true };
            ctxs_.push_back(wsp_ggml_init(p));
            backends.push_back(wsp_ggml_backend_cuda_init(d));
        }
    }
    ~PerDevice() {
        for (wsp_ggml_backend_t b : backends) {
            wsp_ggml_backend_free(b);
        }
        for (wsp_ggml_backend_buffer_t b : bufs_) {
            wsp_ggml_backend_buffer_free(b);
        }
        for (wsp_ggml_context * c : ctxs_) {
            wsp_ggml_free(c);
        }
    }
    PerDevice(const PerDevice &)             = delete;
    PerDevice & operator=(const PerDevice &) = delete;

    wsp_ggml_context * ctx(int d) { return ctxs_[(size_t) d]; }

    // a tensor per device
    std::vector<wsp_ggml_tensor *> tensors(wsp_ggml_type type, const std::vector<int64_t> & ne) {
        std::vector<wsp_ggml_tensor *> t;
        for (wsp_ggml_context * c : ctxs_) {
            t.push_back(wsp_ggml_new_tensor(c, type, (int) ne.size(), ne.data()));
        }
        return t;
    }

    bool alloc() {
        for (size_t d = 0; d < ctxs_.size(); ++d) {
            bufs_.push_back(
                wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctxs_[d], wsp_ggml_backend_cuda_buffer_type((int) d)));
            if (bufs_.back() == nullptr) {
                return false;
            }
        }
        return true;
    }

    void synchronize() {
        for (wsp_ggml_backend_t b : backends) {
            wsp_ggml_backend_synchronize(b);
        }
    }

    std::vector<wsp_ggml_backend_t> backends;

private:
    std::vector<wsp_ggml_context *>        ctxs_;
    std::vector<wsp_ggml_backend_buffer_t> bufs_;
};

// got equals want exactly; the first mismatches printed
void expect_values(const std::vector<float> & got, const std::vector<float> & want, const std::string & what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int shown = 0;
    for (size_t i = 0; i < got.size() && shown < 5; ++i) {
        if (got[i] != want[i]) {
            ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
            ++shown;
        }
    }
}

// sets device d's tensor to its addend, queued on the device's backend (the all-reduce must come
// after it)
std::vector<std::vector<float>> set_addends(PerDevice & p, const std::vector<wsp_ggml_tensor *> & t) {
    std::vector<std::vector<float>> v;
    for (size_t d = 0; d < t.size(); ++d) {
        v.push_back(addend((int) d, (size_t) wsp_ggml_nelements(t[d])));
        wsp_ggml_backend_tensor_set_async(p.backends[d], t[d], v.back().data(), 0, wsp_ggml_nbytes(t[d]));
    }
    return v;
}

// each device's tensor, read back on its backend's stream (after the work queued there)
std::vector<std::vector<float>> read_back(PerDevice & p, const std::vector<wsp_ggml_tensor *> & t) {
    std::vector<std::vector<float>> v(t.size());
    for (size_t d = 0; d < t.size(); ++d) {
        v[d].resize((size_t) wsp_ggml_nelements(t[d]));
        wsp_ggml_backend_tensor_get_async(p.backends[d], t[d], v[d].data(), 0, wsp_ggml_nbytes(t[d]));
    }
    p.synchronize();
    return v;
}

// On every device: shapes of one element, primes, 4-D, and several MiB (above NCCL's small-message
// protocols); two all-reduces in a row (the second sums the sums); every device holds the exact sum,
// or, where NCCL cannot run, false and its own values. With 3 or more devices, a subset of them is
// refused (a collective needs every rank of the communicator).
// one device: the all-reduce of one participant is a sum of one (true, its values kept), and
// none is refused
void expect_sum_of_one() {
    const wsp_ggml_backend_all_reduce_t reduce = all_reduce_proc();
    ASSERT_NE(reduce, nullptr) << "the proc exists in every build, NCCL or not";
    PerDevice                      p(1);
    std::vector<wsp_ggml_tensor *> t = p.tensors(WSP_GGML_TYPE_F32, { 1031, 3 });
    ASSERT_TRUE(p.alloc());
    const std::vector<std::vector<float>> v = set_addends(p, t);
    EXPECT_TRUE(reduce(p.backends.data(), t.data(), 1));
    EXPECT_EQ(read_back(p, t), v);
    EXPECT_FALSE(reduce(p.backends.data(), t.data(), 0));
}

// the devices an all-reduce spans here; 0 once the one-device case (a sum of one) is checked
int devices_to_sum() {
    const int n = wsp_ggml_backend_cuda_get_device_count();
    if (n < 2) {
        expect_sum_of_one();
        return 0;
    }
    return n;
}

TEST(CudaNccl, AllReduceSumsOnEveryDevice) {
    REQUIRE_GPU();
    const int n = devices_to_sum();
    if (n == 0) {
        return;
    }
    const wsp_ggml_backend_all_reduce_t reduce = all_reduce_proc();
    ASSERT_NE(reduce, nullptr) << "the proc exists in every build, NCCL or not";
    const bool nccl = nccl_usable();
    for (const std::vector<int64_t> & ne :
         std::vector<std::vector<int64_t>>{ { 1 }, { 1031, 3 }, { 64, 5, 2, 3 }, { (1 << 20) + 7 } }) {
        PerDevice                      p(n);
        std::vector<wsp_ggml_tensor *> t = p.tensors(WSP_GGML_TYPE_F32, ne);
        ASSERT_TRUE(p.alloc());
        const std::string               shape = shape_str(t[0]);
        std::vector<std::vector<float>> v     = set_addends(p, t);
        std::vector<float>              sum((size_t) wsp_ggml_nelements(t[0]), 0.0f);
        for (const std::vector<float> & a : v) {
            for (size_t i = 0; i < sum.size(); ++i) {
                sum[i] += a[i];
            }
        }
        LogCapture log;
        EXPECT_EQ(reduce(p.backends.data(), t.data(), n), nccl) << shape << ": " << log.text();
        std::vector<std::vector<float>> got = read_back(p, t);
        for (int d = 0; d < n; ++d) {
            expect_values(got[(size_t) d], nccl ? sum : v[(size_t) d], shape + " on device " + std::to_string(d));
        }
        EXPECT_EQ(reduce(p.backends.data(), t.data(), n), nccl) << shape << ": " << log.text();
        got = read_back(p, t);
        for (size_t i = 0; i < sum.size(); ++i) {
            sum[i] *= (float) n;
        }
        for (int d = 0; d < n; ++d) {
            expect_values(got[(size_t) d], nccl ? sum : v[(size_t) d],
                          shape + " on device " + std::to_string(d) + ", second all-reduce");
        }
        if (n >= 3) {
            EXPECT_FALSE(reduce(p.backends.data(), t.data(), 2)) << shape << ": two of " << n << " devices";
            const std::vector<std::vector<float>> after = read_back(p, t);
            EXPECT_EQ(after, got) << shape << ": a refused all-reduce changed a tensor";
        }
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    }
}

// Refused, with nothing queued (every tensor keeps its values), whatever NCCL can do: F16,
// mismatched shapes (also of one element count), a non-contiguous view, a tensor in another
// device's memory than its backend's, one device twice, a backend that is not CUDA, no
// participants. A single participant is a sum of one: true, nothing changes.
TEST(CudaNccl, AllReduceRefusesWhatItCannotSum) {
    REQUIRE_GPU();
    const int n = devices_to_sum();
    if (n == 0) {
        return;
    }
    const wsp_ggml_backend_all_reduce_t reduce = all_reduce_proc();
    ASSERT_NE(reduce, nullptr);
    PerDevice                      p(n);
    std::vector<wsp_ggml_tensor *> a     = p.tensors(WSP_GGML_TYPE_F32, { 1031, 3 });
    std::vector<wsp_ggml_tensor *> twin  = p.tensors(WSP_GGML_TYPE_F32, { 1031, 3 });
    std::vector<wsp_ggml_tensor *> half  = p.tensors(WSP_GGML_TYPE_F16, { 1031, 3 });
    std::vector<wsp_ggml_tensor *> other = p.tensors(WSP_GGML_TYPE_F32, { 1031, 2 });
    std::vector<wsp_ggml_tensor *> flip  = p.tensors(WSP_GGML_TYPE_F32, { 3, 1031 });
    ASSERT_TRUE(p.alloc());
    std::vector<wsp_ggml_tensor *> transposed;
    for (int d = 0; d < n; ++d) {
        transposed.push_back(wsp_ggml_transpose(p.ctx(d), flip[(size_t) d])); // 1031 x 3, not contiguous
    }
    const std::vector<std::vector<float>> v = set_addends(p, a);
    p.synchronize();
    for (int d = 0; d < n; ++d) {
        wsp_ggml_backend_tensor_memset(half[(size_t) d], 0, 0, wsp_ggml_nbytes(half[(size_t) d]));
    }

    auto mixed = [&](std::vector<wsp_ggml_tensor *> t, size_t i, wsp_ggml_tensor * with) {
        t[i] = with;
        return t;
    };
    std::vector<wsp_ggml_tensor *> swapped = a;
    std::swap(swapped[0], swapped[1]);
    const std::vector<std::pair<std::string, std::vector<wsp_ggml_tensor *>>> refused = {
        { "F16", half },
        { "another shape on the last device", mixed(a, (size_t) n - 1, other[(size_t) n - 1]) },
        { "the same element count in another shape", mixed(a, 0, flip[0]) },
        { "a transposed view", mixed(a, 1, transposed[1]) },
        { "every tensor a transposed view", transposed },
        { "tensors on each other's devices", swapped },
    };
    LogCapture log;
    for (const auto & [what, t] : refused) {
        EXPECT_FALSE(reduce(p.backends.data(), const_cast<wsp_ggml_tensor **>(t.data()), n)) << what;
    }

    // device 0 twice (a second backend of it in device 1's place)
    wsp_ggml_backend_t              second = wsp_ggml_backend_cuda_init(0);
    std::vector<wsp_ggml_backend_t> twice  = p.backends;
    twice[1]                               = second;
    EXPECT_FALSE(reduce(twice.data(), mixed(a, 1, twin[0]).data(), n)) << "device 0 twice";
    wsp_ggml_backend_t              cpu     = wsp_ggml_backend_cpu_init();
    std::vector<wsp_ggml_backend_t> not_gpu = p.backends;
    not_gpu[0]                              = cpu;
    EXPECT_FALSE(reduce(not_gpu.data(), a.data(), n)) << "a CPU backend";
    EXPECT_FALSE(reduce(p.backends.data(), a.data(), 0)) << "no participants";
    EXPECT_FALSE(reduce(nullptr, nullptr, n)) << "null arrays";
    EXPECT_TRUE(reduce(p.backends.data(), a.data(), 1)) << "a sum of one";

    const std::vector<std::vector<float>> after = read_back(p, a);
    for (int d = 0; d < n; ++d) {
        expect_values(after[(size_t) d], v[(size_t) d], "device " + std::to_string(d) + " after the refusals");
    }
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 0) << log.text();
    wsp_ggml_backend_free(cpu);
    wsp_ggml_backend_free(second);
}

} // namespace
} // namespace wsp::test
