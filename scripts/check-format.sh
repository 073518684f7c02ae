#!/usr/bin/env bash
# Fails when a source file differs from what clang-format (.clang-format at the root) makes of it.
# Public headers in include/ are excluded by include/.clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
CF=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format)}
mapfile -t files < <(git ls-files -- 'src/*.cpp' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'tests/*.cpp' 'tests/*.h' \
    'bench/*.cpp' 'bench/*.h' 'examples/*.cpp' 'tools/*.cpp' 'tools/*.h' 'tools/*.cu')
[ ${#files[@]} -eq 0 ] && exit 0
"$CF" --dry-run --Werror "${files[@]}"
echo "format: ${#files[@]} files ok"
