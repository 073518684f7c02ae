#!/usr/bin/env bash
# Fetches the peers of the side-by-side benches (bench/whisper_side.sh, bench/mul_mat_side.sh): the
# ggml and whisper.cpp sources that the npm packages whisper.rn 0.4.3 ("shipped") and 0.7.3
# ("upstream") carry in package/cpp/. Downloads each package (npm pack, else curl from the
# registry), checks it against the registry's sha512 integrity pinned below, and extracts its cpp/
# folder without coreml/, jsi/ and the Metal files into .third_party/peers/whisper.rn-VERSION/ (git
# ignores it), with the package's LICENSE. A folder already there with its stamp is left alone.
#   scripts/fetch-peers.sh
# Environment: WHISPER_RN_043_TGZ, WHISPER_RN_073_TGZ (tarballs already downloaded), PEERS_DIR
# (the destination of the folders, default .third_party/peers).
set -euo pipefail
cd "$(dirname "$0")/.."
npm_fetch_tag=fetch-peers
# shellcheck source=scripts/npm-fetch.sh
source scripts/npm-fetch.sh

peers_dir=${PEERS_DIR:-.third_party/peers}
# version, `npm view whisper.rn@VERSION dist.integrity`, the environment variable of a local tarball
peers=(
    "0.4.3 sha512-isvW9AAtY73l7yvH5u9MzR8J1T4O1J8XXjbYZwiEjQaisoWW25gkiDgYeSK69NmY/RUuPNC+G8iJB76oKCQk5w== WHISPER_RN_043_TGZ"
    "0.7.3 sha512-4N1KeXkdlkReX0UB4dFdORe0MRDBPYriUHWBgZnpuxE98lRnyCbqtcP21nwjytQbDzNCMjYFS+m1QxrsCDB9UQ== WHISPER_RN_073_TGZ"
)
# the stamp written last into each folder: the integrity of the tarball it came from
stamp=.npm-integrity

fail() {
    echo "fetch-peers: $*" >&2
    exit 1
}
for tool in tar gzip sha512sum base64; do
    command -v "$tool" >/dev/null || fail "needs $tool"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for entry in "${peers[@]}"; do
    read -r version integrity env_name <<<"$entry"
    dest=$peers_dir/whisper.rn-$version
    if [ "$(cat "$dest/$stamp" 2>/dev/null)" = "$integrity" ]; then
        echo "fetch-peers: $dest is there"
        continue
    fi
    [ -e "$dest" ] && fail "$dest exists but lacks the stamp of whisper.rn $version: remove it and run again"

    tarball=$work/whisper.rn-$version.tgz
    npm_fetch whisper.rn "$version" "$integrity" "$tarball" "${!env_name:-}" ||
        fail "could not get a verified whisper.rn $version (npm or curl, or $env_name=<tarball>)"
    out=$work/$version
    mkdir -p "$out"
    # the CPU build's sources only: no CoreML, no JSI binding, no Metal (sources, headers, libraries)
    tar -xzf "$tarball" -C "$out" --exclude='package/cpp/coreml' --exclude='package/cpp/jsi' \
        --exclude='package/cpp/*metal*' package/cpp package/LICENSE || fail "$tarball lacks package/cpp"
    if [ ! -f "$out/package/cpp/ggml.c" ] || [ ! -f "$out/package/cpp/whisper.cpp" ]; then
        fail "$tarball has no cpp/ggml.c or cpp/whisper.cpp"
    fi
    mv "$out/package/LICENSE" "$out/package/cpp/LICENSE"
    echo "$integrity" >"$out/package/cpp/$stamp"
    mkdir -p "$peers_dir"
    mv "$out/package/cpp" "$dest"
    echo "fetch-peers: whisper.rn $version cpp/ ($(find "$dest" -type f | wc -l) files) in $dest"
done
