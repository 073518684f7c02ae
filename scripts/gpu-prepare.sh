#!/usr/bin/env bash
# Run here, before a GPU check: copies the sources of GoogleTest (from Debian's googletest
# package), Google Benchmark (Debian's source package) and CLI11's headers (libcli11-dev) into
# .third_party/, which git ignores and the device tool carries, because the GPU machine has no
# network and no such libraries. The project's CMake uses them from there when find_package
# finds none.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .third_party
if [ ! -d .third_party/googletest ]; then
    [ -d /usr/src/googletest ] || { echo "install googletest (apt-get install googletest)"; exit 1; }
    cp -r /usr/src/googletest .third_party/googletest
fi
if [ ! -d .third_party/CLI11 ]; then
    [ -f /usr/include/CLI/CLI.hpp ] || { echo "install CLI11 (apt-get install libcli11-dev)"; exit 1; }
    mkdir -p .third_party/CLI11
    cp -r /usr/include/CLI .third_party/CLI11/CLI
fi
if [ ! -d .third_party/benchmark ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "deb-src http://deb.debian.org/debian bookworm main" > "$tmp/src.list"
    mkdir -p "$tmp/lists/partial"
    opts=(-o Dir::Etc::SourceList="$tmp/src.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$tmp/lists")
    apt-get "${opts[@]}" update -qq
    (cd "$tmp" && apt-get "${opts[@]}" source --download-only -qq benchmark)
    mkdir -p .third_party/benchmark
    tar -xzf "$tmp"/benchmark_*.orig.tar.gz -C .third_party/benchmark --strip-components=1
fi
du -sh .third_party/*
