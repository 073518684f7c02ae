#!/usr/bin/env bash
# Fails when a file of the GPU sources outside the vendor layer tests a vendor or an architecture
# (Note [vendors] in src/cuda/vendor.cuh): kernels and runtime code test the feature names the
# vendor headers define (WSP_GPU_WARP_SIZE, WSP_GPU_HAS_MMA_M16N8K16, ...), never the target.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='__HIP_PLATFORM_(AMD|NVIDIA|HCC|NVCC)__|__HIPCC__|__HIP_DEVICE_COMPILE__|__HIP__|USE_HIP|WSP_GGML_HIP|__CUDA_ARCH__|__CUDACC__|__NVCC__|WSP_GGML_CUDA_HOST|WSP_HOST_WARP_SIZE'
mapfile -t files < <(git ls-files -- 'src/cuda/*' | grep -vE '^src/cuda/(vendor\.cuh|vendor/)')
if hits=$(grep -nHE "$pattern" "${files[@]}"); then
    echo "$hits"
    echo "vendor: the lines above test a vendor or architecture outside src/cuda/vendor (Note [vendors])"
    exit 1
fi
echo "vendor: ${#files[@]} files of src/cuda test no vendor"
