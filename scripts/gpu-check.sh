#!/usr/bin/env bash
# The GPU check: one prepared command for a GPU machine (NVIDIA driver and CUDA toolkit; no compiler
# packages, no network), 8 minutes in all. It runs the bundle that scripts/gpu-prepare.sh built
# beforehand on a machine without a GPU (build/gpu-bundle, carried there; Note [GPU bundle] in
# CMakeLists.txt), in this order:
#   bundle    every program and library resolves (ldd) to the C and C++ runtimes, CUDA's own
#             libraries (libcudart, libcublas, libcublasLt, libnccl, libcuda) or the bundle's lib/;
#             the CPU runs the bundle's x86-64-v3 code
#   probe     tools/gpu_probe.cu, one line each: driver and runtime, devices, a kernel, a pool
#             allocation, cudaHostRegister, cuBLAS by soname and from the toolkit's folder, NCCL's
#             version, the peer-access matrix
#   suites    the CUDA suites on the real GPUs, then on 2 virtual devices
#             (WSP_GGML_CUDA_VIRTUAL_DEVICES=2): each test case in a process of its own, as ctest
#             runs them, several at a time, each under `timeout`
#   whisper   whisper.cpp on CUDA0 against the CPU, the device's counters checked (whisper_check
#             --expect-steady, Note [steady step]); the model is written there by wsp-ggml-cli
#   benches   bench_cuda and bench_cuda_ops, each only while the time left allows it
# Every step runs under `timeout` inside one budget (WSP_GPU_CHECK_BUDGET, 450 s); what no longer
# fits is skipped, and the summary says so. The output folder gets two files and nothing else:
# summary.txt (a line per probe and per step: PASS, FAIL, SKIP or REFUSED, seconds, test counts;
# REFUSED is a capability the hardware declines, whose tests skip) and logs.tar.gz (every log, the
# benches' JSON, the summary).
#   scripts/gpu-check.sh [--dry-run] [OUTPUT_DIR]      (OUTPUT_DIR: $OUT, else build/gpu-check)
# --dry-run, on a machine without a GPU (CI): builds the bundle or brings it up to date
# (scripts/gpu-prepare.sh), then runs every step but the GPU's work: the ldd check, the probe (which
# must report no GPU cleanly), every suite case (the GPU cases skip, with the reason), whisper_check
# on a simulated device (WSP_GGML_SIM_DEVICES=1) without the counters' check, the benches' plumbing.
# Exit status: 0 when every step passed.
# Environment: WSP_GPU_BUNDLE (build/gpu-bundle), WSP_GPU_CHECK_BUDGET (450), WSP_GPU_CHECK_JOBS
# (test processes at a time: half the cores, 2 to 8), CUDA_HOME (the toolkit, else nvcc's or
# /usr/local/cuda).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

dry=0
if [ "${1:-}" = --dry-run ]; then
    dry=1
    shift
fi
out=${1:-${OUT:-build/gpu-check}}
bundle=${WSP_GPU_BUNDLE:-build/gpu-bundle}
budget=${WSP_GPU_CHECK_BUDGET:-450}
cores=$(nproc)
half=$((cores / 2))
jobs=${WSP_GPU_CHECK_JOBS:-$((half < 2 ? 2 : half > 8 ? 8 : half))}
case_limit=120 # seconds for one test case
reserve=15     # seconds kept for the archive at the end

mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
rm -f "$out/summary.txt" "$out/logs.tar.gz"
summary=$out/summary.txt
work=$(mktemp -d)
logs=$work/logs
mkdir -p "$logs"
status=0
t_start=$SECONDS
deadline=$((SECONDS + budget))

note() { echo "$*" | tee -a "$summary"; }
# result STATUS STEP SECONDS DETAIL: the step's line; FAIL fails the check
result() {
    note "$(printf '%-7s %-15s %4s s  %s' "$1" "$2" "$3" "$4")"
    [ "$1" != FAIL ] || status=1
}
left() { echo $((deadline - SECONDS)); }
# the time a step may take: at most its own limit, and what is left after `after` seconds kept
# for the steps that must follow
limit_for() { # max, after
    local l=$(($(left) - reserve - $2))
    echo $((l < $1 ? l : $1))
}

# shellcheck disable=SC2317 # the EXIT trap runs it
finish() {
    note "$(printf 'total %d s (budget %d s), status %d' $((SECONDS - t_start)) "$budget" "$status")"
    cp "$summary" "$logs/summary.txt"
    tar -czf "$out/logs.tar.gz" -C "$work" logs
    rm -rf "$work"
}
trap finish EXIT
trap 'exit 143' TERM INT

is_elf() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

note "gpu-check$([ $dry -eq 1 ] && echo ' --dry-run'), $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n), $cores cores, tree $(git describe --always --dirty 2>/dev/null || echo '(no git)')"

if [ $dry -eq 1 ]; then
    t0=$SECONDS
    if scripts/gpu-prepare.sh >"$logs/prepare.log" 2>&1; then
        result PASS prepare $((SECONDS - t0)) "$(grep '^== .*MiB' "$logs/prepare.log" | sed 's/^== //')"
    else
        why=$(grep -m1 -E 'error|FAILED:|^gpu-prepare:' "$logs/prepare.log" || tail -1 "$logs/prepare.log")
        result FAIL prepare $((SECONDS - t0)) "scripts/gpu-prepare.sh failed: ${why:0:300}"
        exit 1
    fi
    # the budget is the GPU machine's: it starts once the bundle is there
    deadline=$((SECONDS + budget))
fi

if [ ! -f "$bundle/BUNDLE.txt" ]; then
    result FAIL bundle 0 "no bundle at $bundle: run scripts/gpu-prepare.sh on a machine with nvcc and carry $bundle"
    exit 1
fi
note "bundle: $(grep -vE '^(suites|model) ' "$bundle/BUNDLE.txt" | paste -sd '|' | sed 's/|/; /g')"

# the toolkit's library folder: where cuBLAS is looked up by path, and libraries if ldd misses one
toolkit_lib=""
nvcc_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc 2>/dev/null || echo /none/bin/nvcc)")")")
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "$nvcc_root" /usr/local/cuda; do
    for dir in "$root/lib64" "$root/targets/x86_64-linux/lib" "$root/lib"; do
        if [ -n "$root" ] && [ -z "$toolkit_lib" ] && compgen -G "$dir/libcublas.so.*" >/dev/null; then
            toolkit_lib=$dir
        fi
    done
done

# --- bundle: what every binary needs resolves to the system's runtimes, CUDA's or the bundle's
system_libs='^(linux-vdso|ld-linux-x86-64|libc|libm|libgcc_s|libstdc\+\+|libpthread|libdl|librt)\.so'
cuda_libs='^(libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
check_libraries() { # prints one line per problem; the CUDA libraries' paths to $logs/cuda-libs.txt
    local f name path bundle_dir
    bundle_dir=$(readlink -f "$bundle")
    : >"$logs/cuda-libs.txt"
    for f in "$bundle"/bin/* "$bundle"/lib/*; do
        is_elf "$f" || continue
        local list
        list=$(ldd "$f" 2>&1)
        echo "== $f" >>"$logs/ldd.log"
        echo "$list" >>"$logs/ldd.log"
        grep -o "version \`[^']*' not found.*" <<<"$list" | sed "s|^|$(basename "$f"): |"
        while read -r name path; do
            if [ "$path" = not ]; then
                echo "$(basename "$f"): $name not found"
            elif [[ $(readlink -f "$path") == "$bundle_dir"/* ]] || [[ $name =~ $system_libs ]]; then
                :
            elif [[ $name =~ $cuda_libs ]]; then
                echo "$name $(readlink -f "$path")" >>"$logs/cuda-libs.txt"
            else
                echo "$(basename "$f"): $name from $path, neither the system's, CUDA's nor the bundle's"
            fi
        done < <(sed -n 's/^\s*\(\S*\) => \(\S*\).*/\1 \2/p' <<<"$list")
    done
}
t0=$SECONDS
problems=$(check_libraries)
extra=""
# a CUDA library outside the toolkit's folder that the RPATH names (a Python wheel's NCCL, say)
missing=$(grep -oE "(libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so\.[0-9]+ not found" <<<"$problems" |
    cut -d' ' -f1 | sort -u)
if [ $dry -eq 0 ] && [ -n "$missing" ]; then
    while read -r name; do
        found=$(timeout 30 find "$toolkit_lib" /usr/local /opt /usr/lib -name "$name" -print -quit 2>/dev/null)
        if [ -n "$found" ]; then
            LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            export LD_LIBRARY_PATH
            extra+="; $name from $(dirname "$found") (LD_LIBRARY_PATH)"
        fi
    done <<<"$missing"
    problems=$(check_libraries)
fi
# x86-64-v3, as gpu-prepare.sh compiles the CPU code
missing_cpu=""
for flag in avx2 fma f16c bmi2 movbe; do
    grep -qw "$flag" /proc/cpuinfo || missing_cpu+=" $flag"
done
[ -z "$missing_cpu" ] || problems+=$'\n'"this CPU lacks$missing_cpu: the bundle's CPU code (x86-64-v3) cannot run"
n_bin=$(find "$bundle/bin" -mindepth 1 | wc -l)
n_lib=$(find "$bundle/lib" -mindepth 1 | wc -l)
cuda_from=$(sort -u "$logs/cuda-libs.txt" | awk '{ sub(/\/[^\/]*$/, "", $2); print $2 }' | sort -u | paste -sd ',')
problems=$(sed '/^$/d' <<<"$problems" | sort -u)
if [ -z "$problems" ]; then
    result PASS bundle $((SECONDS - t0)) "$n_bin programs, $n_lib library files, each resolving to the system's runtimes, the bundle and CUDA's libraries (from ${cuda_from:-nowhere})$extra"
else
    result FAIL bundle $((SECONDS - t0)) "$(wc -l <<<"$problems") problem(s), see ldd.log$extra"
    head -8 <<<"$problems" | sed 's/^/        /' | tee -a "$summary"
fi

# --- probe
t0=$SECONDS
if [ $dry -eq 0 ]; then
    nvidia-smi >"$logs/nvidia-smi.log" 2>&1 || true
fi
probe_args=(--toolkit-lib "$toolkit_lib")
[ $dry -eq 1 ] || probe_args+=(--expect-gpu)
timeout -k 5 60 "$bundle/bin/gpu_probe" "${probe_args[@]}" >"$logs/probe.log" 2>&1
rc=$?
while read -r name state what; do
    case $state in
        PASS | FAIL | SKIP | REFUSED) note "$(printf '%-7s probe %-9s %s' "$state" "$name" "$what")" ;;
    esac
done <"$logs/probe.log"
n_lines=$(grep -cE '^\S+ +(PASS|FAIL|SKIP|REFUSED) ' "$logs/probe.log")
if [ $rc -eq 0 ] && [ "$n_lines" -eq 8 ]; then
    result PASS probe $((SECONDS - t0)) "8 probes"
else
    result FAIL probe $((SECONDS - t0)) "exit status $rc, $n_lines of 8 probes reported; see probe.log"
fi

# --- the CUDA suites, each case in a process of its own (a case may set the environment that the
# backend reads once, as under ctest)
list_cases() { # env...: "program Suite.Case" lines (run_suites's $label names the folder)
    local bin
    for bin in "$bundle"/bin/test_*; do
        env "$@" "$bin" --gtest_list_tests 2>>"$logs/$label/list.log" | awk -v b="$(basename "$bin")" '
            /^[^ ]/ { suite = ($1 ~ /\.$/) ? $1 : ""; next }
            /^  / && suite != "" { print b, suite $1 }'
    done
}

run_case() { # label program case limit env...: one line to results.tsv
    local label=$1 bin=$2 name=$3 limit=$4
    shift 4
    local log="$logs/$label/$bin/${name//\//_}.log" t0=$SECONDS rc state reason=""
    GTEST_COLOR=no timeout -k 5 "$limit" env "$@" "$bundle/bin/$bin" --gtest_filter="$name" >"$log" 2>&1
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        state=FAIL reason="timed out after $limit s"
    elif [ $rc -gt 128 ]; then
        state=FAIL reason="killed by signal $((rc - 128))"
    elif [ $rc -ne 0 ]; then
        state=FAIL reason=$(awk '/: Failure$/ { getline; print; exit }' "$log")
        [ -n "$reason" ] || reason="exit status $rc"
    elif grep -q '^\[  SKIPPED \] 1 test' "$log"; then
        state=SKIP reason=$(awk '/: Skipped$/ { getline; print; exit }' "$log")
        # on a GPU machine a case that finds no GPU is a failure: the backend does not see it
        if [ $dry -eq 0 ] && [[ $reason == "no CUDA "* ]]; then
            state=FAIL reason="skipped on a GPU machine: $reason"
        fi
    elif grep -q '^\[  PASSED  \] 1 test' "$log"; then
        state=PASS
    else
        state=FAIL reason="the filter ran no test"
    fi
    printf '%s\t%s\t%s\t%d\t%s\n' "$state" "$bin" "$name" $((SECONDS - t0)) "${reason:0:200}" >>"$logs/$label/results.tsv"
}

run_suites() { # label limit env...
    local label=$1 limit=$2
    shift 2
    local t0=$SECONDS stop=$((SECONDS + limit)) n=0 launched=0 bin name
    mkdir -p "$logs/$label"
    : >"$logs/$label/results.tsv"
    list_cases "$@" >"$logs/$label/cases.txt"
    n=$(wc -l <"$logs/$label/cases.txt")
    while read -r bin name; do
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
            wait -n
        done
        local case_left=$((stop - SECONDS))
        [ $case_left -gt 5 ] || break
        mkdir -p "$logs/$label/$bin"
        run_case "$label" "$bin" "$name" $((case_left < case_limit ? case_left : case_limit)) "$@" &
        launched=$((launched + 1))
    done <"$logs/$label/cases.txt"
    wait
    local tsv=$logs/$label/results.tsv passed failed skipped programs
    passed=$(grep -c '^PASS' "$tsv")
    failed=$(grep -c '^FAIL' "$tsv")
    skipped=$(grep -c '^SKIP' "$tsv")
    programs=$(cut -d' ' -f1 "$logs/$label/cases.txt" | sort -u | wc -l)
    local counts="$programs programs, $n cases: $passed passed, $failed failed, $skipped skipped"
    [ $launched -eq "$n" ] || counts+=", $((n - launched)) not run: out of time"
    if [ "$n" -gt 0 ] && [ "$failed" -eq 0 ] && [ $launched -eq "$n" ]; then
        result PASS "$label" $((SECONDS - t0)) "$counts"
    else
        result FAIL "$label" $((SECONDS - t0)) "$counts"
    fi
    awk -F'\t' '$1 == "FAIL" { printf "        FAIL %s %s (%d s): %s\n", $2, $3, $4, $5 }' "$tsv" | head -8 | tee -a "$summary"
    [ "$failed" -le 8 ] || note "        ... $((failed - 8)) more in $label/results.tsv"
    awk -F'\t' '$1 == "SKIP" { print $5 }' "$tsv" | sort | uniq -c | sort -rn | head -5 |
        sed 's/^ *\([0-9]*\) /        skipped \1: /' | tee -a "$summary"
}

# the model, deterministic (tests/whisper/run.sh writes the same); too big to carry
t0=$SECONDS
model=$work/model-tiny-f16.bin
if timeout -k 5 60 "$bundle/bin/wsp-ggml-cli" write-model --out "$model" --size tiny --type f16 --seed 1 \
    --audio-ctx 200 >"$logs/write-model.log" 2>&1; then
    result PASS write-model $((SECONDS - t0)) "whisper tiny, F16, seed 1, 200 audio positions: $(($(stat -c %s "$model") >> 20)) MiB"
else
    result FAIL write-model $((SECONDS - t0)) "wsp-ggml-cli write-model failed, see write-model.log"
fi

whisper_need=100 # kept for whisper_check while the suites run
run_suites suites-gpu "$(limit_for 200 $((whisper_need + 60)))"
run_suites suites-virtual2 "$(limit_for 160 $whisper_need)" WSP_GGML_CUDA_VIRTUAL_DEVICES=2

# --- whisper.cpp on the first GPU device against the CPU, with the device counters
t0=$SECONDS
limit=$(limit_for 120 0)
if [ $dry -eq 0 ]; then
    whisper_env=(WSP_GGML_SIM_DEVICES=0 WSP_GGML_ALL_GPUS=0)
    whisper_args=(--expect-device CUDA0 --expect-steady)
else # no GPU: the plumbing on a simulated device, without the counters' check (the GPU's)
    whisper_env=(WSP_GGML_SIM_DEVICES=1 WSP_GGML_ALL_GPUS=0)
    whisper_args=(--expect-device SIM0)
fi
if [ "$limit" -lt 20 ]; then
    result FAIL whisper-check 0 "not run: $(left) s left"
else
    timeout -k 5 "$limit" env "${whisper_env[@]}" "$bundle/bin/whisper_check" --model "$model" \
        --wav "$bundle/data/clip.wav" --threads "$half" "${whisper_args[@]}" >"$logs/whisper-check.log" 2>&1
    rc=$?
    what="whisper_check ${whisper_args[*]}: exit status $rc$([ $rc -eq 124 ] && echo ", timed out after $limit s")"
    result "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" whisper-check $((SECONDS - t0)) "$what"
    grep -E '^(counters|FAIL)' "$logs/whisper-check.log" | head -12 | sed 's/^/        /' | tee -a "$summary"
fi

# --- benches, while time is left
bench() { # name, needs (seconds)
    local name=$1 need=$2 t0=$SECONDS
    if [ $(($(left) - reserve)) -lt "$need" ]; then
        result SKIP "$name" 0 "$(($(left) - reserve)) s left, it needs $need"
        return
    fi
    local limit rc
    limit=$(limit_for 100 0)
    timeout -k 5 "$limit" "$bundle/bin/$name" --benchmark_min_time=0.1 --benchmark_out="$logs/$name.json" \
        --benchmark_out_format=json >"$logs/$name.log" 2>&1
    rc=$?
    local errors
    errors=$(grep -c 'ERROR OCCURRED' "$logs/$name.log")
    if [ $rc -ne 0 ]; then
        result FAIL "$name" $((SECONDS - t0)) "exit status $rc$([ $rc -eq 124 ] && echo ", timed out after $limit s")"
    elif [ $dry -eq 1 ]; then
        result PASS "$name" $((SECONDS - t0)) "ran; $errors benchmarks report: $(grep -o "ERROR OCCURRED: '[^']*'" "$logs/$name.log" | sort -u | head -1)"
    elif [ "$errors" -gt 0 ]; then
        result FAIL "$name" $((SECONDS - t0)) "$errors benchmarks failed: $(grep -o "ERROR OCCURRED: '[^']*'" "$logs/$name.log" | sort -u | head -1)"
    else
        result PASS "$name" $((SECONDS - t0)) "$(grep -c '^BM_' "$logs/$name.log") benchmarks"
        grep -E '^BM_.*(TFLOP/s|GB/s)' "$logs/$name.log" | awk '{ r = ""; for (i = 2; i <= NF; ++i) if ($i ~ /^(TFLOP\/s|GB\/s|of_peak)=/) r = r " " $i; print "        " $1 r }' |
            head -16 | tee -a "$summary"
    fi
}
bench bench_cuda 60
bench bench_cuda_ops 60

exit $status
