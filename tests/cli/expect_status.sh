#!/bin/sh
# tests/cli/expect_status.sh STATUS PATTERN [STREAM] -- COMMAND...: runs COMMAND; passes when it
# exits with STATUS and its output matches the extended regular expression PATTERN. STREAM:
# stdout, stderr or both (the default): where PATTERN must be found.
status=$1
pattern=$2
stream=both
shift 2
if [ "$1" != "--" ]; then
    stream=$1
    shift
fi
[ "$1" = "--" ] && shift
out_file=$(mktemp)
err_file=$(mktemp)
trap 'rm -f "$out_file" "$err_file"' EXIT
"$@" >"$out_file" 2>"$err_file"
rc=$?
echo "--- stdout"
cat "$out_file"
echo "--- stderr"
cat "$err_file"
echo "--- exit status $rc"
if [ "$rc" -ne "$status" ]; then
    echo "FAILED: exit status $rc, expected $status"
    exit 1
fi
case "$stream" in
    stdout) where=$out_file ;;
    stderr) where=$err_file ;;
    *) where="$out_file $err_file" ;;
esac
# shellcheck disable=SC2086 # $where is one or two file names
cat $where | grep -Eq -- "$pattern" || { echo "FAILED: no match for $pattern in $stream"; exit 1; }
