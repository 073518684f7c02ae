#!/usr/bin/env bash
# The real client in CTest: whisper.cpp as whisper.rn 0.4.3 ships it, built against our installed
# package, run by whisper_check (examples/whisper) on the CPU and on the device configuration.
#   run.sh build BUILD_DIR WORK WHISPER_DIR   the WhisperClient.Build fixture: installs BUILD_DIR into
#                                             WORK/prefix, builds examples/whisper against it (with
#                                             the sources of WHISPER_DIR), writes the model, speaks the clip
#   run.sh check WORK WHISPER_DIR ARGS...     one configuration: whisper_check on them with ARGS
# Exits 77 (the tests' SKIP_RETURN_CODE) with the reason when the sources were not fetched
# (scripts/fetch-whisper.sh) or espeak-ng is missing.
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/../.." && pwd)

skip() {
    echo "SKIP: $*"
    exit 77
}
# show a step's log when it fails
step() { # log, command...
    local log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        cat "$log"
        echo "FAILED: $*"
        exit 1
    fi
}
need_sources() {
    [ -f "$1/whisper.cpp" ] || skip "whisper.cpp sources not fetched into $1: run scripts/fetch-whisper.sh"
}

build() {
    local build_dir=$1 work=$2 whisper_dir=$3
    need_sources "$whisper_dir"
    command -v espeak-ng >/dev/null || skip "espeak-ng not installed (apt-get install espeak-ng): it speaks the clip"
    mkdir -p "$work"
    local t0=$SECONDS
    # a fresh prefix, so that no header left over from an earlier install can serve
    rm -rf "$work/prefix"
    step "$work/install.log" cmake --install "$build_dir" --prefix "$work/prefix"
    # a sanitizer build's libraries need the client built with the same runtime
    local flags ldflags
    flags=$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$build_dir/CMakeCache.txt")
    ldflags=$(sed -n 's/^CMAKE_EXE_LINKER_FLAGS:STRING=//p' "$build_dir/CMakeCache.txt")
    step "$work/configure.log" cmake -S "$src_dir/examples/whisper" -B "$work/build" -G Ninja \
        -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release -DWHISPER_SOURCE_DIR="$whisper_dir" \
        -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags"
    step "$work/build.log" cmake --build "$work/build"
    echo "installed, configured and built examples/whisper in $((SECONDS - t0)) s"

    # the ggml headers whisper.cpp was compiled with, from the compiler's own dependency list:
    # every one must be ours, from the prefix
    local object headers
    object=$(cd "$work/build" && ninja -t targets all | sed -n 's/^\([^:]*whisper\.cpp\.o\):.*/\1/p')
    headers=$(cd "$work/build" && ninja -t deps "$object" | sed -n 's/^ *\(.*\/\(ggml[^/]*\|gguf\)\.h\)$/\1/p')
    echo "ggml headers whisper.cpp included:"
    while read -r header; do
        echo "    $header"
    done <<<"$headers"
    if ! grep -q "^$work/prefix/include/wsp-ggml/ggml.h$" <<<"$headers" ||
        grep -v "^$work/prefix/include/wsp-ggml/" <<<"$headers"; then
        echo "FAILED: whisper.cpp was not compiled against the installed wsp-ggml headers alone"
        exit 1
    fi

    # tiny dimensions, 200 encoder positions (4 s of audio, padded to 256 for flash attention)
    step "$work/model.log" "$work/prefix/bin/wsp-ggml-cli" write-model --out "$work/model-tiny-f16.bin" \
        --size tiny --type f16 --seed 1 --audio-ctx 200
    step "$work/espeak.log" espeak-ng -w "$work/clip.wav" "The quick brown fox jumps over the lazy dog."
    echo "model and clip written; fixture ready in $((SECONDS - t0)) s"
}

check() {
    local work=$1 whisper_dir=$2
    shift 2
    need_sources "$whisper_dir"
    [ -x "$work/build/whisper_check" ] || { echo "FAILED: $work/build/whisper_check missing (WhisperClient.Build)"; exit 1; }
    local t0=$SECONDS rc=0
    "$work/build/whisper_check" --model "$work/model-tiny-f16.bin" --wav "$work/clip.wav" "$@" || rc=$?
    echo "whisper_check $*: $((SECONDS - t0)) s"
    exit $rc
}

mode=${1:-}
shift || true
case $mode in
    build) build "$@" ;;
    check) check "$@" ;;
    *)
        echo "usage: $0 build BUILD_DIR WORK WHISPER_DIR | check WORK WHISPER_DIR ARGS..." >&2
        exit 2
        ;;
esac
