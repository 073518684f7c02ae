// The all-GPU device over CUDA devices ("CUDA_All"; the host target's emulated GPUs in CI): with
// two or more devices, the whisper-shaped graph of all_gpu_util.h with its weights in the
// device's buffer type equals the CPU's, the devices holding their rows of the mat-mul weights;
// with one device there is no all-GPU device.

#include "all_gpu_util.h"
#include "cuda_util.h"

#include "ggml-all-gpu.h"

namespace wsp::test {
namespace {

TEST(CudaAllGpu, SpreadsTheMatMulWeightsOverEveryDevice) {
    REQUIRE_GPU();
    const int              n   = wsp_ggml_backend_cuda_get_device_count();
    wsp_ggml_backend_dev_t all = wsp_ggml_backend_dev_by_name(WSP_GGML_CUDA_NAME "_All");
    if (n < 2) {
        EXPECT_EQ(all, nullptr) << "one device needs no all-GPU device";
        return;
    }
    ASSERT_NE(all, nullptr);
    ASSERT_EQ(wsp_ggml_backend_all_gpu_member_count(all), (size_t) n);
    wsp_ggml_backend_t cpu = wsp_ggml_backend_cpu_init();
    wsp_ggml_backend_t gpu = wsp_ggml_backend_dev_init(all, nullptr);
    ASSERT_NE(gpu, nullptr);
    for (wsp_ggml_type type : { WSP_GGML_TYPE_F32, WSP_GGML_TYPE_F16, WSP_GGML_TYPE_Q8_0 }) {
        SCOPED_TRACE(wsp_ggml_type_name(type));
        Model ref_model(type, wsp_ggml_backend_cpu_buffer_type(), 5);
        Model model(type, wsp_ggml_backend_dev_buffer_type(all), 5);
        // cuBLAS and the CPU sum in different orders; F16 and Q8_0 activations are rounded alike
        EXPECT_LT(nmse(logits(model, gpu, cpu), logits(ref_model, cpu, cpu)), 1e-6);
        // quantized rows go in blocks of 64 (the CUDA split's granularity): with 4 devices and 64
        // to 96 rows some hold none; float rows go one by one, so every device holds some
        size_t others = 0;
        for (int i = 1; i < n; ++i) {
            const size_t bytes = wsp_ggml_backend_all_gpu_weight_bytes(all, (size_t) i);
            others += bytes;
            if (!wsp_ggml_is_quantized(type)) {
                EXPECT_GT(bytes, 0u) << "device " << i;
            }
        }
        EXPECT_GT(others, 0u) << "the mat-mul weights' rows spread beyond the main device";
    }
    wsp_ggml_backend_free(gpu);
    wsp_ggml_backend_free(cpu);
}

} // namespace
} // namespace wsp::test
