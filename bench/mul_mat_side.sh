#!/usr/bin/env bash
# Small-batch mul_mat side by side: bench/mul_mat_small.cpp on our CPU backend and on the ggml that
# whisper.rn 0.4.3 ("shipped") and 0.7.3 ("upstream") carry (bench/peers), each in its own process,
# with weights from DRAM. Prints GFLOP/s per weight type and batch M for ours | shipped | upstream |
# OpenBLAS sgemm (F32, from our build), ours/upstream, and at M=1 the fraction of the measured memory
# bandwidth each reaches (against the probe passes beside that row: Note [probe beside the row] in
# mul_mat_small.cpp); writes WORK/mul_mat_side.json with every program's JSON in WORK.
#   bench/mul_mat_side.sh [BUILD_DIR [WORK]]
# BUILD_DIR: our build tree (default build/release; mul_mat_small is built there, -j2); the peers
# build in build/peers-VERSION (shared with bench/whisper_side.sh). WORK: default build/mul-mat-side.
# Environment: TYPES (default f32,f16,bf16,q8_0,q5_0,q5_1,q4_0,q4_1,
# q6_K,q5_K,q4_K,q3_K,q2_K), MS (1,2,4,8,16), SHAPES
# (1280x5120; e.g. 1280x5120,5120x1280), RUNS (5), THREADS (2), ROUNDS (1: passes over the builds, the
# order alternating, best figure kept), QUIET_WAIT (seconds to wait before each program for the machine
# to be idle; default 0), BUILD_OURS=0 (don't build BUILD_DIR), LEGACY=1 (every build through
# wsp_ggml_graph_compute_with_ctx, the API before backends, with one weight per graph, which stays
# in the cache: mul_mat_small --legacy --min-mib=1).
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(realpath "${1:-$src_dir/build/release}")
work=$(realpath -m "${2:-$src_dir/build/mul-mat-side}")
types=${TYPES:-f32,f16,bf16,q8_0,q5_0,q5_1,q4_0,q4_1,q6_K,q5_K,q4_K,q3_K,q2_K}
ms=${MS:-1,2,4,8,16}
shapes=${SHAPES:-1280x5120}
runs=${RUNS:-5}
threads=${THREADS:-2}
rounds=${ROUNDS:-1}
quiet_wait=${QUIET_WAIT:-0}
row_impl=ggml # the impl of the rows compared (mul_mat_small's "ggml", or "legacy")
extra=()
where="the CPU backend, $threads threads, weights from DRAM (>= 192 MiB per graph)"
if [ "${LEGACY:-0}" = 1 ]; then
    row_impl=legacy
    extra=(--legacy --min-mib=1)
    where="wsp_ggml_graph_compute_with_ctx, $threads threads, one weight per graph (in the cache)"
fi
ncpu=$(nproc)

side_tag=mul_mat_side
# shellcheck source=bench/side_common.sh
source "$src_dir/bench/side_common.sh"
[ -f "$build_dir/CMakeCache.txt" ] || fail "$build_dir is not a wsp-ggml build tree"
mkdir -p "$work"

[ "${BUILD_OURS:-1}" != 0 ] && build_ours "$build_dir" mul_mat_small
declare -A bin=([ours]=$build_dir/bench/mul_mat_small)
[ -x "${bin[ours]}" ] || fail "no ${bin[ours]}"
build_peers mul_mat_small

# the results, keyed "build|impl|type|k|n|m": best GFLOP/s over the rounds, its bandwidth fraction and
# weight buffer type; one process per build and type, the build order alternating, each started
# when the machine is idle (QUIET_WAIT) and flagged when others used over 20% of a core before or after
declare -A gflops frac buft bandwidth busy
IFS=, read -r -a type_list <<<"$types"
IFS=, read -r -a m_list <<<"$ms"
IFS=, read -r -a shape_list <<<"$shapes"
turn=0
for ((r = 0; r < rounds; ++r)); do
    for type in "${type_list[@]}"; do
        order=(ours shipped upstream)
        ((turn % 2)) && order=(upstream shipped ours)
        turn=$((turn + 1))
        for name in "${order[@]}"; do
            [ -n "${bin[$name]:-}" ] || continue
            json=$work/$name-$type-$r.json
            before=$(wait_quiet)
            step "$work/$name-$type-$r.log" "${bin[$name]}" --threads="$threads" --runs="$runs" --types="$type" \
                --ms="$ms" --shapes="$shapes" --label="$name" --json="$json" "${extra[@]}"
            after=$(others_busy)
            echo "mul_mat_side: $name $type, round $((r + 1)) of $rounds (others busy before/after: $before%/$after% of a core)" >&2
            ((before > 20 || after > 20)) && busy[$type]="${busy[$type]:+${busy[$type]},}$name"
            bw=$(sed -n 's/.*"bandwidth_gbs": \([0-9.]*\).*/\1/p' "$json")
            if awk -v a="$bw" -v b="${bandwidth[$name]:-0}" 'BEGIN { exit !(a > b) }'; then
                bandwidth[$name]=$bw
            fi
            while read -r impl t bt k n m g f e; do
                key="$name|$impl|$t|$k|$n|$m"
                # a result off by more than 5% of its scale (mul_mat_small's check) is marked "!"
                awk -v e="$e" 'BEGIN { exit !(e > 0.05) }' && g="$g!"
                if awk -v a="${g%!}" -v b="${gflops[$key]:-0}" 'BEGIN { exit !(a > b + 0) }'; then
                    gflops[$key]=$g
                    frac[$key]=$f
                    buft[$key]=$bt
                fi
            done < <(sed -n 's/.*"impl": "\([^"]*\)", "type": "\([^"]*\)", "buft": "\([^"]*\)", "k": \([0-9]*\), "n": \([0-9]*\), "m": \([0-9]*\),.*"gflops": \([0-9.]*\),.*"bw_fraction": \([0-9.]*\), "max_rel_err": \([0-9.e+-]*\).*/\1 \2 \3 \4 \5 \6 \7 \8 \9/p' "$json")
        done
    done
done

q() { # a number for JSON: null for -, a failed check's "!" dropped
    if [ "$1" = - ]; then echo null; else echo "${1%!}"; fi
}
f2() { # two decimals, or -
    awk -v a="$1" 'BEGIN { if (a == "-") printf "-"; else printf "%.2f", a }'
}
ratio() { # a / b with two decimals, or -
    awk -v a="${1%!}" -v b="${2%!}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}
echo
echo "mul_mat on $where, GFLOP/s (best of $runs; \"!\": result check failed;" \
    "$rounds round(s)); memory read bandwidth GB/s: ours ${bandwidth[ours]:--}, shipped ${bandwidth[shipped]:--}," \
    "upstream ${bandwidth[upstream]:--} (best of each build's runs; the M=1 fractions are against the probe beside each row)"
printf '%-6s %-10s %3s | %8s %8s %8s %8s | %9s | %-16s | %s\n' type KxN M ours shipped upstream openblas ours/upstr \
    "M=1 bw: o/s/u" "weights in (s/u)"
json_rows=()
for type in "${type_list[@]}"; do
    for shape in "${shape_list[@]}"; do
        k=${shape%x*}
        n=${shape#*x}
        for m in "${m_list[@]}"; do
            o=${gflops[ours|$row_impl|$type|$k|$n|$m]:--}
            s=${gflops[shipped|$row_impl|$type|$k|$n|$m]:--}
            u=${gflops[upstream|$row_impl|$type|$k|$n|$m]:--}
            blas=${gflops[ours|openblas|$type|$k|$n|$m]:--}
            fr=-
            if [ "$m" = 1 ]; then
                fr="$(f2 "${frac[ours|$row_impl|$type|$k|$n|$m]:--}")/$(f2 "${frac[shipped|$row_impl|$type|$k|$n|$m]:--}")"
                fr+="/$(f2 "${frac[upstream|$row_impl|$type|$k|$n|$m]:--}")"
            fi
            bt="${buft[shipped|$row_impl|$type|$k|$n|$m]:--}/${buft[upstream|$row_impl|$type|$k|$n|$m]:--}"
            printf '%-6s %-10s %3s | %8s %8s %8s %8s | %9s | %-16s | %-21s %s\n' "$type" "$shape" "$m" "$o" "$s" "$u" \
                "$blas" "$(ratio "$o" "$u")" "$fr" "$bt" "${busy[$type]:+(busy: ${busy[$type]})}"
            json_rows+=("{\"type\": \"$type\", \"k\": $k, \"n\": $n, \"m\": $m, \"gflops\": {\"ours\": $(q "$o"), \"shipped\": $(q "$s"), \"upstream\": $(q "$u"), \"openblas\": $(q "$blas")}, \"bw_fraction\": {\"ours\": $(q "${frac[ours|$row_impl|$type|$k|$n|$m]:--}"), \"shipped\": $(q "${frac[shipped|$row_impl|$type|$k|$n|$m]:--}"), \"upstream\": $(q "${frac[upstream|$row_impl|$type|$k|$n|$m]:--}")}, \"weights_in\": {\"shipped\": \"${buft[shipped|$row_impl|$type|$k|$n|$m]:--}\", \"upstream\": \"${buft[upstream|$row_impl|$type|$k|$n|$m]:--}\"}, \"busy\": \"${busy[$type]:-}\"}")
        done
    done
done
for type in "${type_list[@]}"; do
    [ -n "${busy[$type]:-}" ] && echo "$type: other processes used over 20% of a core around the runs of ${busy[$type]} (figures may be off)"
done
{
    printf '{"threads": %s, "runs": %s, "rounds": %s, "bandwidth_gbs": {"ours": %s, "shipped": %s, "upstream": %s}, "rows": [\n' \
        "$threads" "$runs" "$rounds" "$(q "${bandwidth[ours]:--}")" "$(q "${bandwidth[shipped]:--}")" \
        "$(q "${bandwidth[upstream]:--}")"
    for ((j = 0; j < ${#json_rows[@]}; ++j)); do
        printf '  %s%s\n' "${json_rows[j]}" "$( ((j + 1 < ${#json_rows[@]})) && echo ,)"
    done
    printf ']}\n'
} >"$work/mul_mat_side.json"
echo "JSON in $work/mul_mat_side.json (each program's own in $work/BUILD-TYPE-ROUND.json)"
