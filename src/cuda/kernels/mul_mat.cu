// MUL_MAT with float weights through cuBLAS: dst[N, M, b2, b3] = W[K, N]^T x[K, M, b2, b3], W
// broadcast over dims 2-3. In cuBLAS's column-major terms W is a K x N matrix, so C = op(W)^T B
// with op = transpose. F32 weights run in F32 (TF32 tensor cores when WSP_GGML_CUDA_TF32=1),
// F16 and BF16 weights take activations converted to their type and run on tensor cores with
// F32 accumulation. One GEMM, a strided batch, or a batch of pointers for broadcasts. Our own
// kernel (gemm.cu) serves instead where the vendor has no BLAS (HIP without hipBLAS) and with
// WSP_GGML_CUDA_OWN_GEMM=1. Quantized weights take mul_mat_q.cu's paths.

#include "common.cuh"
#include "kernels.cuh"
#include "mul_mat_q.cuh"

#include <cstdlib>
#include <memory>

namespace wsp::cuda {

namespace {

bool supported_float(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    // cuBLAS takes a weight row stride (lda) of at least K elements and a result row stride (ldc)
    // of at least N: a view whose rows overlap cannot be a cuBLAS operand
    const size_t es = wsp_ggml_type_size(a->type);
    return t->type == WSP_GGML_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] >= t->ne[0] * sizeof(float) &&
           t->nb[1] % sizeof(float) == 0 && is_float_type(a->type) && a->nb[0] == es && a->nb[1] % es == 0 &&
           a->nb[1] >= (size_t) a->ne[0] * es && is_float_type(b->type);
}

#if WSP_GPU_HAS_BLAS
cudaDataType_t cuda_type(wsp_ggml_type t) {
    switch (t) {
        case WSP_GGML_TYPE_F16: return CUDA_R_16F;
        case WSP_GGML_TYPE_BF16: return CUDA_R_16BF;
        default: return CUDA_R_32F;
    }
}

cublasComputeType_t compute_type(wsp_ggml_type weight) {
    static const bool tf32 =
        std::getenv("WSP_GGML_CUDA_TF32") != nullptr && std::atoi(std::getenv("WSP_GGML_CUDA_TF32")) != 0;
    return weight == WSP_GGML_TYPE_F32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// the activations as the GEMM reads them: b itself when its layout allows, else a converted copy
struct Operand {
    const char * data;
    int64_t      ld, stride2, stride3; // in elements
};

// the A, B and C pointers of every batch entry, written on the device so that the launch stays
// on the stream (and can be captured into a CUDA graph)
struct BatchLayout {
    const char * a;
    const char * b;
    char *       c;
    int64_t      ne2, r2, r3, batch;
    int64_t      a_nb2, a_nb3, b_nb2, b_nb3, c_nb2, c_nb3; // bytes
};

__global__ void batch_pointers_kernel(BatchLayout l, const void ** out) {
    const int64_t k = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= l.batch) {
        return;
    }
    const int64_t i2 = k % l.ne2, i3 = k / l.ne2;
    out[k]               = l.a + (i2 / l.r2) * l.a_nb2 + (i3 / l.r3) * l.a_nb3;
    out[l.batch + k]     = l.b + i2 * l.b_nb2 + i3 * l.b_nb3;
    out[2 * l.batch + k] = l.c + i2 * l.c_nb2 + i3 * l.c_nb3;
}

bool batched(LaunchCtx & ctx, cublasHandle_t h, const wsp_ggml_tensor * t, const Operand & B, cudaDataType_t type) {
    const wsp_ggml_tensor * a  = t->src[0];
    const int64_t           es = (int64_t) wsp_ggml_type_size(a->type);
    const int64_t           K = a->ne[0], N = a->ne[1], M = t->ne[1];
    const int64_t           batch = t->ne[2] * t->ne[3];
    const float             alpha = 1.0f, beta = 0.0f;
    const BatchLayout       l = { static_cast<const char *>(a->data),
                                  B.data,
                                  static_cast<char *>(t->data),
                                  t->ne[2],
                                  t->ne[2] / a->ne[2],
                                  t->ne[3] / a->ne[3],
                                  batch,
                                  (int64_t) a->nb[2],
                                  (int64_t) a->nb[3],
                                  B.stride2 * es,
                                  B.stride3 * es,
                                  (int64_t) t->nb[2],
                                  (int64_t) t->nb[3] };
    Scratch                 ptrs(ctx.scratch(), ctx.stream, (size_t) batch * 3 * sizeof(void *));
    if (!ptrs) {
        return false;
    }
    auto ** p = static_cast<const void **>(ptrs.get());
    gpu::launch(batch_pointers_kernel, (unsigned) ((batch + 127) / 128), 128, 0, ctx.stream, l, p);
    if (!WSP_CUDA_LAUNCH_OK(ctx.physical)) {
        return false;
    }
    count_launch();
    return WSP_CUBLAS_OK(cublasGemmBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int) N, (int) M, (int) K, &alpha, p,
                                             cuda_type(a->type), (int) (a->nb[1] / es), p + batch, type, (int) B.ld,
                                             &beta, (void **) (p + 2 * batch), CUDA_R_32F,
                                             (int) (t->nb[1] / sizeof(float)), (int) batch, compute_type(a->type),
                                             CUBLAS_GEMM_DEFAULT),
                         ctx.physical);
}

bool blas_gemm(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * a = t->src[0];
    const wsp_ggml_tensor * b = t->src[1];
    cublasHandle_t          h = ctx.backend.blas();
    if (h == nullptr) {
        return false;
    }
    const wsp_ggml_type gemm_type = a->type; // the activations follow the weight's type
    const int64_t       es        = (int64_t) wsp_ggml_type_size(gemm_type);
    const int64_t       K = a->ne[0], N = a->ne[1], M = t->ne[1];

    Operand    B;
    const bool direct = b->type == gemm_type && b->nb[0] == (size_t) es && b->nb[1] % es == 0 && b->nb[2] % es == 0 &&
                        b->nb[3] % es == 0 && (int64_t) b->nb[1] >= K * es; // ldb >= K, as cuBLAS wants
    std::unique_ptr<Scratch> holder;
    if (direct) {
        B = { static_cast<const char *>(b->data), (int64_t) b->nb[1] / es, (int64_t) b->nb[2] / es,
              (int64_t) b->nb[3] / es };
    } else {
        holder = std::make_unique<Scratch>(ctx.scratch(), ctx.stream, (size_t) (wsp_ggml_nelements(b) * es));
        if (!*holder || !convert_contiguous(ctx, b, holder->get(), gemm_type)) {
            return false;
        }
        B = { static_cast<const char *>(holder->get()), K, K * b->ne[1], K * b->ne[1] * b->ne[2] };
    }

    const float alpha = 1.0f, beta = 0.0f;
    count_launch(); // one cuBLAS call, counted as one kernel
    if (t->ne[2] * t->ne[3] == 1) {
        return WSP_CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int) N, (int) M, (int) K, &alpha, a->data,
                                          cuda_type(a->type), (int) (a->nb[1] / es), B.data, cuda_type(gemm_type),
                                          (int) B.ld, &beta, t->data, CUDA_R_32F, (int) (t->nb[1] / sizeof(float)),
                                          compute_type(a->type), CUBLAS_GEMM_DEFAULT),
                             ctx.physical);
    }
    const bool strided = t->ne[3] == 1 && a->ne[3] == 1 && a->ne[2] == t->ne[2];
    if (strided) {
        return WSP_CUBLAS_OK(cublasGemmStridedBatchedEx(
                                 h, CUBLAS_OP_T, CUBLAS_OP_N, (int) N, (int) M, (int) K, &alpha, a->data,
                                 cuda_type(a->type), (int) (a->nb[1] / es), (long long) (a->nb[2] / es), B.data,
                                 cuda_type(gemm_type), (int) B.ld, (long long) B.stride2, &beta, t->data, CUDA_R_32F,
                                 (int) (t->nb[1] / sizeof(float)), (long long) (t->nb[2] / sizeof(float)),
                                 (int) t->ne[2], compute_type(a->type), CUBLAS_GEMM_DEFAULT),
                             ctx.physical);
    }
    return batched(ctx, h, t, B, cuda_type(gemm_type));
}
#endif // WSP_GPU_HAS_BLAS

bool launch_float(LaunchCtx & ctx, wsp_ggml_tensor * t) {
#if WSP_GPU_HAS_BLAS
    if (!own_gemm_wanted()) {
        return blas_gemm(ctx, t);
    }
#endif
    return mul_mat_own_gemm(ctx, t);
}

// quantized weights go to mul_mat_q.cu, which hands its GEMMs back to launch_float
bool supported(const wsp_ggml_tensor * t) {
    return supported_float(t) || mul_mat_q_supported(t);
}

bool launch(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return is_float_type(t->src[0]->type) ? launch_float(ctx, t) : mul_mat_q_launch(ctx, t);
}

} // namespace

bool mul_mat_float(LaunchCtx & ctx, wsp_ggml_tensor * t) {
    return launch_float(ctx, t);
}

const OpEntry & op_mul_mat() {
    static const OpEntry entry = { supported, launch };
    return entry;
}

} // namespace wsp::cuda
