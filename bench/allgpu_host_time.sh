#!/usr/bin/env bash
# The host time of a decoder step on the all-GPU device, before and after Note [grown shapes]
# (src/allgpu/reshape.cpp), in one run: whisper_check (whisper.cpp 0.4.3 on our package, the
# tiny model of WhisperClient.Build) teacher-forces TOKENS steps without flash attention (the
# cache unpadded, one position longer each step) on SIM_All over SIMS sims, with
# WSP_GGML_ALL_GPU_RESHAPE=1 ("after": a step reshapes the build of the step before) and =0
# ("before": each step planned and built), ROUNDS times, alternating; and on SIM0 alone beside
# them. Prints each run's median over the steps of the calling thread's CPU time per step (the
# sims compute on threads of their own) and the plans built per step, then the median of the
# rounds for each.
#   bench/allgpu_host_time.sh [WORK]
# WORK: WhisperClient.Build's folder (default build/release/tests/whisper: ctest -R
# WhisperClient.Build writes it). Environment: TOKENS (100), ROUNDS (3), SIMS (2), THREADS (2).
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$src_dir/build/release/tests/whisper}")
tokens=${TOKENS:-100}
rounds=${ROUNDS:-3}
sims=${SIMS:-2}
threads=${THREADS:-2}
check=$work/build/whisper_check
for f in "$check" "$work/model-tiny-f16.bin" "$work/clip.wav"; do
    [ -e "$f" ] || { echo "allgpu_host_time: no $f (run ctest -R WhisperClient.Build first)" >&2; exit 1; }
done

# one run: prints "median_us plans_per_step" of the device whisper.cpp ran on
run() { # label, device, env...
    local label=$1 device=$2 out
    shift 2
    out=$(env "$@" WSP_GGML_SIM_DEVICES="$sims" "$check" --model "$work/model-tiny-f16.bin" --wav "$work/clip.wav" \
        --threads "$threads" --tokens "$tokens" --expect-device "$device" 2>&1) ||
        { echo "$out" | tail -5 >&2; echo "allgpu_host_time: $label failed" >&2; exit 1; }
    # the second "host time" line is the device's (the first is the CPU reference context's)
    local us built
    us=$(sed -n 's/^host time: decode step median \([0-9.]*\) us.*/\1/p' <<<"$out" | sed -n 2p)
    built=$(sed -n 's/^counters [^,]*, plans and member graphs built by decode step: //p' <<<"$out" |
        awk '{ s = 0; for (i = 3; i <= NF; ++i) s += $i; printf "%.2f", s / (NF - 2) }')
    echo "$us $built"
}

declare -A all
for ((r = 1; r <= rounds; ++r)); do
    for mode in after before; do
        reshape=1
        [ "$mode" = before ] && reshape=0
        read -r us built < <(run "$mode" SIM_All WSP_GGML_ALL_GPUS=1 WSP_GGML_ALL_GPU_RESHAPE=$reshape)
        printf 'round %d  SIM_All %-6s  %8.1f us a step  plans built a step after the second: %s\n' "$r" "$mode" "$us" "$built"
        all[$mode]+="$us "
    done
    read -r us built < <(run sim0 SIM0)
    printf 'round %d  SIM0 alone      %8.1f us a step\n' "$r" "$us"
    all[sim0]+="$us "
done
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "median of $rounds rounds (each the median of $tokens + 4 steps; $sims sims; the calling thread's CPU time):"
echo "  SIM_All before (planned and built each step): $(median "${all[before]}") us"
echo "  SIM_All after (the build reshaped):           $(median "${all[after]}") us"
echo "  SIM0 alone:                                   $(median "${all[sim0]}") us"
