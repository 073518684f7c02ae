#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU: builds the project with the CUDA backend for
# the GPU present (16 cores, no network: GoogleTest and Google Benchmark come from .third_party/,
# see gpu-prepare.sh, when the machine has none), runs every GPU test on the real devices and
# under 2 and 4 virtual devices, runs the GPU benches, and writes a short summary. Nothing skips
# silently: when nvidia-smi lists GPUs but the backend reports none (a driver older than the
# toolkit, say) the check fails there, and every test step prints its counts of tests run,
# passed, failed and skipped.
#   scripts/gpu-check.sh [output-dir]      (default: $OUT, else build/gpu-check)
# Exit status: 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-build/gpu-check}}
mkdir -p "$out"
build=build/gpu
summary="$out/summary.txt"
: > "$summary"
status=0
start=$(date +%s)

note() { echo "$*" | tee -a "$summary"; }
step() { # name, command...: runs, logs to $out/<name>.log, notes the result
    local name=$1; shift
    local t0=$(date +%s)
    if "$@" > "$out/$name.log" 2>&1; then
        note "PASS  $name ($(( $(date +%s) - t0 )) s)"
    else
        note "FAIL  $name ($(( $(date +%s) - t0 )) s), see $name.log"
        status=1
    fi
}

note "gpu-check $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ)"
note "GPU: $(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader 2>/dev/null | head -1)"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
archs=${WSP_GPU_ARCHS:-${cc:-90}}

step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWSP_GGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$archs" -DWSP_GGML_BUILD_TESTS=ON -DWSP_GGML_BUILD_BENCH=ON
step build cmake --build "$build" -j "$(nproc)"

# the GPUs the driver lists must be the CUDA devices the backend registers
n_smi=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU " || true)
"$build/tools/wsp-ggml-cli" devices > "$out/devices.log" 2>&1
n_cuda=$(grep -cE "^  CUDA[0-9]+ " "$out/devices.log" || true)
note "devices: nvidia-smi lists $n_smi GPU(s), the CUDA backend registers $n_cuda"
if [ "$n_smi" -gt 0 ] && [ "$n_cuda" -eq 0 ]; then
    note "FAIL  devices: the GPUs are there but the CUDA backend sees none; every GPU test would skip"
    note "      driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)," \
        "toolkit $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*'); see devices.log"
    status=1
fi

# "run R, passed P, failed F, skipped S" of a ctest log (a skipped GoogleTest case is "Skipped")
counts() {
    local log=$1
    local run passed failed skipped
    run=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#" "$log" || true)
    passed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#.* Passed" "$log" || true)
    skipped=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#.*Skipped" "$log" || true)
    failed=$(( run - passed - skipped ))
    echo "run $run, passed $passed, failed $failed, skipped $skipped"
}

run_tests() { # label, env...
    local label=$1; shift
    step "tests-$label" env "$@" ctest --test-dir "$build" --output-on-failure -j 4 -R "Cuda"
    note "      $label: $(counts "$out/tests-$label.log")"
}
run_tests gpus
run_tests virtual2 WSP_GGML_CUDA_VIRTUAL_DEVICES=2
run_tests virtual4 WSP_GGML_CUDA_VIRTUAL_DEVICES=4
# the whole suite once, with every GPU registered (CPU tests included)
step tests-all ctest --test-dir "$build" --output-on-failure -j 8
note "      all: $(counts "$out/tests-all.log")"

step bench-cuda "$build/bench/bench_cuda" --benchmark_min_time=0.2 --benchmark_out="$out/bench_cuda.json" \
    --benchmark_out_format=json
grep -E "TFLOP/s|GB/s" "$out/bench-cuda.log" | sed 's/^/      /' | tee -a "$summary"

# our own GEMM (the HIP path without hipBLAS) on the same shapes, beside cuBLAS's figures above
step bench-own-gemm env WSP_GGML_CUDA_OWN_GEMM=1 "$build/bench/bench_cuda" --benchmark_min_time=0.2 \
    --benchmark_filter=BM_backend_mul_mat --benchmark_out="$out/bench_own_gemm.json" --benchmark_out_format=json
grep -E "TFLOP/s" "$out/bench-own-gemm.log" | sed 's/^/      own GEMM /' | tee -a "$summary"

step bench-cuda-ops "$build/bench/bench_cuda_ops" --benchmark_min_time=0.2 \
    --benchmark_out="$out/bench_cuda_ops.json" --benchmark_out_format=json
grep -E "TFLOP/s|GB/s" "$out/bench-cuda-ops.log" | sed 's/^/      /' | tee -a "$summary"

# encoder throughput: one GPU, split over 2 and 4, data-parallel over 2 and 4 (virtual devices
# where the machine has one GPU)
n_gpu=$(nvidia-smi -L 2>/dev/null | wc -l)
enc_env=()
if [ "$n_gpu" -lt 2 ]; then enc_env=(WSP_GGML_CUDA_VIRTUAL_DEVICES=4); fi
step bench-encoder env "${enc_env[@]}" "$build/bench/bench_encoder" --benchmark_out="$out/bench_encoder.json" \
    --benchmark_out_format=json
grep -E "frames/s" "$out/bench-encoder.log" | sed 's/^/      /' | tee -a "$summary"

note "total $(( $(date +%s) - start )) s, status $status"
exit $status
