#!/bin/sh
# tests/cli/json.sh KEYS COMMAND...: runs COMMAND; passes when it exits 0 and its stdout is one
# line holding one JSON object with each of the comma-separated top-level KEYS. python3's json
# module parses it where python3 is; elsewhere the line must be {...} and name each key.
keys=$1
shift
out=$("$@") || { echo "FAILED: exit status $?: $*"; exit 1; }
echo "$out"
if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then
    echo "FAILED: not one line"
    exit 1
fi
if command -v python3 >/dev/null 2>&1; then
    printf '%s' "$out" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
assert isinstance(d, dict), "not an object"
missing = [k for k in sys.argv[1].split(",") if k and k not in d]
assert not missing, "missing keys: %s" % missing
print("valid JSON (python3)")
' "$keys" || { echo "FAILED: not the JSON object expected"; exit 1; }
    exit 0
fi
case $out in
    "{"*"}") ;;
    *) echo "FAILED: not a JSON object"; exit 1 ;;
esac
for k in $(echo "$keys" | tr ',' ' '); do
    case $out in
        *"\"$k\":"*) ;;
        *) echo "FAILED: no key $k"; exit 1 ;;
    esac
done
echo "a JSON object with the keys (no python3 to parse it)"
