#!/bin/sh
# tests/cli/expect_error.sh PATTERN COMMAND...: runs COMMAND; passes when it exits non-zero and its
# output (stdout and stderr) matches the extended regular expression PATTERN.
pattern=$1
shift
out=$("$@" 2>&1)
rc=$?
echo "$out"
echo "exit status $rc"
if [ "$rc" -eq 0 ]; then
    echo "FAILED: the command succeeded"
    exit 1
fi
printf '%s\n' "$out" | grep -Eq -- "$pattern" || { echo "FAILED: no match for $pattern"; exit 1; }
