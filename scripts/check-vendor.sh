#!/usr/bin/env bash
# Fails when a file of the GPU sources outside the vendor layer tests a vendor or an architecture
# (Note [vendors] in src/cuda/vendor.cuh): kernels and runtime code test the feature names the
# vendor headers define (WSP_GPU_WARP_SIZE, WSP_GPU_HAS_MMA_M16N8K16, ...), never the target.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='__HIP_PLATFORM_(AMD|NVIDIA|HCC|NVCC)__|__HIPCC__|__HIP_DEVICE_COMPILE__|__HIP__|USE_HIP|WSP_GGML_HIP|__CUDA_ARCH__|__CUDACC__|__NVCC__|WSP_GGML_CUDA_HOST|WSP_HOST_WARP_SIZE|__gfx[0-9]|__AMDGCN'
# and HIP's own names (the product name hipBLAS aside): src/hip/vendor.cuh is the only CUDA-to-HIP mapping
pattern+='|\bhip(?!BLAS\b)[A-Z]\w*|\bhipblas[A-Z]\w*|\bHIP_[A-Z]|<hip/|<hipblas|<rccl'
mapfile -t files < <(git ls-files -- 'src/cuda/*' | grep -vE '^src/cuda/(vendor\.cuh|vendor/)')
if hits=$(grep -nHP "$pattern" "${files[@]}"); then
    echo "$hits"
    echo "vendor: the lines above test a vendor or architecture, or name HIP, outside the vendor layer (Note [vendors])"
    exit 1
fi
echo "vendor: ${#files[@]} files of src/cuda test no vendor"
