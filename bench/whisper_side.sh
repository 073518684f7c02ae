#!/usr/bin/env bash
# whisper.cpp on three ggml builds side by side, in one run: "ours" (whisper.rn 0.4.3's whisper.cpp on
# our installed package, as examples/whisper builds it), "shipped" (the same package's whisper.cpp on
# the ggml it ships) and "upstream" (whisper.rn 0.7.3's whisper.cpp on its ggml, bench/peers). Each
# build runs whisper_bench (examples/whisper/whisper_bench.cpp) on each random-weight model in its own
# process, the build order alternating from model to model; prints encode ms (best of RUNS), decode
# ms per token (median), peak RSS and the ratios to ours in one table, and writes WORK/whisper_side.json.
# With ROUNDS > 1 it passes over all models and builds that many times: this VM's memory bandwidth and
# CPU speed drift by up to 2x over minutes, so each ratio is taken between runs of the same round
# (seconds apart) and the table gives the median round's and the lowest round's.
#   bench/whisper_side.sh [BUILD_DIR [WORK]]
# BUILD_DIR: our build tree (default build/release; wsp-ggml and wsp-ggml-cli are built there, -j2),
# installed into WORK/prefix (default build/whisper-side); the peers build in build/peers-VERSION.
# Environment: SIZES (default "tiny base"), TYPES ("f16 q8_0"), TOKENS (32), BATCH (5: tokens per step of
# the batched decode, as that many beams), RUNS (3), ROUNDS (1), THREADS (2),
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
rounds=${ROUNDS:-1}
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

# one value per build, model and round, keyed size/type/build/round
declare -A enc dec bdec rss busy_at
turn=0
# shellcheck disable=SC2034 # dec, bdec and rss are read through namerefs (over, round_ratios)
for ((r = 0; r < rounds; ++r)); do
    for size in $sizes; do
        for type in $types; do
            model=$work/models/$size-$type-a$audio_ctx.bin
            order=(ours shipped upstream)
            ((turn % 2)) && order=(upstream shipped ours)
            turn=$((turn + 1))
            for name in "${order[@]}"; do
                [ -n "${bin[$name]:-}" ] || continue
                key=$size/$type/$name/$r
                run=$work/runs/$size-$type-$name-$r
                before=$(wait_quiet)
                ok=1
                "${bin[$name]}" "$model" "$work/clip.wav" --threads "$threads" --tokens "$tokens" --batch "$batch" \
                    --runs "$runs" --label "$name" >"$run.json" 2>"$run.log" && [ -s "$run.json" ] || ok=0
                after=$(others_busy)
                busy_at[$key]=$((before > after ? before : after))
                echo "whisper_side: $name on $size/$type, round $((r + 1)) of $rounds" \
                    "(others busy before/after: $before%/$after% of a core)" >&2
                if ((ok)); then
                    enc[$key]=$(field "$run.json" encode_ms_best)
                    dec[$key]=$(field "$run.json" decode_ms_per_token)
                    bdec[$key]=$(field "$run.json" decode_batch_ms_per_step)
                    rss[$key]=$(field "$run.json" peak_rss_mib)
                else
                    # e.g. a whisper.cpp that cannot read the model: said in the table, not fatal
                    what=failed
                    grep -q "could not load" "$run.log" && what=no-load
                    enc[$key]=$what
                    dec[$key]=$what
                    bdec[$key]=$what
                    rss[$key]=$what
                    rm -f "$run.json"
                    tail -n 3 "$run.log" | sed "s|^|whisper_side: $name: |" >&2
                fi
            done
        done
    done
done

# agg min|max|median VALUE...: the statistic (one decimal from 100 up, else three), the first word
# when a value is not a number (a failed run), - when there are none
agg() {
    awk -v how="$1" 'BEGIN {
        n = 0
        for (i = 1; i < ARGC; ++i) {
            if (ARGV[i] !~ /^[0-9.]+$/) { print ARGV[i]; exit }
            v[n++] = ARGV[i] + 0
        }
        if (n == 0) { print "-"; exit }
        for (i = 0; i < n; ++i) for (j = i + 1; j < n; ++j) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        x = how == "min" ? v[0] : how == "max" ? v[n - 1] : n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
        printf(x >= 100 ? "%.1f\n" : "%.3f\n", x)
    }' "${@:2}"
}
# over FIGURE KEY: FIGURE's values of KEY (size/type/build) over the rounds
over() {
    local -n figure=$1
    local r
    for ((r = 0; r < rounds; ++r)); do
        [ -n "${figure[$2/$r]:-}" ] && echo "${figure[$2/$r]}"
    done
}
# round_ratios FIGURE SIZE/TYPE PEER: PEER's value over ours', round by round (both ran in that round)
round_ratios() {
    local -n figure=$1
    local r a b
    for ((r = 0; r < rounds; ++r)); do
        a=${figure[$2/$3/$r]:-}
        b=${figure[$2/ours/$r]:-}
        awk -v a="$a" -v b="$b" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.4f\n", a / b }'
    done
}
# ratio_cell FIGURE SIZE/TYPE PEER: the median of the per-round ratios, and with more than one round
# their lowest after a slash
ratio_cell() {
    local -a rr
    mapfile -t rr < <(round_ratios "$@")
    if ((${#rr[@]} == 0)); then
        echo -
    elif ((rounds > 1)); then
        printf '%.2f/%.2f' "$(agg median "${rr[@]}")" "$(agg min "${rr[@]}")"
    else
        printf '%.2f' "${rr[0]}"
    fi
}
cell() { # STAT FIGURE KEY
    local -a vs
    mapfile -t vs < <(over "$2" "$3")
    agg "$1" "${vs[@]}"
}
echo
echo "whisper.cpp on the CPU, $threads threads, $rounds round(s) over the builds: encode ms (best of $runs runs in each" \
    "round, best round), decode ms per token (median of $runs runs of $tokens steps, median round), peak RSS MiB" \
    "(highest round); ratios are time (or RSS) over ours in the same round, the median round's$( ((rounds > 1)) &&
        echo " and after the slash the lowest round's")"
printf '%-10s | %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %-19s | %-19s\n' "" "encode" "" "" "decode" "" "" "RSS" "" "" \
    "shipped/ours" "upstream/ours"
printf '%-10s | %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %9s %9s | %9s %9s\n' model ours shipped upstream ours shipped \
    upstream ours shipped upstream enc dec enc dec
busy_runs=()
json_rows=()
for size in $sizes; do
    for type in $types; do
        row=()
        for name in ours shipped upstream; do
            row+=("$(cell min enc "$size/$type/$name")")
        done
        for name in ours shipped upstream; do
            row+=("$(cell median dec "$size/$type/$name")")
        done
        for name in ours shipped upstream; do
            row+=("$(cell max rss "$size/$type/$name")")
        done
        printf '%-10s | %9s %9s %9s | %8s %8s %8s | %7s %7s %7s | %9s %9s | %9s %9s\n' "$size/$type" "${row[@]}" \
            "$(ratio_cell enc "$size/$type" shipped)" "$(ratio_cell dec "$size/$type" shipped)" \
            "$(ratio_cell enc "$size/$type" upstream)" "$(ratio_cell dec "$size/$type" upstream)"
        for ((r = 0; r < rounds; ++r)); do
            for name in ours shipped upstream; do
                key=$size/$type/$name/$r
                [ -n "${busy_at[$key]:-}" ] || continue
                ((busy_at[$key] > 20)) && busy_runs+=("$key")
                run_json=null
                [ -f "$work/runs/$size-$type-$name-$r.json" ] && run_json=$(cat "$work/runs/$size-$type-$name-$r.json")
                json_rows+=("{\"size\": \"$size\", \"type\": \"$type\", \"build\": \"$name\", \"round\": $r, \"others_busy_pct\": ${busy_at[$key]}, \"result\": $run_json}")
            done
        done
    done
done
echo
echo "batched decode: ms per step of $batch tokens (a beam search's shapes over $batch beams; median of $runs runs of 8" \
    "steps, median round)"
printf '%-10s | %8s %8s %8s | %13s %13s\n' model ours shipped upstream shipped/ours upstream/ours
for size in $sizes; do
    for type in $types; do
        row=()
        for name in ours shipped upstream; do
            row+=("$(cell median bdec "$size/$type/$name")")
        done
        printf '%-10s | %8s %8s %8s | %13s %13s\n' "$size/$type" "${row[@]}" "$(ratio_cell bdec "$size/$type" shipped)" \
            "$(ratio_cell bdec "$size/$type" upstream)"
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
    printf '{"threads": %s, "tokens": %s, "batch": %s, "runs": %s, "rounds": %s, "audio_ctx": %s, "results": [\n' \
        "$threads" "$tokens" "$batch" "$runs" "$rounds" "$audio_ctx"
    for ((j = 0; j < ${#json_rows[@]}; ++j)); do
        printf '  %s%s\n' "${json_rows[j]}" "$( ((j + 1 < ${#json_rows[@]})) && echo ,)"
    done
    printf ']}\n'
} >"$work/whisper_side.json"
echo "JSON in $work/whisper_side.json, logs in $work"
