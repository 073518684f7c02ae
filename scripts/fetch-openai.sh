#!/usr/bin/env bash
# Fetches OpenAI's official Node.js client (the npm package openai 5.23.2, which has no
# dependencies) for the server test (tests/whisper/openai_client.mjs): downloads the package (npm
# pack, else curl from the registry), checks it against the registry's sha512 integrity pinned
# below and extracts it into .third_party/openai-node/node_modules/openai (git ignores it). Does
# nothing when that is there already.
#   scripts/fetch-openai.sh
# Environment: OPENAI_NODE_TGZ (a tarball already downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."
npm_fetch_tag=fetch-openai
# shellcheck source=scripts/npm-fetch.sh
source scripts/npm-fetch.sh

version=5.23.2
# `npm view openai@5.23.2 dist.integrity`
integrity=sha512-MQBzmTulj+MM5O8SKEk/gL8a7s5mktS9zUtAkU257WjvobGc9nKcBuVwjyEEcb9SI8a8Y2G/mzn3vm9n1Jlleg==
dest=.third_party/openai-node/node_modules/openai
stamp=$dest/.wsp-integrity

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$integrity" ]; then
    echo "fetch-openai: $dest is there (openai $version)"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
npm_fetch openai "$version" "$integrity" "$work/openai-$version.tgz" "${OPENAI_NODE_TGZ:-}" || {
    echo "fetch-openai: could not get a verified openai-$version.tgz (npm or curl, or OPENAI_NODE_TGZ=<tarball>)" >&2
    exit 1
}
tar -xzf "$work/openai-$version.tgz" -C "$work"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$work/package" "$dest"
echo "$integrity" >"$stamp"
echo "fetch-openai: openai $version in $dest"
