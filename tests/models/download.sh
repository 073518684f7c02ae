#!/usr/bin/env bash
# tests/models/download.sh CLI WORK: scripts/download-model.sh against a server on 127.0.0.1
# (range_server.py) serving a model that `CLI write-model` writes, its SHA-1 pinned through
# WSP_MODEL_SHA1S: the download verifies and lands under its name; a corrupted copy and a truncated
# one are refused and leave no file; a download stopped half-way resumes from its .part with a
# range request; an unknown name is a usage error naming the known ones. Exits 77 (skip) without
# python3 or curl.
set -uo pipefail
cli=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
download=$here/../../scripts/download-model.sh

command -v python3 >/dev/null || { echo "SKIP: python3 (the test's HTTP server) is missing"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is missing"; exit 77; }

fail() {
    echo "FAILED: $*"
    exit 1
}

rm -rf "$work"
mkdir -p "$work/served" "$work/models"
"$cli" write-model --out "$work/served/ggml-tiny-test.bin" --state 64 --heads 2 --layers 1 --audio-ctx 64 \
    >/dev/null || fail "write-model"
model=$work/served/ggml-tiny-test.bin
size=$(stat -c %s "$model")
sha=$(sha1sum "$model" | awk '{ print $1 }')
# the corrupted copy: one byte in the middle changed; the truncated one: the first half
cp "$model" "$work/served/ggml-corrupt.bin"
printf '\x5a' | dd of="$work/served/ggml-corrupt.bin" bs=1 seek=$((size / 2)) conv=notrunc status=none
head -c $((size / 2)) "$model" >"$work/served/ggml-truncated.bin"
{
    echo "$sha tiny-test"
    echo "$sha corrupt"
    echo "$sha truncated"
} >"$work/sha1s"

python3 "$here/range_server.py" "$work/served" "$work/port" "$work/requests.log" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do
    [ -s "$work/port" ] && break
    sleep 0.05
done
[ -s "$work/port" ] || fail "the server did not start"
export WSP_MODEL_URL=http://127.0.0.1:$(cat "$work/port")
export WSP_MODEL_SHA1S=$work/sha1s

run() { # expected status, pattern, arguments...
    local want=$1 pattern=$2
    shift 2
    "$download" "$@" >"$work/out" 2>&1
    local rc=$?
    echo "--- download-model.sh $* (exit $rc)"
    cat "$work/out"
    [ $rc -eq "$want" ] || fail "exit status $rc, expected $want"
    grep -Eq -- "$pattern" "$work/out" || fail "no match for '$pattern'"
}

# a whole download: verified, renamed, nothing else left
run 0 "ggml-tiny-test.bin \\($size bytes, SHA-1 $sha\\)" tiny-test "$work/models"
cmp "$model" "$work/models/ggml-tiny-test.bin" || fail "the downloaded file differs from the served one"
[ ! -e "$work/models/ggml-tiny-test.bin.part" ] || fail "a .part file was left"
# run again: the file is there and verified, nothing fetched
requests=$(wc -l <"$work/requests.log")
run 0 "already there and verified" tiny-test "$work/models"
[ "$(wc -l <"$work/requests.log")" -eq "$requests" ] || fail "a verified model was fetched again"

# a corrupted and a truncated copy: refused, removed
run 1 "refused corrupt: its SHA-1 is [0-9a-f]{40}, not $sha \\($size bytes" corrupt "$work/models"
run 1 "refused truncated: its SHA-1 is [0-9a-f]{40}, not $sha \\($((size / 2)) bytes" truncated "$work/models"
for n in corrupt truncated; do
    [ ! -e "$work/models/ggml-$n.bin" ] && [ ! -e "$work/models/ggml-$n.bin.part" ] ||
        fail "the refused $n download left a file"
done

# resume: the first third already in the .part file; the rest is fetched with a range request
mkdir -p "$work/resume"
third=$((size / 3))
head -c $third "$model" >"$work/resume/ggml-tiny-test.bin.part"
run 0 "resuming tiny-test from byte $third" tiny-test "$work/resume"
cmp "$model" "$work/resume/ggml-tiny-test.bin" || fail "the resumed file differs from the served one"
tail -n 1 "$work/requests.log" | grep -q "bytes=$third-" || fail "the resume did not ask for bytes $third-"

# a file already there that is not the model: refused, kept
echo "not a model" >"$work/resume/ggml-corrupt.bin"
run 1 "already there but its SHA-1 is" corrupt "$work/resume"
[ -s "$work/resume/ggml-corrupt.bin" ] || fail "the file already there was removed"

# usage errors
run 64 "no model named 'nope': one of tiny-test corrupt truncated" nope "$work/models"
unset WSP_MODEL_SHA1S
run 64 "no model named 'nope': one of tiny .* large-v3-turbo-q5_0" nope
run 0 "^large-v3-turbo$" --list
echo "PASSED"
