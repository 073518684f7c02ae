#!/usr/bin/env bash
# whisper.rn's own binding in CTest (WhisperBinding.Build): installs BUILD_DIR into WORK/prefix,
# builds tests/binding against it (rn-whisper.cpp and rn-audioutils.cpp from BINDING_DIR, unchanged,
# with whisper.cpp from WHISPER_DIR, into a static library and the tiny client binding_check),
# checks that every ggml header they were compiled with is ours, from the prefix, and runs the client.
#   run.sh BUILD_DIR WORK WHISPER_DIR BINDING_DIR
# Exits 77 (the tests' SKIP_RETURN_CODE) with the reason when the sources were not fetched
# (scripts/fetch-whisper.sh, scripts/fetch-whisper.sh binding).
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

[ $# -eq 4 ] || {
    echo "usage: $0 BUILD_DIR WORK WHISPER_DIR BINDING_DIR" >&2
    exit 2
}
build_dir=$1 work=$2 whisper_dir=$3 binding_dir=$4
[ -f "$whisper_dir/whisper.cpp" ] || skip "whisper.cpp sources not fetched into $whisper_dir: run scripts/fetch-whisper.sh"
[ -f "$binding_dir/rn-whisper.cpp" ] || skip "whisper.rn's binding not fetched into $binding_dir: run scripts/fetch-whisper.sh binding"

mkdir -p "$work"
t0=$SECONDS
# a fresh prefix, so that no header left over from an earlier install can serve
rm -rf "$work/prefix"
step "$work/install.log" cmake --install "$build_dir" --prefix "$work/prefix"
step "$work/configure.log" cmake -S "$src_dir/tests/binding" -B "$work/build" -G Ninja \
    -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
    -DWHISPER_SOURCE_DIR="$whisper_dir" -DBINDING_SOURCE_DIR="$binding_dir"
step "$work/build.log" cmake --build "$work/build"
echo "installed, configured and built the binding in $((SECONDS - t0)) s"
if grep -q "warning:.*wsp_ggml" "$work/build.log"; then
    grep "warning:.*wsp_ggml" "$work/build.log"
    echo "FAILED: the binding compiles with warnings about wsp-ggml declarations"
    exit 1
fi

# the ggml headers each binding source was compiled with, from the compiler's own dependency list:
# every one must be ours, from the prefix
for source in rn-whisper.cpp rn-audioutils.cpp; do
    object=$(cd "$work/build" && ninja -t targets all | sed -n "s/^\([^:]*${source//./\\.}\.o\):.*/\1/p")
    [ -n "$object" ] || { echo "FAILED: no object of $source in the build"; exit 1; }
    headers=$(cd "$work/build" && ninja -t deps "$object" | sed -n 's/^ *\(.*\/\(ggml[^/]*\|gguf\)\.h\)$/\1/p')
    echo "ggml headers $source included:"
    while read -r header; do
        echo "    $header"
    done <<<"$headers"
    if ! grep -q "^$work/prefix/include/wsp-ggml/ggml-cpu.h$" <<<"$headers" ||
        grep -v "^$work/prefix/include/wsp-ggml/" <<<"$headers"; then
        echo "FAILED: $source was not compiled against the installed wsp-ggml headers alone"
        exit 1
    fi
done

"$work/build/binding_check" "$work/binding_check.wav"
