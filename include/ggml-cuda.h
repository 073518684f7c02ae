#pragma once

// CUDA backend (and HIP/ROCm, built from the same sources): every GPU is a device "CUDA<i>"
// ("ROCm<i>" under HIP). WSP_GGML_CUDA_VIRTUAL_DEVICES=N presents one GPU as N devices.

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef WSP_GGML_USE_HIP
#    define WSP_GGML_CUDA_NAME  "ROCm"
#    define WSP_GGML_CUBLAS_NAME "hipBLAS"
#else
#    define WSP_GGML_CUDA_NAME  "CUDA"
#    define WSP_GGML_CUBLAS_NAME "cuBLAS"
#endif

#define WSP_GGML_CUDA_MAX_DEVICES 16

// backend API
WSP_GGML_BACKEND_API wsp_ggml_backend_t wsp_ggml_backend_cuda_init(int device);

WSP_GGML_BACKEND_API bool wsp_ggml_backend_is_cuda(wsp_ggml_backend_t backend);

// device buffer
WSP_GGML_BACKEND_API wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cuda_buffer_type(int device);

// split tensor buffer that splits matrices by rows across multiple devices
WSP_GGML_BACKEND_API wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cuda_split_buffer_type(int main_device, const float * tensor_split);

// pinned host buffer for use with the CPU backend for faster copies between CPU and GPU
WSP_GGML_BACKEND_API wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cuda_host_buffer_type(void);

WSP_GGML_BACKEND_API int  wsp_ggml_backend_cuda_get_device_count(void);
WSP_GGML_BACKEND_API void wsp_ggml_backend_cuda_get_device_description(int device, char * description, size_t description_size);
WSP_GGML_BACKEND_API void wsp_ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total);

WSP_GGML_BACKEND_API bool wsp_ggml_backend_cuda_register_host_buffer(void * buffer, size_t size);
WSP_GGML_BACKEND_API void wsp_ggml_backend_cuda_unregister_host_buffer(void * buffer);

WSP_GGML_BACKEND_API wsp_ggml_backend_reg_t wsp_ggml_backend_cuda_reg(void);

// Besides the functions above, the reg's wsp_ggml_backend_reg_get_proc_address gives:
//   "wsp_ggml_backend_split_buffer_type"      wsp_ggml_backend_split_buffer_type_t
//   "wsp_ggml_backend_register_host_buffer"   wsp_ggml_backend_cuda_register_host_buffer
//   "wsp_ggml_backend_unregister_host_buffer" wsp_ggml_backend_cuda_unregister_host_buffer
//   "wsp_ggml_backend_get_features"           wsp_ggml_backend_get_features_t (ARCHS, NCCL, BLAS;
//                                             NO_DEVICES: why there are none, where there are none)
//   "wsp_ggml_backend_all_reduce"             wsp_ggml_backend_all_reduce_t: NCCL (RCCL under HIP) over
//       one CUDA backend per GPU, every GPU of the reg taking part; F32 contiguous tensors of one shape,
//       each in its backend's device memory. False, with nothing queued, without NCCL, with
//       WSP_GGML_CUDA_NCCL=0, under WSP_GGML_CUDA_VIRTUAL_DEVICES, for other tensors or a subset of the
//       GPUs; a single backend is a sum of one (true).

#ifdef __cplusplus
}
#endif
