#!/usr/bin/env bash
# Fetches the real client, whisper.cpp as the npm package whisper.rn 0.4.3 ships it, for
# examples/whisper: downloads the package (npm pack, else curl from the registry), checks it against
# the registry's sha512 integrity pinned below, and extracts only cpp/whisper.cpp, cpp/whisper.h,
# cpp/whisper-arch.h and the LICENSE into .third_party/whisper.rn-0.4.3/ (git ignores it), each
# checked against its pinned sha256. Does nothing when that folder is already there and verified.
#   scripts/fetch-whisper.sh [binding]
# binding: whisper.rn's own binding instead, the C++ the React Native package wraps around
# whisper.cpp (cpp/rn-whisper.*, rn-whisper-log.h, rn-audioutils.*), into
# .third_party/whisper.rn-0.4.3-binding/ for the WhisperBinding.Build test (tests/binding).
# Environment: WHISPER_RN_DIR / WHISPER_RN_BINDING_DIR (the destinations), WHISPER_RN_TGZ (a
# tarball already downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."
set_name=${1:-client}
npm_fetch_tag=fetch-whisper
# shellcheck source=scripts/npm-fetch.sh
source scripts/npm-fetch.sh

version=0.4.3
tarball=whisper.rn-$version.tgz
# `npm view whisper.rn@0.4.3 dist.integrity`
integrity=sha512-isvW9AAtY73l7yvH5u9MzR8J1T4O1J8XXjbYZwiEjQaisoWW25gkiDgYeSK69NmY/RUuPNC+G8iJB76oKCQk5w==
# the files taken, by their path in the package, with their sha256 (computed once from the tarball)
case $set_name in
    client)
        dest=${WHISPER_RN_DIR:-.third_party/whisper.rn-$version}
        files=(
            "package/cpp/whisper.cpp 2f24c5a3bd311e2c8210a691dba55f1364ad0d07216aa3efd271306c76e235b7"
            "package/cpp/whisper.h 903a08646c13e1c727af3c142a89739adfa375e704275ae5f8aba3b57486c855"
            "package/cpp/whisper-arch.h f6e50f1df3975b0e17b77b19cdf32b2ca3bb5ff44703daa1f2d1463511509c49"
        )
        ;;
    binding)
        dest=${WHISPER_RN_BINDING_DIR:-.third_party/whisper.rn-$version-binding}
        files=(
            "package/cpp/rn-whisper.cpp 8ddc79c88c7d4843aa98d272efdfbcfaf92aa5e7226ab6ee225f2782afdaeb10"
            "package/cpp/rn-whisper.h 1a80b1276d4fb8edba40e07ea2d31f033de9e98280ea5a049caa6ab615b42b5d"
            "package/cpp/rn-whisper-log.h 66d78b67891e1f391d4e4147df857bbc50efad189179a2030258eecd0542a3c4"
            "package/cpp/rn-audioutils.cpp 3db4529847ac47b38c95d0e9281a4f0b10cdda2cd343d161ab5cef3ca17bea78"
            "package/cpp/rn-audioutils.h 2ffb8ee3df09a90b5401599d2e5c4ef5ca00f6c35d426c368f63f8a8a740ad2d"
        )
        ;;
    *)
        echo "fetch-whisper: unknown set '$set_name' (client or binding)" >&2
        exit 2
        ;;
esac
files+=("package/LICENSE b22eff2c123a71b45b110a2933dd8a4360e119d38dbb8fd2dcf3a85627712883")

fail() {
    echo "fetch-whisper: $*" >&2
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
    echo "fetch-whisper: $dest is there and verified"
    exit 0
fi
[ -e "$dest" ] && fail "$dest exists but does not hold the verified files of whisper.rn $version: remove it and run again"

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
echo "fetch-whisper: whisper.rn $version's $set_name files (${paths[*]#package/}) in $dest"
