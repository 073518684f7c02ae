# The HIP backend on an official ROCm development image (ROCm 6.4 by default, or 7.x): ROCm's
# clang, hipBLAS and RCCL. The image builds the `hip` preset (the same one .ci/run builds with
# Debian's HIP 5.2) and, when run with AMD GPUs, runs the GPU suites on them.
#
#   docker build -f docker/rocm.Dockerfile -t wsp-ggml-rocm .
#   docker run --rm --device=/dev/kfd --device=/dev/dri --group-add video wsp-ggml-rocm
#
# GPU targets: gfx90a (MI200) and gfx942 (MI300) by default; one warp size per build, so RDNA
# (gfx10+, 32 lanes) goes in a build of its own: --build-arg HIP_ARCHS=gfx1100.
ARG ROCM_VERSION=6.4
FROM rocm/dev-ubuntu-24.04:${ROCM_VERSION}-complete

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        cmake ninja-build g++ libgtest-dev libcli11-dev hipblas-dev rccl-dev \
    && rm -rf /var/lib/apt/lists/*

ARG HIP_ARCHS="gfx90a;gfx942"
WORKDIR /src/wsp-ggml
COPY . .
RUN cmake --preset hip -DCMAKE_HIP_ARCHITECTURES="${HIP_ARCHS}" \
    && cmake --build --preset hip \
    && build/hip/tools/wsp-ggml-cli devices

# the GPU suites (test_cuda_*) on the container's AMD GPUs; the CPU suites are the release preset's
CMD ["ctest", "--preset", "hip"]
