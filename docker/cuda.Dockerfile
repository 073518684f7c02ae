# The project on NVIDIA GPUs: official CUDA 13 images, multi-stage.
#   build:   the CUDA 13 development image builds the project (nvcc for sm_80 and sm_90, cuBLAS,
#            NCCL), its tests and benches, installs it into /opt/wsp-ggml, and builds the real
#            client (whisper.cpp from whisper.rn 0.4.3, unchanged) against that install, as .ci/run
#            and tests/whisper/run.sh do.
#   runtime: the CUDA 13 runtime image with the install and the client's programs (and FFmpeg's
#            libraries, by whatever version numbers the base image's release gives them).
#
#   docker build -f docker/cuda.Dockerfile -t wsp-ggml-cuda .
#   docker run --rm --gpus all wsp-ggml-cuda wsp-ggml-cli devices
#   docker run --rm --gpus all -p 8080:8080 -v $PWD/models:/models wsp-ggml-cuda \
#       wsp-whisper-server --model /models/ggml-base.en.bin --host 0.0.0.0     # the OpenAI audio API
#   docker build -f docker/cuda.Dockerfile --target build -t wsp-ggml-cuda-build .
#   docker run --rm --gpus all wsp-ggml-cuda-build ctest --preset release     # every suite, GPU ones included
#
# Devices: --gpus all gives every GPU, --gpus '"device=0,2"' some; inside, each is a device CUDA<i>
# and, with two or more, CUDA_All spans them (WSP_GGML_ALL_GPUS=1 lists it first, so a client that
# picks the first GPU uses them all; WSP_GGML_TENSOR_SPLIT=3,1 sets the shares).
ARG CUDA_VERSION=13.0.0
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        cmake ninja-build g++ git libgtest-dev libbenchmark-dev libopenblas-dev libboost-context-dev \
        libcli11-dev libnccl-dev npm espeak-ng ca-certificates \
        pkg-config libavformat-dev libavcodec-dev libswresample-dev libcpp-httplib-dev nlohmann-json3-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src/wsp-ggml
COPY . .
RUN cmake --preset release -DCMAKE_CUDA_ARCHITECTURES="80;90" \
    && cmake --build --preset release \
    && cmake --install build/release --prefix /opt/wsp-ggml \
    && scripts/fetch-whisper.sh \
    && cmake -S examples/whisper -B build/whisper -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/opt/wsp-ggml \
    && cmake --build build/whisper

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS runtime
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libnccl2 libgomp1 \
        $(apt-cache pkgnames lib | grep -Ex 'lib(avformat|avcodec|swresample)[0-9]+|libcpp-httplib[0-9.]+') \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/wsp-ggml /opt/wsp-ggml
COPY --from=build /src/wsp-ggml/build/whisper/whisper_check /src/wsp-ggml/build/whisper/whisper_transcribe \
     /src/wsp-ggml/build/whisper/whisper_audio /src/wsp-ggml/build/whisper/wsp-whisper-server /opt/wsp-ggml/bin/
ENV PATH=/opt/wsp-ggml/bin:$PATH LD_LIBRARY_PATH=/opt/wsp-ggml/lib
EXPOSE 8080
CMD ["wsp-ggml-cli", "devices"]
