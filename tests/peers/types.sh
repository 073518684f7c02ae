#!/usr/bin/env bash
# tests/peers/types.sh OURS WORK: every super-block type's dequantizer and quantizers against the
# client's ggml, bit for bit: tests/peers/type_dump built against ours (OURS) and against the ggml of
# whisper.rn 0.4.3 ("shipped", the client) and 0.7.3 ("upstream") in build/peers-VERSION
# (bench/peers; built here where the peer was fetched by scripts/fetch-peers.sh and its build folder
# is missing the program). Every file a peer writes (a type it dequantizes, quantizes by reference or
# through quantize_chunk) must come out the same bytes from ours. Exits 77 (skip) when no peer was
# fetched.
set -uo pipefail
ours=$1
work=$2
src_dir=$(cd "$(dirname "$0")/../.." && pwd)

rm -rf "$work"
mkdir -p "$work/ours"
"$ours" "$work/ours" || { echo "FAILED: our type_dump"; exit 1; }
compared=0
for entry in "shipped 0.4.3" "upstream 0.7.3"; do
    read -r name version <<<"$entry"
    peer=$src_dir/.third_party/peers/whisper.rn-$version
    pbuild=$src_dir/build/peers-$version
    [ -f "$peer/ggml.c" ] || { echo "no $peer (scripts/fetch-peers.sh): $name left out"; continue; }
    if [ ! -x "$pbuild/type_dump" ]; then
        { [ -f "$pbuild/CMakeCache.txt" ] ||
            cmake -S "$src_dir/bench/peers" -B "$pbuild" -G Ninja -DPEER_DIR="$peer"; } >"$work/$name-build.log" 2>&1 &&
            cmake --build "$pbuild" --parallel 2 --target type_dump >>"$work/$name-build.log" 2>&1 ||
            { cat "$work/$name-build.log"; echo "FAILED: building the $name peer's type_dump"; exit 1; }
    fi
    mkdir -p "$work/$name"
    "$pbuild/type_dump" "$work/$name" >"$work/$name.out" || { echo "FAILED: the $name peer's type_dump"; exit 1; }
    sed "s/^/$name: /" "$work/$name.out"
    for f in "$work/$name"/*; do
        t=$(basename "$f")
        [ -f "$work/ours/$t" ] || { echo "FAILED: $t: the $name peer writes it, ours does not"; exit 1; }
        cmp "$f" "$work/ours/$t" || { echo "FAILED: $t differs from the $name peer's"; exit 1; }
        echo "ok: $t ($(stat -c %s "$f") bytes) bit for bit as the $name peer's"
        compared=$((compared + 1))
    done
done
[ $compared -gt 0 ] || { echo "SKIP: no peer fetched (scripts/fetch-peers.sh)"; exit 77; }
echo "PASSED: $compared file(s) compared"
