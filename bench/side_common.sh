# Sourced by bench/whisper_side.sh and bench/mul_mat_side.sh: messages and steps, our build (retried
# once: the sources may be changing under us), the peers' builds (bench/peers on each whisper.rn
# package's cpp/ folder from scripts/fetch-peers.sh) and the idle-machine checks. The caller sets
# side_tag (its name in messages), src_dir, work, quiet_wait and ncpu.
# shellcheck shell=bash disable=SC2154,SC2034,SC2004

fail() {
    echo "$side_tag: $*" >&2
    exit 1
}
step() { # log, command...
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { tail -n 30 "$log" >&2; fail "failed: $* (log: $log)"; }
}

# build_ours BUILD_DIR TARGET...: builds our targets, once more after a minute if that fails
build_ours() {
    local dir=$1
    shift
    if ! cmake --build "$dir" --parallel 2 --target "$@" >"$work/build-ours.log" 2>&1; then
        echo "$side_tag: building $dir failed; retrying in a minute" >&2
        sleep 60
        step "$work/build-ours.log" cmake --build "$dir" --parallel 2 --target "$@"
    fi
}

# build_peers TARGET: bin[shipped] and bin[upstream] set to TARGET built on each peer present
build_peers() {
    local target=$1 entry name version peer pbuild
    for entry in "shipped 0.4.3" "upstream 0.7.3"; do
        read -r name version <<<"$entry"
        peer=$src_dir/.third_party/peers/whisper.rn-$version
        pbuild=$src_dir/build/peers-$version
        if [ ! -f "$peer/ggml.c" ] || [ ! -f "$peer/whisper.cpp" ]; then
            echo "$side_tag: no $peer (scripts/fetch-peers.sh): $name is left out" >&2
            continue
        fi
        if [ ! -f "$pbuild/CMakeCache.txt" ]; then
            step "$work/configure-$name.log" cmake -S "$src_dir/bench/peers" -B "$pbuild" -G Ninja -DPEER_DIR="$peer"
        fi
        step "$work/build-$name.log" cmake --build "$pbuild" --parallel 2 --target "$target"
        bin[$name]=$pbuild/$target
    done
}

# others_busy: the CPU time the machine spent over half a second while this script slept, in percent
# of one core (/proc/stat: user, nice, system, irq, softirq over all but idle and iowait)
others_busy() {
    local a b
    read -r -a a < <(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat)
    sleep 0.5
    read -r -a b < <(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat)
    echo $(((b[0] - a[0]) * 100 * ncpu / (b[1] - a[1] > 0 ? b[1] - a[1] : 1)))
}
# wait_quiet: waits (up to QUIET_WAIT seconds) for others_busy to fall to 20% of a core; prints it
wait_quiet() {
    local waited=0 busy
    busy=$(others_busy)
    while ((busy > 20 && waited < quiet_wait)); do
        sleep 5
        waited=$((waited + 5))
        busy=$(others_busy)
    done
    echo "$busy"
}
