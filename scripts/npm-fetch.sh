# Sourced by scripts/fetch-whisper.sh and scripts/fetch-peers.sh: downloads an npm package tarball
# and checks it against the registry's sha512 integrity (what `npm view PKG@VERSION dist.integrity`
# prints). Messages go to stderr prefixed with $npm_fetch_tag (the caller's name).
#   source scripts/npm-fetch.sh
#   npm_fetch whisper.rn 0.4.3 sha512-... /tmp/x/whisper.rn-0.4.3.tgz "${TGZ:-}" || fail "..."
# Needs tar, sha512sum and base64, and npm or curl unless a tarball is given.
# shellcheck shell=bash

npm_fetch_tag=${npm_fetch_tag:-npm-fetch}

# npm_integrity FILE: npm's integrity string of FILE, "sha512-" and the base64 of the binary digest
# (hex to bytes through printf's \x escapes)
npm_integrity() {
    local hex escaped="" i
    hex=$(sha512sum "$1" | cut -d' ' -f1)
    for ((i = 0; i < ${#hex}; i += 2)); do
        escaped+="\\x${hex:i:2}"
    done
    echo "sha512-$(printf '%b' "$escaped" | base64 -w0)"
}

# npm_fetch NAME VERSION INTEGRITY OUT [TGZ]: writes the tarball of NAME@VERSION to OUT, taken from
# TGZ when that is set (a tarball already downloaded), else by npm pack, else by curl from the
# registry; fails (status 1, a message on stderr) when it cannot or when the integrity differs
npm_fetch() {
    local name=$1 version=$2 integrity=$3 out=$4 tgz=${5:-}
    local tarball=$name-$version.tgz tmp got
    local url=https://registry.npmjs.org/$name/-/$tarball
    tmp=$(mktemp -d) || return 1
    if [ -n "$tgz" ]; then
        if [ ! -f "$tgz" ]; then
            echo "$npm_fetch_tag: $tgz is not a file" >&2
            rm -rf "$tmp"
            return 1
        fi
        cp "$tgz" "$tmp/$tarball"
    elif command -v npm >/dev/null && npm pack "$name@$version" --pack-destination "$tmp" --loglevel=error \
        >"$tmp/npm.log" 2>&1 && [ -f "$tmp/$tarball" ]; then
        echo "$npm_fetch_tag: downloaded $tarball with npm pack" >&2
    else
        if command -v npm >/dev/null; then
            echo "$npm_fetch_tag: npm pack $name@$version failed:" >&2
            tail -n 5 "$tmp/npm.log" >&2
        fi
        if ! command -v curl >/dev/null; then
            echo "$npm_fetch_tag: could not download $name $version: needs npm or curl (or a tarball)" >&2
            rm -rf "$tmp"
            return 1
        fi
        echo "$npm_fetch_tag: downloading $url with curl" >&2
        if ! curl -fsSL --retry 3 -o "$tmp/$tarball" "$url"; then
            echo "$npm_fetch_tag: could not download $url" >&2
            rm -rf "$tmp"
            return 1
        fi
    fi
    got=$(npm_integrity "$tmp/$tarball")
    if [ "$got" != "$integrity" ]; then
        echo "$npm_fetch_tag: $tarball has integrity $got, expected $integrity: refusing it" >&2
        rm -rf "$tmp"
        return 1
    fi
    mv "$tmp/$tarball" "$out"
    rm -rf "$tmp"
}
