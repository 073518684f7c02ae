#!/usr/bin/env bash
# Fetches whisper.rn's own binding, the C++ the React Native package wraps around whisper.cpp, for
# the WhisperBinding.Build test (tests/binding): downloads the npm package whisper.rn 0.4.3 (npm
# pack, else curl from the registry), checks it against the registry's sha512 integrity pinned
# below, and extracts only cpp/rn-whisper.cpp, cpp/rn-whisper.h, cpp/rn-whisper-log.h,
# cpp/rn-audioutils.cpp, cpp/rn-audioutils.h and the LICENSE into .third_party/whisper.rn-0.4.3-binding/
# (git ignores it), each checked against its pinned sha256. Does nothing when that folder is already
# there and verified. whisper.cpp itself comes from scripts/fetch-whisper.sh.
# Environment: WHISPER_RN_BINDING_DIR (the destination), WHISPER_RN_TGZ (a tarball already downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."
npm_fetch_tag=fetch-binding
# shellcheck source=scripts/npm-fetch.sh
source scripts/npm-fetch.sh

version=0.4.3
tarball=whisper.rn-$version.tgz
# `npm view whisper.rn@0.4.3 dist.integrity`
integrity=sha512-isvW9AAtY73l7yvH5u9MzR8J1T4O1J8XXjbYZwiEjQaisoWW25gkiDgYeSK69NmY/RUuPNC+G8iJB76oKCQk5w==
dest=${WHISPER_RN_BINDING_DIR:-.third_party/whisper.rn-$version-binding}
# the files taken, by their path in the package, with their sha256 (computed once from the tarball)
files=(
    "package/cpp/rn-whisper.cpp 8ddc79c88c7d4843aa98d272efdfbcfaf92aa5e7226ab6ee225f2782afdaeb10"
    "package/cpp/rn-whisper.h 1a80b1276d4fb8edba40e07ea2d31f033de9e98280ea5a049caa6ab615b42b5d"
    "package/cpp/rn-whisper-log.h 66d78b67891e1f391d4e4147df857bbc50efad189179a2030258eecd0542a3c4"
    "package/cpp/rn-audioutils.cpp 3db4529847ac47b38c95d0e9281a4f0b10cdda2cd343d161ab5cef3ca17bea78"
    "package/cpp/rn-audioutils.h 2ffb8ee3df09a90b5401599d2e5c4ef5ca00f6c35d426c368f63f8a8a740ad2d"
    "package/LICENSE b22eff2c123a71b45b110a2933dd8a4360e119d38dbb8fd2dcf3a85627712883"
)

fail() {
    echo "fetch-binding: $*" >&2
    exit 1
}
for tool in tar gzip sha256sum sha512sum base64; do
    command -v "$tool" >/dev/null || fail "needs $tool"
done

# verified DIR: every file of the list is in DIR (by its base name) with its pinned sha256
verified() {
    local entry path sum
    for entry in "${files[@]}"; do
        read -r path sum <<<"$entry"
        [ -f "$1/$(basename "$path")" ] || return 1
        echo "$sum  $1/$(basename "$path")" | sha256sum --check --status || return 1
    done
}

if verified "$dest"; then
    echo "fetch-binding: $dest is there and verified"
    exit 0
fi
[ -e "$dest" ] && fail "$dest exists but does not hold the verified binding files of whisper.rn $version: remove it and run again"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${WHISPER_RN_TGZ:-}" ] && [ ! -f "$WHISPER_RN_TGZ" ]; then
    fail "WHISPER_RN_TGZ=$WHISPER_RN_TGZ is not a file"
fi
npm_fetch whisper.rn "$version" "$integrity" "$work/$tarball" "${WHISPER_RN_TGZ:-}" ||
    fail "could not get a verified $tarball (npm or curl, or WHISPER_RN_TGZ=<tarball>)"

paths=()
for entry in "${files[@]}"; do
    read -r path _ <<<"$entry"
    paths+=("$path")
done
tar -xzf "$work/$tarball" -C "$work" "${paths[@]}" || fail "$tarball lacks one of: ${paths[*]}"
mkdir -p "$work/out"
for path in "${paths[@]}"; do
    mv "$work/$path" "$work/out/"
done
verified "$work/out" || fail "the files extracted from $tarball do not match their pinned sha256"

mkdir -p "$(dirname "$dest")"
mv "$work/out" "$dest"
echo "fetch-binding: whisper.rn $version's binding (rn-whisper.*, rn-whisper-log.h, rn-audioutils.*, LICENSE) in $dest"
