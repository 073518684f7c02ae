#!/usr/bin/env bash
# Downloads one of whisper.cpp's published ggml whisper models by name and verifies it:
#   scripts/download-model.sh NAME [DIR]     (DIR: models by default)
#   scripts/download-model.sh --list         the names it knows
# The file goes to DIR/ggml-NAME.bin. It is fetched into DIR/ggml-NAME.bin.part (an interrupted
# download resumes from there), checked against the SHA-1 pinned below (whisper.cpp's
# models/README.md publishes these), and only then renamed; a file whose SHA-1 differs (corrupted,
# truncated, another file under that name) is refused and removed, and the script exits 1.
# A model already in DIR is checked and kept. Exit status: 0 done, 1 failed, 64 wrong arguments.
# Settings (the tests use them to serve a model from 127.0.0.1):
#   WSP_MODEL_URL    where the files are (default: whisper.cpp's Hugging Face repository)
#   WSP_MODEL_SHA1S  a file of "SHA1 NAME" lines used instead of the table below
set -uo pipefail

url=${WSP_MODEL_URL:-https://huggingface.co/ggerganov/whisper.cpp/resolve/main}

# name and SHA-1 of every model whisper.cpp's models/README.md gives a checksum for
pinned() {
    cat <<'EOF'
bd577a113a864445d4c299885e0cb97d4ba92b5f tiny
c78c86eb1a8faa21b369bcd33207cc90d64ae9df tiny.en
465707469ff3a37a2b9b8d8f89f2f99de7299dac base
137c40403d78fd54d454da0f9bd998f78703390c base.en
55356645c2b361a969dfd0ef2c5a50d530afd8d5 small
db8a495a91d927739e50b3fc1cc4c6b8f6c2d022 small.en
b6c6e7e89af1a35c08e6de56b66ca6a02a2fdfa1 small.en-tdrz
fd9727b6e1217c2f614f9b698455c4ffd82463b4 medium
8c30f0e44ce9560643ebd10bbe50cd20eafd3723 medium.en
b1caaf735c4cc1429223d5a74f0f4d0b9b59a299 large-v1
0f4c8e34f21cf1a914c59d8b3ce882345ad349d6 large-v2
00e39f2196344e901b3a2bd5814807a769bd1630 large-v2-q5_0
ad82bf6a9043ceed055076d0fd39f5f186ff8062 large-v3
e6e2ed78495d403bef4b7cff42ef4aaadcfea8de large-v3-q5_0
4af2b29d7ec73d781377bfd1758ca957a807e941 large-v3-turbo
e050f7970618a659205450ad97eb95a18d69c9ee large-v3-turbo-q5_0
EOF
}
table() {
    if [ -n "${WSP_MODEL_SHA1S:-}" ]; then cat "$WSP_MODEL_SHA1S"; else pinned; fi
}
names() { table | awk '{ print $2 }' | paste -sd ' ' -; }

usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
}
die() { # status, message
    echo "download-model: $2" >&2
    exit "$1"
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    --list) table | awk '{ print $2 }'; exit 0 ;;
    "" | -*) usage >&2; exit 64 ;;
esac
[ $# -le 2 ] || die 64 "too many arguments: NAME [DIR]"
name=$1
dir=${2:-models}

want=$(table | awk -v n="$name" '$2 == n { print $1 }')
[ -n "$want" ] || die 64 "no model named '$name': one of $(names)"
command -v sha1sum >/dev/null || die 1 "sha1sum is missing (coreutils)"

file=$dir/ggml-$name.bin
part=$file.part
sha1_of() { sha1sum "$1" | awk '{ print $1 }'; }

mkdir -p "$dir" || die 1 "cannot make the folder $dir"
if [ -e "$file" ]; then
    have=$(sha1_of "$file")
    [ "$have" = "$want" ] || die 1 "$file is already there but its SHA-1 is $have, not $name's $want: move it away and run again"
    echo "download-model: $file is already there and verified (SHA-1 $want)"
    exit 0
fi

# the tinydiarize models live in their author's repository (as whisper.cpp's own script fetches them)
if [ -z "${WSP_MODEL_URL:-}" ] && [[ $name == *tdrz* ]]; then
    url=https://huggingface.co/akashmjn/tinydiarize-whisper.cpp/resolve/main
fi
from=$url/ggml-$name.bin
if [ -s "$part" ] && [ "$(sha1_of "$part")" = "$want" ]; then # a download stopped before the rename
    mv "$part" "$file" || die 1 "cannot rename $part to $file"
    echo "download-model: $file ($(stat -c %s "$file") bytes, SHA-1 $want)"
    exit 0
elif [ -s "$part" ]; then
    echo "download-model: resuming $name from byte $(stat -c %s "$part") of $part"
else
    echo "download-model: downloading $name from $from"
fi
# -C - resumes where the .part file ends; a server that cannot send a range fails the fetch (the
# part is kept) rather than appending the whole file to it
if command -v curl >/dev/null; then
    progress=(-sS) # a bar on a terminal, else only errors
    [ -t 2 ] && progress=(--progress-bar)
    curl -fL "${progress[@]}" --retry 3 --retry-delay 1 -C - -o "$part" "$from"
elif command -v wget >/dev/null; then
    wget -q --tries=3 -c -O "$part" "$from"
else
    die 1 "neither curl nor wget is on the PATH"
fi
rc=$?
[ $rc -eq 0 ] || die 1 "the download of $from failed (status $rc); $part is kept, run again to resume"

have=$(sha1_of "$part")
if [ "$have" != "$want" ]; then
    bytes=$(stat -c %s "$part")
    rm -f "$part"
    die 1 "refused $name: its SHA-1 is $have, not $want ($bytes bytes: corrupted or truncated); removed"
fi
mv "$part" "$file" || die 1 "cannot rename $part to $file"
echo "download-model: $file ($(stat -c %s "$file") bytes, SHA-1 $want)"
