#!/usr/bin/env bash
# whisper.cpp on three ggml builds side by side, in one run: "ours" (whisper.rn 0.4.3's whisper.cpp on
# our installed package, as examples/whisper builds it), "shipped" (the same package's whisper.cpp on
# the ggml it ships) and "upstream" (whisper.rn 0.7.3's whisper.cpp on its ggml, bench/peers). Each
# build runs whisper_bench (examples/whisper/whisper_bench.cpp) on each random-weight model in its own
# process, the build order alternating from model to model; prints encode ms (best of RUNS), decode
# ms per token (median), peak RSS and the ratios to ours in one table, and writes WORK/whisper_side.json.
#   bench/whisper_side.sh [BUILD_DIR [WORK]]
# BUILD_DIR: our build tree (default build/release; wsp-ggml and wsp-ggml-cli are built there, -j2),
# installed into WORK/prefix (default build/whisper-side); the peers build in build/peers-VERSION.
# Environment: SIZES (default "tiny base"), TYPES ("f16 q8_0"), TOKENS (32), BATCH (5: tokens per step of
# the batched decode, as that many beams), RUNS (3), THREADS (2),
# AUDIO_CTX (1500, the same for every build), QUIET_WAIT (seconds to wait before each run for the
# machine to be idle, default 0: don't wait), BUILD_OURS=0 (don't build BUILD_DIR).
# Needs espeak-ng, scripts/fetch-whisper.sh and scripts/fetch-peers.sh (a missing peer is skipped).
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(realpath "${1:-$src_dir/build/release}")
work=$(realpath -m "${2:-$src_dir/build/whisper-side}")
whisper_dir=$src_dir/.third_party/whisper.rn-0.4.3
sizes=${SIZES:-tiny base}
types=${TYPES:-f16 q8_0}
tokens=${TOKENS:-32}
batch=${BATCH:-5}
runs=${RUNS:-3}
threads=${THREADS:-2}
audio_ctx=${AUDIO_CTX:-1500}
quiet_wait=${QUIET_WAIT:-0}
ncpu=$(nproc)
side_tag=whisper_side
# shellcheck source=bench/side_common.sh
source "$src_dir/bench/side_common.sh"
[ -f "$whisper_dir/whisper.cpp" ] || fail "no whisper.cpp sources in $whisper_dir: run scripts/fetch-whisper.sh"
command -v espeak-ng >/dev/null || fail "needs espeak-ng"
[ -f "$build_dir/CMakeCache.txt" ] || fail "$build_dir is not a wsp-ggml build tree"
mkdir -p "$work/runs" "$work/models"

# ours: the library and the CLI (retried once: the sources may be changing under us), installed, and
# whisper_bench against the installed package
[ "${BUILD_OURS:-1}" != 0 ] && build_ours "$build_dir" wsp-ggml wsp-ggml-cli
step "$work/install.log" cmake --install "$build_dir" --prefix "$work/prefix"
if [ ! -f "$work/ours/CMakeCache.txt" ]; then
    step "$work/configure-ours.log" cmake -S "$src_dir/examples/whisper" -B "$work/ours" -G Ninja \
        -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release -DWHISPER_SOURCE_DIR="$whisper_dir"
fi
step "$work/build-ours-bench.log" cmake --build "$work/ours" --parallel 2 --target whisper_bench
declare -A bin=([ours]=$work/ours/whisper_bench)

build_peers whisper_bench

# the models (random weights, one seed; kept between runs) and one spoken clip
for size in $sizes; do
    for type in $types; do
        model=$work/models/$size-$type-a$audio_ctx.bin
        [ -f "$model" ] || step "$work/models/$size-$type.log" "$work/prefix/bin/wsp-ggml-cli" write-model \
            --out "$model" --size "$size" --type "$type" --seed 1 --audio-ctx "$audio_ctx"
    done
done
espeak-ng -w "$work/clip.wav" "The quick brown fox jumps over the lazy dog, and the decoder reads its words."

field() { # json file, key: the number after "key":
    sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p" "$1"
}

declare -A enc dec bdec rss busy_at
i=0
for size in $sizes; do
    for type in $types; do
        model=$work/models/$size-$type-a$audio_ctx.bin
        order=(ours shipped upstream)
        ((i % 2)) && order=(upstream shipped ours)
        i=$((i + 1))
        for name in "${order[@]}"; do
            key=$size/$type/$name
            [ -n "${bin[$name]:-}" ] || continue
            out=$work/runs/$size-$type-$name.json
            before=$(wait_quiet)
            ok=1
            "${bin[$name]}" "$model" "$work/clip.wav" --threads "$threads" --tokens "$tokens" --batch "$batch" --runs "$runs" \
                --label "$name" >"$out" 2>"$work/runs/$size-$type-$name.log" && [ -s "$out" ] || ok=0
            after=$(others_busy)
            busy_at[$key]=$((before > after ? before : after))
            echo "whisper_side: $name on $size/$type (others busy before/after: $before%/$after% of a core)" >&2
            if ((ok)); then
                enc[$key]=$(field "$out" encode_ms_best)
                dec[$key]=$(field "$out" decode_ms_per_token)
                bdec[$key]=$(field "$out" decode_batch_ms_per_step)
                rss[$key]=$(field "$out" peak_rss_mib)
            else
                # e.g. a whisper.cpp that cannot read the model: said in the table, not fatal
                what=failed
                grep -q "could not load" "$work/runs/$size-$type-$name.log" && what=no-load
                enc[$key]=$what
                dec[$key]=$what
                bdec[$key]=$what
                rss[$key]=$what
                rm -f "$out"
                tail -n 3 "$work/runs/$size-$type-$name.log" | sed "s|^|whisper_side: $name: |" >&2
            fi
        done
    done
done

ratio() { # a / b with two decimals, or - when either is not a number
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}
cell() { echo "${1:--}"; }
echo
echo "whisper.cpp on the CPU, $threads threads: encode ms (best of $runs, audio ctx $audio_ctx), decode ms per token" \
    "(median of $runs runs of $tokens steps), peak RSS MiB; ratios are time (or RSS) over ours"
printf '%-10s | %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %13s | %13s\n' "" "encode" "" "" "decode" "" "" "RSS" "" "" \
    "shipped/ours" "upstream/ours"
printf '%-10s | %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %6s %6s | %6s %6s\n' model ours shipped upstream ours shipped \
    upstream ours shipped upstream enc dec enc dec
busy_runs=()
json_rows=()
for size in $sizes; do
    for type in $types; do
        row=()
        for name in ours shipped upstream; do
            row+=("$(cell "${enc[$size/$type/$name]:-}")")
        done
        for name in ours shipped upstream; do
            row+=("$(cell "${dec[$size/$type/$name]:-}")")
        done
        for name in ours shipped upstream; do
            row+=("$(cell "${rss[$size/$type/$name]:-}")")
        done
        printf '%-10s | %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %6s %6s | %6s %6s\n' "$size/$type" "${row[@]}" \
            "$(ratio "${row[1]}" "${row[0]}")" "$(ratio "${row[4]}" "${row[3]}")" \
            "$(ratio "${row[2]}" "${row[0]}")" "$(ratio "${row[5]}" "${row[3]}")"
        for name in ours shipped upstream; do
            key=$size/$type/$name
            [ -n "${busy_at[$key]:-}" ] || continue
            ((busy_at[$key] > 20)) && busy_runs+=("$key")
            run_json=null
            [ -f "$work/runs/$size-$type-$name.json" ] && run_json=$(cat "$work/runs/$size-$type-$name.json")
            json_rows+=("{\"size\": \"$size\", \"type\": \"$type\", \"build\": \"$name\", \"others_busy_pct\": ${busy_at[$key]}, \"result\": $run_json}")
        done
    done
done
echo
echo "batched decode: ms per step of $batch tokens (a beam search's shapes over $batch beams; median of $runs runs of 8 steps)"
printf '%-10s | %8s %8s %8s | %13s %13s\n' model ours shipped upstream shipped/ours upstream/ours
for size in $sizes; do
    for type in $types; do
        row=()
        for name in ours shipped upstream; do
            row+=("$(cell "${bdec[$size/$type/$name]:-}")")
        done
        printf '%-10s | %8s %8s %8s | %13s %13s\n' "$size/$type" "${row[@]}" "$(ratio "${row[1]}" "${row[0]}")" \
            "$(ratio "${row[2]}" "${row[0]}")"
    done
done
for key in "${!enc[@]}"; do
    case ${enc[$key]} in
        failed) echo "failed: $key (log in $work/runs/)" ;;
        no-load) echo "no-load: whisper.cpp of $key could not load the model (log in $work/runs/)" ;;
    esac
done
((${#busy_runs[@]} > 0)) && echo "other processes used over 20% of a core just before or after: ${busy_runs[*]} (figures may be off; QUIET_WAIT=600 waits)"
{
    printf '{"threads": %s, "tokens": %s, "batch": %s, "runs": %s, "audio_ctx": %s, "results": [\n' "$threads" "$tokens" \
        "$batch" "$runs" "$audio_ctx"
    for ((j = 0; j < ${#json_rows[@]}; ++j)); do
        printf '  %s%s\n' "${json_rows[j]}" "$( ((j + 1 < ${#json_rows[@]})) && echo ,)"
    done
    printf ']}\n'
} >"$work/whisper_side.json"
echo "JSON in $work/whisper_side.json, logs in $work"
