#!/usr/bin/env bash
# cluster.sh - a throw-away single-node Slurm cluster (munged, slurmctld, slurmd) on localhost for
# tests; config, munge key/socket, spool, state, logs and pid files all live in STATE_DIR.
#   cluster.sh start STATE_DIR   # prints "export SLURM_CONF=..." on stdout: eval "$(cluster.sh start DIR)"
#   cluster.sh stop STATE_DIR    # stops what start started; exit 0 even if already stopped
#   cluster.sh selftest          # array + requeue checks in a temp dir, always stops; PASS/FAILED
# Needs Debian 12's slurmctld, slurmd, slurm-client, munge; exits 77 with "SKIP: ..." without them.
set -euo pipefail

# Seconds between SIGTERM and SIGKILL when Slurm ends a task (cancel, requeue, time limit).
KILL_WAIT=5
# AuthInfo cred_expire: also how long a requeued job waits before it may start again (min 5, default 120).
CRED_EXPIRE=5
# Seconds "start" waits for the node to be idle.
START_TIMEOUT=${SLURM_TEST_START_TIMEOUT:-60}

log() { printf '%s\n' "cluster.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

require_tools() {
    local t
    for t in slurmctld slurmd sbatch munged; do
        if ! command -v "$t" >/dev/null 2>&1; then
            echo "SKIP: $t not found (apt-get install slurmctld slurmd slurm-client munge)"
            exit 77
        fi
    done
}

# Daemons live in /usr/sbin, which a non-login PATH may lack.
PATH="$PATH:/usr/sbin:/sbin"
export PATH

abs_dir() { mkdir -p "$1" && (cd "$1" && pwd -P); }

# --- process helpers -------------------------------------------------------

# True when pid exists and is not a zombie (containers often have no reaping init).
alive() {
    local pid=$1 state
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

comm_of() {
    local c=""
    read -r c 2>/dev/null <"/proc/$1/comm" || true
    printf '%s\n' "$c"
}

# Pids of slurmstepd processes that belong to this state dir (they keep its slurmd log open).
stepd_pids() {
    local s=$1 p f
    for p in /proc/[0-9]*; do
        [ "$(comm_of "${p#/proc/}")" = slurmstepd ] || continue
        for f in "$p"/fd/*; do
            case "$(readlink "$f" 2>/dev/null)" in
                "$s"/*) echo "${p#/proc/}"; break ;;
            esac
        done
    done
}

# All descendants of the given pids (one per line, the pids themselves included).
with_descendants() {
    local todo=("$@") p c
    local -A seen=()
    local -A kids=()
    local line pid ppid
    while read -r line; do
        pid=${line%% *}
        ppid=${line##* }
        kids[$ppid]+="$pid "
    done < <(for p in /proc/[0-9]*/stat; do
                 sed -n -e 's/^\([0-9]*\) (.*) [A-Z] \([0-9]*\) .*/\1 \2/p' "$p" 2>/dev/null
             done)
    while [ ${#todo[@]} -gt 0 ]; do
        p=${todo[0]}
        todo=("${todo[@]:1}")
        [ -n "${seen[$p]:-}" ] && continue
        seen[$p]=1
        echo "$p"
        for c in ${kids[$p]:-}; do todo+=("$c"); done
    done
}

# Processes of this state dir: the daemons whose command line names it and the slurmstepds that
# write to its log, with everything below them (slurmscriptd, job scripts, e.g. sleep).
state_pids() {
    local s=$1 p name cmd roots=()
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = "$$" ] && continue
        name=$(comm_of "$p")
        case "$name" in
            munged|slurmctld|slurmd|slurmstepd) ;;
            *) continue ;;
        esac
        cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" || true)
        case "$cmd" in *"$s/"*) roots+=("$p") ;; esac
    done
    while read -r p; do roots+=("$p"); done < <(stepd_pids "$s")
    [ ${#roots[@]} -gt 0 ] || return 0
    with_descendants "${roots[@]}" | while read -r p; do if alive "$p"; then echo "$p"; fi; done | sort -un
}

# TERM the given "pid:name" daemons at once (only pids that are alive and carry that name),
# wait up to $1 s for all of them, then KILL what is left.
stop_daemons() {
    local wait_s=$1 item pid name i pids=()
    shift
    for item in "$@"; do
        pid=${item%%:*} name=${item#*:}
        alive "$pid" || continue
        if [ "$(comm_of "$pid")" != "$name" ]; then
            log "pid $pid is not $name, leaving it alone"
            continue
        fi
        kill -TERM "$pid" 2>/dev/null || true
        pids+=("$pid")
    done
    for ((i = 0; i < wait_s * 10; i++)); do
        any_alive "${pids[@]}" || return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if alive "$pid"; then
            log "$(comm_of "$pid") (pid $pid) did not stop in ${wait_s}s, sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    for ((i = 0; i < 50; i++)); do
        any_alive "${pids[@]}" || return 0
        sleep 0.1
    done
    log "WARNING: some daemons are still alive: ${pids[*]}"
}

any_alive() {
    local pid
    for pid in "$@"; do alive "$pid" && return 0; done
    return 1
}

read_pid() { if [ -r "$1" ]; then tr -dc '0-9' <"$1"; fi; }

# --- ports -------------------------------------------------------------------

port_free() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket,sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try: s.bind(("", int(sys.argv[1])))
except OSError: sys.exit(1)' "$1"
    else
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 1; fi
    fi
}

# Two free ports below the usual ephemeral range (32768+), so an outgoing connection cannot take them.
pick_ports() {
    local n=0 p tries=0 got=()
    while [ $n -lt 2 ]; do
        tries=$((tries + 1))
        [ $tries -lt 500 ] || die "no free TCP port found in 20000-32000"
        p=$((20000 + (RANDOM % 12000)))
        [ $n -eq 1 ] && [ "$p" = "${got[0]}" ] && continue
        if port_free "$p"; then got+=("$p"); n=$((n + 1)); fi
    done
    echo "${got[@]}"
}

# --- start / stop --------------------------------------------------------------

print_logs() {
    local s=$1 f
    for f in "$s"/log/munged.log "$s"/log/slurmctld.log "$s"/log/slurmd.log "$s"/log/*.out; do
        [ -s "$f" ] || continue
        echo "----- $f (last 40 lines) -----" >&2
        tail -n 40 "$f" >&2
    done
}

write_config() {
    local s=$1 host=$2 ctld_port=$3 d_port=$4 user
    user=$(id -un)
    cat >"$s/slurm.conf" <<EOF
# Generated by tests/slurm/cluster.sh - throw-away single-node test cluster.
ClusterName=wsptest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$s/munge/munge.socket,cred_expire=$CRED_EXPIRE
StateSaveLocation=$s/ctld
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/run/slurmctld.pid
SlurmdPidFile=$s/run/slurmd.pid
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$s/plugstack.conf
TmpFS=$s/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Schedule every second (defaults: main loop 60 s, backfill 30 s), so requeued tasks restart quickly.
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
JobRequeue=1
KillWait=$KILL_WAIT
MinJobAge=300
InactiveLimit=0
Waittime=0
MailProg=/bin/true
SlurmdParameters=config_overrides
NodeName=$host NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    # Keep Slurm away from /etc/slurm: both files are looked up next to slurm.conf.
    : >"$s/plugstack.conf"
    # slurmd 22.05 always loads a cgroup plugin at startup; "autodetect" picks cgroup/v2 on
    # unified hosts, whose init wants systemd/dbus or a writable cgroupfs. cgroup/v1's init()
    # touches nothing, and nothing else uses it (proctrack/linuxproc, task/none,
    # jobacct_gather/none), so it runs without cgroup delegation on v1 and v2 hosts alike.
    cat >"$s/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupAutomount=no
EOF
}

cmd_start() {
    [ $# -eq 1 ] || die "usage: $0 start STATE_DIR"
    require_tools
    local s host ctld_port d_port pid i sock
    s=$(abs_dir "$1")
    for pid in "$(read_pid "$s/run/munged.pid")" "$(read_pid "$s/run/slurmctld.pid")" \
               "$(read_pid "$s/run/slurmd.pid")"; do
        ! alive "$pid" || die "a daemon of $s is already running (pid $pid); run '$0 stop $s' first"
    done
    host=$(hostname -s 2>/dev/null || uname -n)
    host=${host%%.*}
    [ -n "$host" ] || die "cannot determine the short hostname"
    mkdir -p "$s"/{munge,ctld,spool,run,log,tmp}
    # munged wants its socket dir (and the dirs above) searchable by all, and key/log dirs
    # not writable by group/others.
    chmod 0755 "$s" "$s/munge"
    chmod 0700 "$s/ctld" "$s/spool" "$s/run" "$s/log"
    chmod 1777 "$s/tmp"
    sock=$s/munge/munge.socket
    [ ${#sock} -lt 100 ] || die "state dir path too long for a unix socket: $sock"

    # munge
    if [ ! -s "$s/munge/munge.key" ]; then
        ( umask 077; dd if=/dev/urandom of="$s/munge/munge.key" bs=1024 count=1 2>/dev/null )
    fi
    chmod 0400 "$s/munge/munge.key"
    local munge_args=(--key-file="$s/munge/munge.key" --socket="$sock" --pid-file="$s/run/munged.pid"
                      --log-file="$s/log/munged.log" --seed-file="$s/munge/munged.seed")
    if ! munged "${munge_args[@]}" </dev/null >>"$s/log/munged.out" 2>&1; then
        log "munged refused to start (see below); retrying with --force"
        tail -n 5 "$s/log/munged.out" >&2 || true
        munged --force "${munge_args[@]}" </dev/null >>"$s/log/munged.out" 2>&1 \
            || { print_logs "$s"; die "munged did not start"; }
    fi

    read -r ctld_port d_port <<<"$(pick_ports)"
    write_config "$s" "$host" "$ctld_port" "$d_port"
    export SLURM_CONF=$s/slurm.conf
    unset SLURM_CLUSTERS

    local deadline=$((SECONDS + START_TIMEOUT))
    fail() { log "$1"; print_logs "$s"; cmd_stop "$s" || true; exit 1; }

    slurmctld -f "$s/slurm.conf" </dev/null >>"$s/log/slurmctld.out" 2>&1 \
        || fail "slurmctld failed to start"
    until scontrol ping 2>/dev/null | grep -q 'is UP'; do
        [ $SECONDS -lt $deadline ] || fail "slurmctld not answering after ${START_TIMEOUT}s"
        sleep 0.5
    done
    slurmd -f "$s/slurm.conf" -N "$host" </dev/null >>"$s/log/slurmd.out" 2>&1 \
        || fail "slurmd failed to start"
    local st=""
    while :; do
        st=$(sinfo -h -n "$host" -o '%T' 2>/dev/null || true)
        [ "$st" = idle ] && break
        [ $SECONDS -lt $deadline ] || fail "node $host not idle after ${START_TIMEOUT}s (state: '$st')"
        sleep 0.5
    done
    for i in munged slurmctld slurmd; do
        alive "$(read_pid "$s/run/$i.pid")" || fail "$i is not running"
    done
    printf 'export SLURM_CONF=%q\n' "$s/slurm.conf" >"$s/env.sh"
    log "cluster wsptest up: node $host idle, slurmctld port $ctld_port, slurmd port $d_port, state $s"
    cat "$s/env.sh"
}

cmd_stop() {
    [ $# -eq 1 ] || die "usage: $0 stop STATE_DIR"
    local s pid i jobs left
    [ -d "$1" ] || return 0
    s=$(cd "$1" && pwd -P)
    export SLURM_CONF=$s/slurm.conf
    # End jobs through Slurm first (TERM, KillWait, KILL), so slurmstepd cleans up.
    if alive "$(read_pid "$s/run/slurmctld.pid")" && [ -r "$s/slurm.conf" ]; then
        jobs=$(squeue -h -o '%A' 2>/dev/null | sort -u | tr '\n' ' ' || true)
        if [ -n "${jobs// /}" ]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for ((i = 0; i < (KILL_WAIT + 5) * 10; i++)); do
                [ -z "$(stepd_pids "$s")" ] && break
                sleep 0.1
            done
        fi
    fi
    # Whatever is left of the jobs: kill the slurmstepd trees.
    left=$(stepd_pids "$s")
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086
        with_descendants $left | while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done
    fi
    # All three at once: each takes ~2 s to shut down, none needs the others for that.
    stop_daemons 15 "$(read_pid "$s/run/slurmd.pid"):slurmd" \
        "$(read_pid "$s/run/slurmctld.pid"):slurmctld" "$(read_pid "$s/run/munged.pid"):munged"
    # Safety net: anything still naming this state dir.
    left=$(state_pids "$s")
    if [ -n "$left" ]; then
        log "killing leftover processes: $(echo "$left" | tr '\n' ' ')"
        for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
        for ((i = 0; i < 50; i++)); do
            [ -z "$(state_pids "$s")" ] && break
            sleep 0.1
        done
    fi
    rm -f "$s"/run/*.pid
    return 0
}

# --- selftest ----------------------------------------------------------------

# Runs on any exit of the selftest (also set -e aborts): always stop the cluster.
selftest_exit() {
    local rc=$?
    "$ST_SELF" stop "$ST_DIR" || true
    if [ "$ST_DONE" != 1 ]; then
        echo "FAILED (selftest aborted, exit status $rc; state dir kept: $ST_DIR)"
    fi
}

cmd_selftest() {
    require_tools
    local s t0=$SECONDS ok=1 self env_line
    self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)/$(basename "${BASH_SOURCE[0]}")
    s=$(mktemp -d "${TMPDIR:-/tmp}/slurmtest.XXXXXX")
    ST_SELF=$self ST_DIR=$s ST_DONE=0
    trap selftest_exit EXIT
    check() { if eval "$2"; then echo "ok: $1"; else echo "NOT OK: $1"; ok=0; fi; }

    env_line=$("$self" start "$s") || { echo "cluster did not start"; exit 1; }
    eval "$env_line"
    echo "slurm: $(sinfo -V)  conf: $SLURM_CONF  ($((SECONDS - t0))s to start)"
    sinfo

    # (1) array job: 4 one-CPU tasks, each writes its array variables.
    mkdir -p "$s/out1"
    cat >"$s/array.sh" <<'EOF'
#!/bin/bash
echo "$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX" >"$1/task.$SLURM_ARRAY_TASK_ID"
env | grep '^SLURM_' | sort >"$1/env.$SLURM_ARRAY_TASK_ID"
EOF
    local t1=$SECONDS
    timeout 60 sbatch --wait --array=0-3 --cpus-per-task=1 -o "$s/out1/%A_%a.out" \
        "$s/array.sh" "$s/out1" || echo "sbatch --wait failed"
    echo "array job finished in $((SECONDS - t1))s"
    local i
    for i in 0 1 2 3; do
        check "array task $i wrote '$i 4 0 3'" "[ \"\$(cat '$s/out1/task.$i' 2>/dev/null)\" = '$i 4 0 3' ]"
    done
    echo "environment of array task 2:"
    grep -E '^SLURM_(ARRAY|JOB_ID|RESTART|CPUS|NTASKS|SUBMIT_DIR|CONF)' "$s/out1/env.2" | sed 's/^/    /' || true
    echo "    (SLURM_RESTART_COUNT: $(grep -c '^SLURM_RESTART_COUNT=' "$s/out1/env.2" || true) lines, i.e. unset before any requeue)"

    # (2) requeue a running array task: it must get SIGTERM, then SIGKILL after KillWait (its first
    # run ignores TERM and keeps a heartbeat), start again with SLURM_RESTART_COUNT=1, and finish.
    mkdir -p "$s/out2"
    cat >"$s/requeue.sh" <<'EOF'
#!/bin/bash
out=$1 id=$SLURM_ARRAY_TASK_ID rc=${SLURM_RESTART_COUNT:-0}
echo "start restart_count=${SLURM_RESTART_COUNT:-unset} $(date +%s.%N)" >>"$out/starts.$id"
env | grep '^SLURM_' | sort >"$out/env.$id.$rc"
trap 'echo "TERM restart_count=$rc $(date +%s.%N)" >>"$out/term.$id"; [ "$id.$rc" = 1.0 ] || exit 143' TERM
if [ "$id" = 0 ]; then sleep 6 & wait $!; exit 0; fi
if [ "$rc" = 0 ]; then
    (trap '' TERM; while :; do date +%s.%N >>"$out/heartbeat.$id"; sleep 0.2; done) &
    while :; do sleep 1 & wait $!; done
fi
echo "done restart_count=$rc" >>"$out/done.$id"
EOF
    local jid st0 st1 t2=$SECONDS treq tterm tlast grace
    jid=$(sbatch --parsable --array=0-1 --requeue --cpus-per-task=1 -o "$s/out2/%A_%a.out" \
        "$s/requeue.sh" "$s/out2")
    jid=${jid%%;*}
    echo "requeue job $jid submitted"
    for ((i = 0; i < 150; i++)); do
        st0=$(squeue -h -j "${jid}_0" -o %T 2>/dev/null || true)
        st1=$(squeue -h -j "${jid}_1" -o %T 2>/dev/null || true)
        [ "$st1" = RUNNING ] && [ -s "$s/out2/heartbeat.1" ] && [ "$st0" = RUNNING ] && break
        sleep 0.2
    done
    echo "task states before requeue: 0=$st0 1=$st1"
    check "both tasks running" "[ '$st0' = RUNNING ] && [ '$st1' = RUNNING ]"
    treq=$(date +%s.%N)
    scontrol requeue "${jid}_1" || echo "scontrol requeue failed"
    echo "scontrol requeue ${jid}_1 at $treq"
    for ((i = 0; i < 300; i++)); do
        [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] && break
        sleep 0.2
    done
    echo "requeue job done after $((SECONDS - t2))s"
    for f in "$s"/out2/starts.* "$s"/out2/term.* "$s"/out2/done.*; do
        [ -e "$f" ] && sed "s|^|    ${f##*/}: |" "$f"
    done
    if [ -e "$s/out2/heartbeat.1" ]; then echo "    heartbeat.1: $(head -n 1 "$s/out2/heartbeat.1") ... $(tail -n 1 "$s/out2/heartbeat.1")"; fi
    tterm=$(sed -n 's/^TERM restart_count=0 //p' "$s/out2/term.1" 2>/dev/null | head -n 1 || true)
    tlast=$(grep -E '^[0-9]+\.[0-9]+$' "$s/out2/heartbeat.1" 2>/dev/null | tail -n 1 || true)
    grace=$(awk -v a="${tterm:-0}" -v b="${tlast:-0}" 'BEGIN { printf "%.1f", b - a }')
    echo "task 1, first run: SIGTERM $(awk -v a="${tterm:-0}" -v r="$treq" 'BEGIN { printf "%.2f", a - r }')s after" \
         "the requeue, SIGKILL about ${grace}s after SIGTERM (KillWait=$KILL_WAIT)"
    check "task 1 started twice" "[ \$(wc -l <'$s/out2/starts.1') -eq 2 ]"
    check "task 0 started once" "[ \$(wc -l <'$s/out2/starts.0') -eq 1 ]"
    check "task 1 got SIGTERM on requeue" "[ -n '$tterm' ]"
    check "task 1 (ignoring TERM) got SIGKILL about KillWait later" \
        "awk -v g='$grace' -v k=$KILL_WAIT 'BEGIN { exit !(g >= k - 1 && g <= k + 3) }'"
    check "task 1 finished after restart (SLURM_RESTART_COUNT=1)" \
        "grep -q 'done restart_count=1' '$s/out2/done.1' 2>/dev/null"
    check "task 0 not signalled" "[ ! -e '$s/out2/term.0' ]"
    echo "restarted task 1 sees: $(grep -E '^SLURM_(RESTART_COUNT|ARRAY_TASK_ID|JOB_ID)=' "$s/out2/env.1.1" 2>/dev/null | tr '\n' ' ')"
    scontrol show job "${jid}_1" 2>/dev/null | grep -oE '(JobState|Restarts|ExitCode)=[^ ]*' | tr '\n' ' ' || true
    echo

    # (3) stop and make sure nothing of this state dir is left.
    local t3=$SECONDS left
    "$self" stop "$s"
    echo "stop took $((SECONDS - t3))s"
    # (pgrep also lists zombies that a lazy init has not reaped yet; those are gone already)
    left=$(for p in $(pgrep -f -- "$s/" || true); do alive "$p" && ps -o pid=,args= -p "$p"; done || true)
    check "no process of $s left (pgrep -f)" "[ -z \"\$left\" ]"
    [ -z "$left" ] || echo "$left"
    check "no slurmstepd of $s left" "[ -z \"\$(stepd_pids '$s')\" ]"

    trap - EXIT
    ST_DONE=1
    echo "total $((SECONDS - t0))s"
    if [ $ok = 1 ]; then
        rm -rf "$s"
        echo PASS
    else
        echo "FAILED (state dir kept: $s)"
        return 1
    fi
}

case "${1:-}" in
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    selftest) shift; cmd_selftest "$@" ;;
    *) echo "usage: $0 start STATE_DIR | stop STATE_DIR | selftest" >&2; exit 2 ;;
esac
