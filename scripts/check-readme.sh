#!/usr/bin/env bash
# Runs README's command blocks as they are written, each marked in README by a line
# "<!-- readme-check: NAME -->" before its ```sh fence:
#   scripts/check-readme.sh [install] [main-job] [quick-start]     (default: all three, in order)
# install: the install line; main-job: build and run the main job; quick-start: download a model,
# build whisper.cpp against the library, transcribe a spoken clip. This machine cannot reach
# Hugging Face, so for quick-start a model written by `wsp-ggml-cli write-model` (tiny dimensions,
# English-only vocab, random weights) is served from 127.0.0.1 under the name the block asks for,
# with its SHA-1 pinned through download-model.sh's WSP_MODEL_URL and WSP_MODEL_SHA1S; the check
# is then that the clip is transcribed ("ok":true), not what the text says. .ci/run runs this in
# its clean clone; the files the blocks make (models/, clip.wav, build/) are git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."

block() { # name: the commands of README's block
    awk -v m="<!-- readme-check: $1 -->" '
        $0 == m { found = 1; next }
        found == 1 && /^```sh$/ { found = 2; next }
        found == 2 && /^```$/ { exit }
        found == 2 { print }' README.md
}

run_block() { # name
    local commands
    commands=$(block "$1")
    [ -n "$commands" ] || { echo "check-readme: README has no block marked '$1'" >&2; exit 1; }
    echo "check-readme: $1:"
    sed 's/^/    /' <<<"$commands"
    bash -euo pipefail -c "$commands"
}

quick_start() {
    local cli=build/release/tools/wsp-ggml-cli
    [ -x "$cli" ] || { echo "check-readme: quick-start needs the main job built first ($cli)" >&2; exit 1; }
    local name served
    name=$(block quick-start | sed -n 's/^scripts\/download-model.sh \([^ ]*\).*/\1/p')
    [ -n "$name" ] || { echo "check-readme: the quick start downloads no model" >&2; exit 1; }
    served=$(mktemp -d)
    "$cli" write-model --out "$served/ggml-$name.bin" --size tiny --vocab 51864 --audio-ctx 200 >/dev/null
    echo "$(sha1sum "$served/ggml-$name.bin" | awk '{ print $1 }') $name" >"$served/sha1s"
    python3 tests/models/range_server.py "$served" "$served/port" "$served/requests.log" &
    local server=$!
    # shellcheck disable=SC2064 # the values are known now
    trap "kill $server 2>/dev/null; rm -rf '$served'" EXIT
    for _ in $(seq 100); do
        [ -s "$served/port" ] && break
        sleep 0.05
    done
    export WSP_MODEL_URL=http://127.0.0.1:$(cat "$served/port") WSP_MODEL_SHA1S=$served/sha1s
    rm -f "models/ggml-$name.bin" clip.wav
    run_block quick-start | tee "$served/out"
    grep -q '"ok":true' "$served/out" || { echo "check-readme: the quick start transcribed nothing" >&2; exit 1; }
    rm -f "models/ggml-$name.bin" clip.wav
    echo "check-readme: quick-start transcribed the clip with the served model"
}

blocks=("$@")
[ ${#blocks[@]} -gt 0 ] || blocks=(install main-job quick-start)
for b in "${blocks[@]}"; do
    case "$b" in
        install | main-job) run_block "$b" ;;
        quick-start) quick_start ;;
        *)
            echo "check-readme: unknown block '$b' (install, main-job, quick-start)" >&2
            exit 64
            ;;
    esac
done
