// The CUDA backend: registry and properties (checked with or without a GPU), buffers, transfers
// and events, and every part-1 op on every CUDA device against the CPU backend by NMSE.
// Without a GPU the GPU cases are skipped with the reason; gpu-check.sh runs them on a GPU,
// also under WSP_GGML_CUDA_VIRTUAL_DEVICES=2.

#include "ggml-cuda.h"
#include "cuda_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

namespace wsp::test {
namespace {

TEST(CudaRegistry, RegAndDevicesAgree) {
    wsp_ggml_backend_reg_t reg = wsp_ggml_backend_cuda_reg();
    ASSERT_NE(reg, nullptr);
    EXPECT_STREQ(wsp_ggml_backend_reg_name(reg), WSP_GGML_CUDA_NAME); // "ROCm" under HIP
    EXPECT_EQ(wsp_ggml_backend_reg_by_name(WSP_GGML_CUDA_NAME), reg); // registered with the registry
    const int n = wsp_ggml_backend_cuda_get_device_count();
    EXPECT_EQ(wsp_ggml_backend_reg_dev_count(reg), (size_t) n);
    for (int i = 0; i < n; ++i) {
        wsp_ggml_backend_dev_t dev = wsp_ggml_backend_reg_dev_get(reg, (size_t) i);
        EXPECT_EQ(std::string(wsp_ggml_backend_dev_name(dev)), WSP_GGML_CUDA_NAME + std::to_string(i));
        EXPECT_EQ(wsp_ggml_backend_dev_type(dev), WSP_GGML_BACKEND_DEVICE_TYPE_GPU);
        char desc[256];
        wsp_ggml_backend_cuda_get_device_description(i, desc, sizeof(desc));
        EXPECT_STREQ(desc, wsp_ggml_backend_dev_description(dev));
        EXPECT_NE(std::string(desc).find("PCI"), std::string::npos);
        size_t free_mem = 0, total = 0;
        wsp_ggml_backend_cuda_get_device_memory(i, &free_mem, &total);
        EXPECT_GT(total, 0u);
        EXPECT_LE(free_mem, total);
        wsp_ggml_backend_dev_props props;
        wsp_ggml_backend_dev_get_props(dev, &props);
        EXPECT_TRUE(props.caps.async && props.caps.events && props.caps.host_buffer);
        EXPECT_STREQ(wsp_ggml_backend_buft_name(wsp_ggml_backend_cuda_buffer_type(i)), props.name);
        // the split buffer type is named after its registry and main device: "CUDA0_Split", "ROCm1_Split"
        EXPECT_EQ(std::string(wsp_ggml_backend_buft_name(wsp_ggml_backend_cuda_split_buffer_type(i, nullptr))),
                  WSP_GGML_CUDA_NAME + std::to_string(i) + "_Split");
    }
    // a device that does not exist: NULL and a message, never a crash
    EXPECT_EQ(wsp_ggml_backend_cuda_init(n), nullptr);
    EXPECT_EQ(wsp_ggml_backend_cuda_buffer_type(n), nullptr);
    EXPECT_EQ(wsp_ggml_backend_init_by_name((WSP_GGML_CUDA_NAME + std::to_string(n)).c_str(), nullptr), nullptr);
    size_t free_mem = 1, total = 1;
    wsp_ggml_backend_cuda_get_device_memory(n, &free_mem, &total);
    EXPECT_EQ(total, 0u);
    // with no devices the reg says why among its features (`wsp-ggml-cli devices` prints it), else not
    auto get_features = reinterpret_cast<wsp_ggml_backend_get_features_t>(
        wsp_ggml_backend_reg_get_proc_address(reg, "wsp_ggml_backend_get_features"));
    ASSERT_NE(get_features, nullptr);
    std::string why;
    for (const wsp_ggml_backend_feature * f = get_features(reg); f->name != nullptr; ++f) {
        if (std::strcmp(f->name, "NO_DEVICES") == 0) {
            why = f->value;
        }
    }
    if (n == 0) {
        EXPECT_EQ(why.rfind("no usable GPU (", 0), 0u) << why;
    } else {
        EXPECT_EQ(why, "");
    }
}

TEST(CudaRegistry, HostBufferWorksWithOrWithoutAGpu) {
    wsp_ggml_backend_buffer_type_t host = wsp_ggml_backend_cuda_host_buffer_type();
    EXPECT_STREQ(wsp_ggml_backend_buft_name(host), WSP_GGML_CUDA_NAME "_Host");
    EXPECT_TRUE(wsp_ggml_backend_buft_is_host(host));
    // pinned where possible, ordinary host memory (with a message) otherwise: usable either way
    wsp_ggml_backend_buffer_t buf = wsp_ggml_backend_buft_alloc_buffer(host, 4096);
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(wsp_ggml_backend_buffer_is_host(buf));
    std::memset(wsp_ggml_backend_buffer_get_base(buf), 7, 4096);
    EXPECT_EQ(static_cast<unsigned char *>(wsp_ggml_backend_buffer_get_base(buf))[4095], 7);
    wsp_ggml_backend_buffer_free(buf);
    REQUIRE_PINNING(); // Note [refused capabilities]
    std::vector<char> mem(1 << 16);
    const bool        pinned = wsp_ggml_backend_cuda_register_host_buffer(mem.data(), mem.size());
    EXPECT_EQ(pinned, wsp_ggml_backend_cuda_get_device_count() > 0);
    wsp_ggml_backend_cuda_unregister_host_buffer(mem.data());
    auto fn = reinterpret_cast<bool (*)(void *, size_t)>(
        wsp_ggml_backend_reg_get_proc_address(wsp_ggml_backend_cuda_reg(), "wsp_ggml_backend_register_host_buffer"));
    EXPECT_EQ(fn, &wsp_ggml_backend_cuda_register_host_buffer);
}

TEST(CudaBuffers, TransfersCopiesAndEvents) {
    REQUIRE_GPU();
    const int n = wsp_ggml_backend_cuda_get_device_count();
    for (int d = 0; d < n; ++d) {
        wsp_ggml_init_params      p   = { 8 * wsp_ggml_tensor_overhead(), nullptr, true };
        wsp_ggml_context *        ctx = wsp_ggml_init(p);
        wsp_ggml_tensor *         a   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1000);
        wsp_ggml_tensor *         b   = wsp_ggml_new_tensor_1d(ctx, WSP_GGML_TYPE_F32, 1000);
        wsp_ggml_backend_buffer_t buf =
            wsp_ggml_backend_alloc_ctx_tensors_from_buft(ctx, wsp_ggml_backend_cuda_buffer_type(d));
        ASSERT_NE(buf, nullptr);
        const std::vector<float> v = random_values(1000, (uint32_t) d);
        wsp_ggml_backend_tensor_set(a, v.data(), 0, 4000);
        std::vector<float> back(1000);
        wsp_ggml_backend_tensor_get(a, back.data(), 0, 4000);
        EXPECT_EQ(back, v);
        wsp_ggml_backend_tensor_memset(b, 0, 0, 4000);
        wsp_ggml_backend_tensor_copy(a, b);
        wsp_ggml_backend_tensor_get(b, back.data(), 0, 4000);
        EXPECT_EQ(back, v);

        // async on a stream, ordered after an event recorded on another backend of the device
        wsp_ggml_backend_t       s1 = wsp_ggml_backend_cuda_init(d), s2 = wsp_ggml_backend_cuda_init(d);
        wsp_ggml_backend_event_t e = wsp_ggml_backend_event_new(wsp_ggml_backend_get_device(s1));
        ASSERT_NE(e, nullptr);
        const std::vector<float> w = random_values(1000, 99);
        wsp_ggml_backend_tensor_set_async(s1, a, w.data(), 0, 4000);
        wsp_ggml_backend_event_record(e, s1);
        wsp_ggml_backend_event_wait(s2, e);
        wsp_ggml_backend_tensor_copy_async(s2, s2, a, b);
        wsp_ggml_backend_tensor_get_async(s2, b, back.data(), 0, 4000);
        wsp_ggml_backend_synchronize(s2);
        EXPECT_EQ(back, w);
        wsp_ggml_backend_event_free(e);
        wsp_ggml_backend_free(s1);
        wsp_ggml_backend_free(s2);
        wsp_ggml_backend_buffer_free(buf);
        wsp_ggml_free(ctx);
    }
}

TEST(CudaOps, BinaryScaleCpyConcat) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : float_types()) {
        compare_with_cpu(
            [t](wsp_ggml_context * ctx) {
                wsp_ggml_tensor * a = wsp_ggml_new_tensor_3d(ctx, t, 37, 5, 3);
                wsp_ggml_tensor * b = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 37, 1, 3);
                wsp_ggml_set_input(a);
                wsp_ggml_set_input(b);
                wsp_ggml_tensor * x = wsp_ggml_add(ctx, a, b);
                x                   = wsp_ggml_mul(ctx, x, b);
                x                   = wsp_ggml_sub(ctx, x, a);
                x                   = wsp_ggml_scale(ctx, x, 0.25f);
                x                   = wsp_ggml_cont(ctx, wsp_ggml_permute(ctx, x, 1, 0, 2, 3));
                x                   = wsp_ggml_cast(ctx, x, WSP_GGML_TYPE_F16);
                x                   = wsp_ggml_concat(
                                      ctx, x, wsp_ggml_cast(ctx, wsp_ggml_cont(ctx, wsp_ggml_transpose(ctx, a)), WSP_GGML_TYPE_F16), 2);
                return wsp_ggml_cast(ctx, x, WSP_GGML_TYPE_F32);
            },
            1e-6);
    }
}

TEST(CudaOps, MulMatFloatWeights) {
    REQUIRE_GPU();
    for (wsp_ggml_type t : float_types()) {
        for (int64_t m : { 1, 7, 64 }) {
            compare_with_cpu(
                [t, m](wsp_ggml_context * ctx) {
                    wsp_ggml_tensor * w  = wsp_ggml_new_tensor_3d(ctx, t, 96, 33, 2);
                    wsp_ggml_tensor * x  = wsp_ggml_new_tensor_4d(ctx, WSP_GGML_TYPE_F32, 96, m, 4, 3);
                    wsp_ggml_tensor * x2 = wsp_ggml_new_tensor_3d(ctx, WSP_GGML_TYPE_F32, 96, m, 2);
                    wsp_ggml_set_input(w);
                    wsp_ggml_set_input(x);
                    wsp_ggml_set_input(x2);
                    wsp_ggml_tensor * y  = wsp_ggml_mul_mat(ctx, w, x);  // broadcast over dims 2-3
                    wsp_ggml_tensor * y2 = wsp_ggml_mul_mat(ctx, w, x2); // strided batch
                    wsp_ggml_tensor * y3 = wsp_ggml_mul_mat(ctx, wsp_ggml_view_2d(ctx, w, 96, 33, w->nb[1], 0), x2);
                    return wsp_ggml_add(ctx,
                                        wsp_ggml_add(ctx, wsp_ggml_view_2d(ctx, y, 33, m, y->nb[1], 0),
                                                     wsp_ggml_view_2d(ctx, y3, 33, m, y3->nb[1], 0)),
                                        wsp_ggml_view_2d(ctx, y2, 33, m, y2->nb[1], 0));
                },
                t == WSP_GGML_TYPE_F32 ? 1e-10 : 1e-5); // F16/BF16: activations rounded to the weight's type
        }
    }
}

} // namespace
} // namespace wsp::test
