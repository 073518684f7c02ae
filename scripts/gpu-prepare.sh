#!/usr/bin/env bash
# Builds the GPU check's bundle here, on a machine without a GPU (Note [GPU bundle] in
# CMakeLists.txt), for scripts/gpu-check.sh to run on a GPU machine that has the CUDA toolkit and
# driver but no compiler packages and no network. What it makes, in build/gpu-bundle (git ignores
# it; the device tool carries it):
#   bin/   the CUDA suites (tests/test_cuda_*, test_lazy_cublas), wsp-ggml-cli, gpu_probe
#          (tools/gpu_probe.cu), bench_cuda, bench_cuda_ops and whisper_check (examples/whisper,
#          built against an install of this build); RPATH $ORIGIN/../lib, then the toolkit's folder
#   lib/   the project's libraries and the few others the binaries need outside libc, libstdc++ and
#          CUDA's own libraries (Google Benchmark's, which Debian ships shared only); GoogleTest is
#          linked statically, CLI11 is header-only
#   data/  the spoken clip for whisper_check (the model, 75 MB, is written there by wsp-ggml-cli)
#   BUNDLE.txt  what was built, from which commit, with which compiler
# nvcc for sm_90 only (H100, H200; WSP_GPU_ARCHS to change), Release, only those targets; the CPU
# code for x86-64-v3 (AVX2, FMA, F16C: any server of the last decade), not for this machine.
# Incremental: a second run rebuilds what changed and stages the bundle again.
#   scripts/gpu-prepare.sh
# Environment: WSP_GPU_ARCHS (90), WSP_GPU_BUILD (build/gpu-build), WSP_GPU_BUNDLE (build/gpu-bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
archs=${WSP_GPU_ARCHS:-90}
build=${WSP_GPU_BUILD:-build/gpu-build}
bundle=${WSP_GPU_BUNDLE:-build/gpu-bundle}
cpu_flags=-march=x86-64-v3
# what the device tool carries at most, with the working tree: leave room for the tree itself
max_mib=56
t0=$SECONDS

fail() {
    echo "gpu-prepare: $*" >&2
    exit 1
}
nvcc=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || fail "no nvcc at $nvcc (install the CUDA toolkit or set CUDACXX)"
for tool in cmake ninja espeak-ng readelf strip; do
    command -v $tool >/dev/null || fail "$tool not found (.ci/run installs what the README lists)"
done
whisper_dir=.third_party/whisper.rn-0.4.3
[ -f $whisper_dir/whisper.cpp ] || scripts/fetch-whisper.sh

# the CUDA suites: every test_cuda_* source, and the lazy cuBLAS loading that only nvcc builds have
suites=()
for src in tests/test_cuda_*.cpp tests/test_lazy_cublas.cpp; do
    suites+=("$(basename "$src" .cpp)")
done

echo "== configure $build (nvcc, sm_$archs, Release)"
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DWSP_GGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" -DWSP_GGML_NATIVE=OFF -DCMAKE_CXX_FLAGS="$cpu_flags" \
    -DWSP_GGML_BUILD_TESTS=ON -DWSP_GGML_BUILD_BENCH=ON -DWSP_GGML_BUILD_TOOLS=ON \
    -DWSP_GGML_NCCL="${WSP_GPU_NCCL:-OFF}" >"$build/configure.log" 2>&1 ||
    {
        tail -30 "$build/configure.log"
        fail "configure failed (log: $build/configure.log)"
    }
# Without NCCL by default: libnccl (218 MB) cannot be carried, a GPU machine may not have it, and
# one GPU's virtual devices never use it (a rank twice); the probe still reports its version where
# it is. WSP_GPU_NCCL=ON links it (a machine with several GPUs and NCCL installed).
grep -q "^WSP_GGML_NCCL:BOOL=ON" "$build/CMakeCache.txt" || echo "note: built without NCCL (WSP_GPU_NCCL=ON links it)"

echo "== build ${#suites[@]} suites, wsp-ggml-cli, gpu_probe, bench_cuda, bench_cuda_ops"
cmake --build "$build" --target "${suites[@]}" wsp-ggml-cli gpu_probe bench_cuda bench_cuda_ops

# whisper_check against an install of this build, as a client builds it (tests/whisper/run.sh)
echo "== install $build/prefix, build examples/whisper's whisper_check against it"
cmake --install "$build" --prefix "$root/$build/prefix" >/dev/null
cmake -S examples/whisper -B "$build/whisper" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$root/$build/prefix" -DWHISPER_SOURCE_DIR="$root/$whisper_dir" \
    -DCMAKE_CXX_FLAGS="$cpu_flags" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH="\$ORIGIN/../lib" \
    >"$build/whisper-configure.log" 2>&1 || {
    tail -30 "$build/whisper-configure.log"
    fail "configuring examples/whisper failed (log: $build/whisper-configure.log)"
}
cmake --build "$build/whisper" --target whisper_check

echo "== stage $bundle"
rm -rf "$bundle"
cmake --install "$build" --prefix "$root/$bundle" --component gpu-bundle >/dev/null
cp "$build/whisper/whisper_check" "$bundle/bin/"

# libraries the binaries resolve outside the system's and CUDA's own go into lib/ (found by
# $ORIGIN/../lib first); scripts/gpu-check.sh's ldd check then proves nothing else is needed
is_elf() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }
system_or_cuda='^(linux-vdso|ld-linux|libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
for f in "$bundle"/bin/* "$bundle"/lib/*; do
    is_elf "$f" || continue
    while read -r name path; do
        [[ $name =~ $system_or_cuda ]] && continue
        [ -e "$bundle/lib/$name" ] && continue
        [ -f "$path" ] || fail "$f needs $name, which is not found here"
        echo "   carrying $name from $path"
        cp -L "$path" "$bundle/lib/$name"
    done < <(ldd "$f" | sed -n 's/^\s*\(\S*\) => \(\/\S*\) .*/\1 \2/p')
done
# symbols and relocation debris only: the device code and the dynamic symbols stay
for f in "$bundle"/bin/* "$bundle"/lib/*; do
    is_elf "$f" && strip --strip-unneeded "$f"
done

mkdir -p "$bundle/data"
espeak-ng -w "$bundle/data/clip.wav" "The quick brown fox jumps over the lazy dog."

{
    echo "commit $(git describe --always --dirty 2>/dev/null || echo unknown)"
    echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n), $(nproc) cores"
    echo "nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_$archs; g++ $(g++ -dumpfullversion) $cpu_flags"
    echo "nccl $(sed -n 's/^WSP_GGML_NCCL:BOOL=//p' "$build/CMakeCache.txt")"
    echo "suites ${suites[*]}"
    echo "model write-model --size tiny --type f16 --seed 1 --audio-ctx 200"
} >"$bundle/BUNDLE.txt"

size_kib=$(du -sk "$bundle" | cut -f1)
echo "== $bundle: $((size_kib / 1024)) MiB, $(find "$bundle/bin" -mindepth 1 | wc -l) programs, $(find "$bundle/lib" -mindepth 1 | wc -l) library files, in $((SECONDS - t0)) s"
[ "$size_kib" -le $((max_mib * 1024)) ] || fail "$bundle is over $max_mib MiB: the device tool carries 64 MiB with the tree"
