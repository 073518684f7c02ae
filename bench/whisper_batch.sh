#!/usr/bin/env bash
# Batch transcription throughput: whisper_transcribe (examples/whisper) over N spoken clips with a
# tiny random-weight model, on the CPU and on 2 and 4 simulated GPUs in both placements (a context
# per device, one context on the all-GPU device); prints audio seconds per wall second in one table.
#   bench/whisper_batch.sh [BUILD_DIR [WORK]]
# BUILD_DIR: a built wsp-ggml tree (default build/release; targets wsp-ggml and wsp-ggml-cli), installed
# into WORK/prefix (default build/whisper-batch-bench); the example is built against that prefix.
# Environment: CLIPS (default 8), THREADS per context (default 1), MAX_TOKENS per segment (default 16).
# Needs espeak-ng, CLI11 (libcli11-dev) and the whisper.cpp sources (scripts/fetch-whisper.sh).
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(realpath "${1:-$src_dir/build/release}")
work=$(realpath -m "${2:-$src_dir/build/whisper-batch-bench}")
whisper_dir=$src_dir/.third_party/whisper.rn-0.4.3
clips=${CLIPS:-8}
threads=${THREADS:-1}
max_tokens=${MAX_TOKENS:-16}

fail() {
    echo "whisper_batch: $*" >&2
    exit 1
}
step() { # log, command...
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { cat "$log"; fail "failed: $*"; }
}
[ -f "$whisper_dir/whisper.cpp" ] || fail "no whisper.cpp sources in $whisper_dir: run scripts/fetch-whisper.sh"
command -v espeak-ng >/dev/null || fail "needs espeak-ng"
[ -f "$build_dir/CMakeCache.txt" ] || fail "$build_dir is not a wsp-ggml build tree"
mkdir -p "$work"

# install and build: incremental after the first run
step "$work/install.log" cmake --install "$build_dir" --prefix "$work/prefix"
if [ ! -f "$work/build/CMakeCache.txt" ]; then
    step "$work/configure.log" cmake -S "$src_dir/examples/whisper" -B "$work/build" -G Ninja \
        -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release -DWHISPER_SOURCE_DIR="$whisper_dir"
fi
step "$work/build.log" cmake --build "$work/build" --target whisper_transcribe
transcribe=$work/build/whisper_transcribe

# tiny dimensions, 256 encoder positions (5.12 s windows); espeak-ng writes 22050 Hz, which the
# transcriber resamples to 16 kHz
step "$work/model.log" "$work/prefix/bin/wsp-ggml-cli" write-model --out "$work/model.bin" --size tiny \
    --type f16 --seed 1 --audio-ctx 256
sentences=(
    "The quick brown fox jumps over the lazy dog."
    "Every device takes the next file when it is free."
    "Four simulated GPUs share one small machine."
    "A batch of short clips, spoken by a robot voice."
    "Throughput is counted in audio seconds per second."
    "The model is tiny and its weights are random."
    "One context spreads its work over all the devices."
    "The last clip of the batch ends the benchmark."
)
rm -rf "$work/clips"
mkdir -p "$work/clips"
for ((i = 0; i < clips; ++i)); do
    espeak-ng -w "$(printf '%s/clips/clip%02d.wav' "$work" "$i")" "${sentences[i % ${#sentences[@]}]} Clip $i."
done

# rate NAME ENV... -- ARGS...: runs the transcriber, prints its audio seconds per second
rate() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    local log=$work/$name.log
    if ! env "${envs[@]}" "$transcribe" --model "$work/model.bin" --threads "$threads" --max-tokens "$max_tokens" \
        --no-fallback --json "$work/$name.jsonl" "$@" "$work/clips" 2>"$log"; then
        cat "$log" >&2
        fail "$name failed"
    fi
    sed -n 's/^summary: .* \([0-9.]*\) audio s\/s (.*/\1/p' "$log"
}

cpu=$(rate cpu WSP_GGML_SIM_DEVICES=0 -- --cpu)
declare -A per all
for n in 2 4; do
    per[$n]=$(rate "sim$n-per-device" WSP_GGML_SIM_DEVICES=$n -- --per-device)
    all[$n]=$(rate "sim$n-all-gpus" WSP_GGML_SIM_DEVICES=$n -- --all-gpus)
done

echo "whisper_transcribe, $clips clips, tiny model (audio ctx 256), $threads thread(s) per context, audio s/s:"
printf '%-10s %10s %12s %10s\n' devices cpu per-device all-gpus
printf '%-10s %10s %12s %10s\n' cpu "$cpu" - -
for n in 2 4; do
    printf '%-10s %10s %12s %10s\n' "$n sims" - "${per[$n]}" "${all[$n]}"
done
echo "logs and JSON lines in $work"
