#!/usr/bin/env bash
# The real client in CTest: whisper.cpp as whisper.rn 0.4.3 ships it, built against our installed
# package, run by whisper_check (examples/whisper) on the CPU and on the device configuration.
#   run.sh build BUILD_DIR WORK WHISPER_DIR   the WhisperClient.Build fixture: installs BUILD_DIR into
#                                             WORK/prefix, builds examples/whisper against it (with
#                                             the sources of WHISPER_DIR), writes the models, speaks the clip
#   run.sh check WORK WHISPER_DIR ARGS...     one configuration: whisper_check on them with ARGS; in ARGS,
#                                             --model-file NAME takes WORK/NAME instead of the 6-head
#                                             model-tiny-f16.bin (model-tiny-h8-f16.bin: 8 heads), and
#                                             --reference-file NAME passes WORK/NAME as --reference-model
#   run.sh peer WORK WHISPER_DIR NAME...      whisper_tokens on each model WORK/NAME built against ours and
#                                             against the client's ggml (whisper.rn 0.4.3, bench/peers):
#                                             the same greedy tokens
#   run.sh transcribe-checks WORK WHISPER_DIR  whisper_transcribe's checks of options and inputs
#   run.sh transcribe WORK WHISPER_DIR ARGS... one batch through whisper_transcribe with ARGS (a
#                                             placement): three spoken clips and a file that is no WAV
#   run.sh transcribe-shards WORK WHISPER_DIR  shards (Kubernetes' and Slurm's variables), merge, and
#                                             --resume after SIGTERM, each file done once
#   run.sh transcribe-slurm WORK WHISPER_DIR   a Slurm job array on a cluster of this machine alone
#                                             (tests/slurm/cluster.sh), a task cancelled and requeued
#   run.sh server WORK WHISPER_DIR             wsp-whisper-server with curl: every response format as
#                                             the batch transcriber writes it, bad input, 413, 401,
#                                             429, 504, SIGTERM with a request in flight
#   run.sh transcribe-audio WORK WHISPER_DIR   the audio formats FFmpeg decodes, against the ffmpeg
#                                             tool's decoding (skipped without it: apt-get install ffmpeg)
# Exits 77 (the tests' SKIP_RETURN_CODE) with the reason when the sources were not fetched
# (scripts/fetch-whisper.sh) or espeak-ng is missing.
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/../.." && pwd)

skip() {
    echo "SKIP: $*"
    exit 77
}
# show a step's log when it fails
step() { # log, command...
    local log=$1
    shift
    if ! "$@" >"$log" 2>&1; then
        cat "$log"
        echo "FAILED: $*"
        exit 1
    fi
}
need_sources() {
    [ -f "$1/whisper.cpp" ] || skip "whisper.cpp sources not fetched into $1: run scripts/fetch-whisper.sh"
}

build() {
    local build_dir=$1 work=$2 whisper_dir=$3
    need_sources "$whisper_dir"
    command -v espeak-ng >/dev/null || skip "espeak-ng not installed (apt-get install espeak-ng): it speaks the clip"
    mkdir -p "$work"
    local t0=$SECONDS
    # a fresh prefix, so that no header left over from an earlier install can serve
    rm -rf "$work/prefix"
    step "$work/install.log" cmake --install "$build_dir" --prefix "$work/prefix"
    # a sanitizer build's libraries need the client built with the same runtime
    local flags ldflags
    flags=$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$build_dir/CMakeCache.txt")
    ldflags=$(sed -n 's/^CMAKE_EXE_LINKER_FLAGS:STRING=//p' "$build_dir/CMakeCache.txt")
    step "$work/configure.log" cmake -S "$src_dir/examples/whisper" -B "$work/build" -G Ninja \
        -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release -DWHISPER_SOURCE_DIR="$whisper_dir" \
        -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags"
    step "$work/build.log" cmake --build "$work/build"
    echo "installed, configured and built examples/whisper in $((SECONDS - t0)) s"

    # the ggml headers whisper.cpp was compiled with, from the compiler's own dependency list:
    # every one must be ours, from the prefix
    local object headers
    object=$(cd "$work/build" && ninja -t targets all | sed -n 's/^\([^:]*whisper\.cpp\.o\):.*/\1/p')
    headers=$(cd "$work/build" && ninja -t deps "$object" | sed -n 's/^ *\(.*\/\(ggml[^/]*\|gguf\)\.h\)$/\1/p')
    echo "ggml headers whisper.cpp included:"
    while read -r header; do
        echo "    $header"
    done <<<"$headers"
    if ! grep -q "^$work/prefix/include/wsp-ggml/ggml.h$" <<<"$headers" ||
        grep -v "^$work/prefix/include/wsp-ggml/" <<<"$headers"; then
        echo "FAILED: whisper.cpp was not compiled against the installed wsp-ggml headers alone"
        exit 1
    fi

    # tiny dimensions, 200 encoder positions (4 s of audio, padded to 256 for flash attention)
    step "$work/model.log" "$work/prefix/bin/wsp-ggml-cli" write-model --out "$work/model-tiny-f16.bin" \
        --size tiny --type f16 --seed 1 --audio-ctx 200
    # the same with 8 heads (of 48), which 3 devices do not divide: heads split across devices
    step "$work/model-h8.log" "$work/prefix/bin/wsp-ggml-cli" write-model --out "$work/model-tiny-h8-f16.bin" \
        --size tiny --type f16 --seed 1 --audio-ctx 200 --heads 8
    # the same weights through a Hugging Face checkpoint and `convert` (issue 35): the same bytes
    step "$work/hf.log" "$work/prefix/bin/wsp-ggml-cli" write-model --format hf --out "$work/hf-tiny" \
        --size tiny --type f32 --seed 1 --audio-ctx 200
    step "$work/convert.log" "$work/prefix/bin/wsp-ggml-cli" convert "$work/hf-tiny" \
        --out "$work/model-tiny-converted-f16.bin" --type f16
    cmp "$work/model-tiny-f16.bin" "$work/model-tiny-converted-f16.bin" ||
        { echo "FAILED: the converted checkpoint differs from write-model's file"; exit 1; }
    rm -rf "$work/hf-tiny"
    # Q8_0 weights, for the column split in whole blocks
    step "$work/model-q8.log" "$work/prefix/bin/wsp-ggml-cli" write-model --out "$work/model-tiny-q8_0.bin" \
        --size tiny --type q8_0 --seed 1 --audio-ctx 200
    # the K-quants need rows in whole blocks of 256: a state of 256 (4 heads), each type and the same
    # weights in f32 as the reference their logits are held to
    for type in f32 q2_K q3_K q4_K q5_K q6_K; do
        step "$work/model-$type.log" "$work/prefix/bin/wsp-ggml-cli" write-model --out "$work/model-s256-$type.bin" \
            --size tiny --state 256 --heads 4 --type "$type" --seed 1 --audio-ctx 200
    done
    step "$work/espeak.log" espeak-ng -w "$work/clip.wav" "The quick brown fox jumps over the lazy dog."
    # the batch: three clips and one unreadable file
    rm -rf "$work/batch"
    mkdir -p "$work/batch"
    cp "$work/clip.wav" "$work/batch/a.wav"
    step "$work/espeak.log" espeak-ng -w "$work/batch/b.wav" "Every GPU of the server is used."
    step "$work/espeak.log" espeak-ng -w "$work/batch/c.wav" "Batch transcription runs through the night."
    echo "this is not audio" >"$work/batch/d.wav"
    echo "model and clip written; fixture ready in $((SECONDS - t0)) s"
}

check() {
    local work=$1 whisper_dir=$2
    shift 2
    need_sources "$whisper_dir"
    [ -x "$work/build/whisper_check" ] || { echo "FAILED: $work/build/whisper_check missing (WhisperClient.Build)"; exit 1; }
    local model=model-tiny-f16.bin args=()
    while [ $# -gt 0 ]; do
        if [ "$1" = --model-file ] && [ $# -ge 2 ]; then
            model=$2
            shift 2
        elif [ "$1" = --reference-file ] && [ $# -ge 2 ]; then
            args+=(--reference-model "$work/$2")
            shift 2
        else
            args+=("$1")
            shift
        fi
    done
    [ -f "$work/$model" ] || { echo "FAILED: $work/$model missing (WhisperClient.Build writes it)"; exit 1; }
    local t0=$SECONDS rc=0
    "$work/build/whisper_check" --model "$work/$model" --wav "$work/clip.wav" "${args[@]}" || rc=$?
    echo "whisper_check --model $model ${args[*]}: $((SECONDS - t0)) s"
    exit $rc
}

# whisper_tokens of ours and of the client's ggml (built here into build/peers-0.4.3 where missing,
# as tests/peers/types.sh does) on each model: the same greedy tokens
peer() {
    local work=$1 whisper_dir=$2
    shift 2
    need_sources "$whisper_dir"
    local peer_dir=$src_dir/.third_party/peers/whisper.rn-0.4.3 pbuild=$src_dir/build/peers-0.4.3
    [ -f "$peer_dir/ggml.c" ] || skip "the client's ggml not fetched into $peer_dir: run scripts/fetch-peers.sh"
    [ -x "$work/build/whisper_tokens" ] || { echo "FAILED: $work/build/whisper_tokens missing (WhisperClient.Build)"; exit 1; }
    if [ ! -x "$pbuild/whisper_tokens" ]; then
        { [ -f "$pbuild/CMakeCache.txt" ] ||
            cmake -S "$src_dir/bench/peers" -B "$pbuild" -G Ninja -DPEER_DIR="$peer_dir"; } >"$work/peer-build.log" 2>&1 &&
            cmake --build "$pbuild" --parallel 2 --target whisper_tokens >>"$work/peer-build.log" 2>&1 ||
            { cat "$work/peer-build.log"; echo "FAILED: building the client's whisper_tokens"; exit 1; }
    fi
    local name ours theirs
    for name in "$@"; do
        ours=$("$work/build/whisper_tokens" "$work/$name" "$work/clip.wav") || { echo "FAILED: ours on $name"; exit 1; }
        theirs=$("$pbuild/whisper_tokens" "$work/$name" "$work/clip.wav") || { echo "FAILED: the client's on $name"; exit 1; }
        echo "$name: ours    $ours"
        echo "$name: client  $theirs"
        [ "$ours" = "$theirs" ] || { echo "FAILED: $name: the greedy tokens differ from the client's"; exit 1; }
    done
    echo "PASSED: $# model(s), the client's greedy tokens"
}

# the tokens of one file's JSON line
tokens_of() { # jsonl, file name
    grep -F "\"file\":\"$2\"" "$1" | grep -o '"tokens":\[[^]]*\]' || true
}

# the transcriber's tests: its sources and binary there (else skipped); sets out, a temporary
# folder removed at exit
transcribe_setup() {
    local work=$1 whisper_dir=$2
    need_sources "$whisper_dir"
    [ -x "$work/build/whisper_transcribe" ] ||
        skip "whisper_transcribe was not built (it needs CLI11 and FFmpeg: scripts/install-deps.sh)"
    out=$(mktemp -d)
    # shellcheck disable=SC2064 # the folder is named now: the variable is gone by exit
    trap "rm -rf '$out'" EXIT
}

transcribe() {
    local work=$1 whisper_dir=$2
    shift 2
    local out
    transcribe_setup "$work" "$whisper_dir"
    local common=(--model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback)
    local rc=0
    "$work/build/whisper_transcribe" "${common[@]}" --cpu "$work/batch" >"$out/cpu.jsonl" 2>"$out/cpu.log" || rc=$?
    [ $rc -eq 1 ] || { cat "$out/cpu.log"; echo "FAILED: the CPU run exited $rc, not 1 (one unreadable file)"; exit 1; }
    rc=0
    "$work/build/whisper_transcribe" "${common[@]}" "$@" "$work/batch" >"$out/dev.jsonl" 2>"$out/dev.log" || rc=$?
    cat "$out/dev.jsonl" "$out/dev.log"
    [ $rc -eq 1 ] || { echo "FAILED: exit status $rc, not 1 (one unreadable file)"; exit 1; }
    [ "$(grep -c '"ok":true' "$out/dev.jsonl")" -eq 3 ] || { echo "FAILED: not 3 files transcribed"; exit 1; }
    grep '"ok":false' "$out/dev.jsonl" | grep -q 'd.wav' || { echo "FAILED: d.wav not reported"; exit 1; }
    local f
    for f in a b c; do
        local want got
        want=$(tokens_of "$out/cpu.jsonl" "$work/batch/$f.wav")
        got=$(tokens_of "$out/dev.jsonl" "$work/batch/$f.wav")
        if [ -z "$want" ] || [ "$want" != "$got" ]; then
            echo "FAILED: $f.wav: tokens $got, the CPU's $want"
            exit 1
        fi
    done
    echo "PASS: 3 files with the CPU's tokens, the unreadable one reported and skipped"
}

# what a user of one machine meets (issue 34, item 2): bad options refused before any file, with
# one message each; folders searched with their subfolders, other files named as skipped; a WAV
# with no samples reported, not transcribed as silence; one GPU device taken by default
transcribe_checks() {
    local work=$1 whisper_dir=$2
    local out
    transcribe_setup "$work" "$whisper_dir"
    local tool="$work/build/whisper_transcribe"
    local common=(--model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback --cpu)
    expect_refused() { # WHAT PATTERN ARGS...: exit 2, nothing on stdout, PATTERN on stderr
        local what=$1 pattern=$2 rc=0
        shift 2
        "$tool" "$@" >"$out/refused.jsonl" 2>"$out/refused.log" || rc=$?
        [ $rc -eq 2 ] || { cat "$out/refused.log"; echo "FAILED: $what: exit $rc, not 2"; exit 1; }
        [ ! -s "$out/refused.jsonl" ] || { echo "FAILED: $what: a file was worked on"; exit 1; }
        grep -q -- "$pattern" "$out/refused.log" || { cat "$out/refused.log"; echo "FAILED: $what: no '$pattern'"; exit 1; }
    }
    expect_refused "a missing model" "cannot read the model $out/none.bin" \
        --model "$out/none.bin" --cpu "$work/batch"
    expect_refused "an unknown language" "--language xx is not a language whisper knows (one of auto, en," \
        "${common[@]}" --language xx "$work/batch"
    touch "$out/file"
    expect_refused "an unwritable --srt folder" "cannot write into the --srt folder $out/file/srt" \
        "${common[@]}" --srt "$out/file/srt" "$work/batch"
    mkdir -p "$out/in/sub/deeper"
    cp "$work/batch/a.wav" "$out/in/sub/deeper/a.wav"
    echo "notes" >"$out/in/sub/notes.txt"
    head -c 44 "$work/batch/a.wav" >"$out/in/empty.wav" # the header alone
    local rc=0
    "$tool" "${common[@]}" --srt "$out/srt" "$out/in" >"$out/tree.jsonl" 2>"$out/tree.log" || rc=$?
    cat "$out/tree.jsonl" "$out/tree.log"
    [ $rc -eq 1 ] || { echo "FAILED: exit $rc, not 1 (the empty WAV)"; exit 1; }
    grep '"ok":true' "$out/tree.jsonl" | grep -q "sub/deeper/a.wav" || { echo "FAILED: sub/deeper/a.wav not found"; exit 1; }
    grep '"ok":false' "$out/tree.jsonl" | grep -q "no audio samples" || { echo "FAILED: the empty WAV not reported"; exit 1; }
    grep -q "skipped $out/in/sub/notes.txt: its name does not match --glob \*.wav,\*.mp3," "$out/tree.log" ||
        { echo "FAILED: notes.txt not named"; exit 1; }
    # --glob, and paths on standard input
    cp "$work/batch/a.wav" "$out/in/sub/A.Speech"
    rc=0
    echo "$work/batch/b.wav" | "$tool" "${common[@]}" --glob '*.speech' "$out/in" - >"$out/glob.jsonl" 2>"$out/glob.log" || rc=$?
    cat "$out/glob.jsonl" "$out/glob.log"
    [ $rc -eq 0 ] || { echo "FAILED: --glob: exit $rc"; exit 1; }
    [ "$(grep -c '"ok":true' "$out/glob.jsonl")" -eq 2 ] && grep -q "A.Speech" "$out/glob.jsonl" &&
        grep -q "batch/b.wav" "$out/glob.jsonl" || { echo "FAILED: --glob *.speech and stdin: not A.Speech and b.wav"; exit 1; }
    # every cue ends at or after its start
    awk -F' --> ' '/-->/ { if ($2 < $1) { print "FAILED: a cue runs backwards: " $0; bad = 1 } } END { exit bad }' \
        "$out/srt/a.srt" || exit 1
    # the progress bar and the JSON lines on one terminal (stdout and stderr one file): each JSON
    # line starts a line of its own once the bar's line is cleared (what a terminal shows)
    "$tool" "${common[@]}" --progress "$work/batch" >"$out/both.txt" 2>&1 || true
    [ "$(grep -c '"file":' "$out/both.txt")" -eq 4 ] || { cat "$out/both.txt"; echo "FAILED: not 4 JSON lines"; exit 1; }
    if sed 's/.*\x1b\[K//' "$out/both.txt" | grep '"file":' | grep -v '^{"file":'; then
        echo "FAILED: a JSON line shares its line with the progress bar"
        exit 1
    fi
    # --output-format and --output-dir (Note [output formats]): each format by its rules, inputs of
    # one name in two folders kept apart, nothing left under a temporary name; workers too
    expect_refused "an unknown output format" "'xx' is not an output format (txt, vtt, srt, tsv, json, all)" \
        "${common[@]}" --output-dir "$out/o" --output-format txt,xx "$work/batch"
    mkdir -p "$out/two/x" "$out/two/y"
    cp "$work/batch/a.wav" "$out/two/x/same.wav"
    cp "$work/batch/b.wav" "$out/two/y/same.wav"
    local placement
    for placement in --cpu --per-device; do
        rm -rf "$out/o"
        rc=0
        WSP_GGML_SIM_DEVICES=2 "$tool" --model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback \
            "$placement" --output-dir "$out/o" "$out/two" >"$out/o.jsonl" 2>"$out/o.log" || rc=$?
        [ $rc -eq 0 ] || { cat "$out/o.log"; echo "FAILED: $placement --output-dir: exit $rc"; exit 1; }
        local base="$out/o/${out#/}/two" f
        for f in x/same y/same; do
            for ext in txt vtt srt tsv json; do
                [ -s "$base/$f.$ext" ] || { find "$out/o"; echo "FAILED: $placement: no $base/$f.$ext"; exit 1; }
            done
        done
        ! find "$out/o" -name '*.tmp-*' | grep -q . || { echo "FAILED: a temporary file was left"; exit 1; }
        [ "$(head -1 "$base/x/same.vtt")" = "WEBVTT" ] || { echo "FAILED: vtt header"; exit 1; }
        grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} --> [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}$' "$base/x/same.vtt" ||
            { echo "FAILED: vtt times"; exit 1; }
        grep -Eq '^[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} --> [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}$' "$base/x/same.srt" ||
            { echo "FAILED: srt times"; exit 1; }
        [ "$(head -1 "$base/x/same.tsv")" = "$(printf 'start\tend\ttext')" ] || { echo "FAILED: tsv header"; exit 1; }
        python3 - "$base/x/same.json" "$base/y/same.json" "$base/x/same.txt" <<'PY' || { echo "FAILED: json"; exit 1; }
import json, sys
x, y = (json.load(open(p)) for p in sys.argv[1:3])
assert x["file"].endswith("two/x/same.wav") and y["file"].endswith("two/y/same.wav"), (x["file"], y["file"])
assert x["language"] == "en" and x["segments"], x
last = 0.0
for s in x["segments"] + y["segments"]:
    assert s["start"] <= s["end"] and s["tokens"], s
    for t in s["tokens"]:
        assert isinstance(t["id"], int) and 0.0 <= t["p"] <= 1.0, t
txt = open(sys.argv[3]).read().splitlines()
assert txt == [s["text"] for s in x["segments"]], (txt, x["segments"])
PY
    done
    # Note [stopping]: SIGTERM in the middle of a long list stops the run with the summary and 143,
    # in this process (--cpu) and with worker processes (--per-device over 2 sims), none left behind
    ln -s "$work/model-tiny-f16.bin" "$out/stop-model.bin" # names this test's workers for pgrep
    for _ in $(seq 200); do echo "$work/batch/a.wav"; done >"$out/long.list"
    local pid
    for placement in --cpu --per-device; do
        rc=0
        WSP_GGML_SIM_DEVICES=2 "$tool" --model "$out/stop-model.bin" --threads 1 --max-tokens 10 --no-fallback \
            "$placement" --list "$out/long.list" >"$out/stop.jsonl" 2>"$out/stop.log" &
        pid=$!
        sleep 2
        kill -TERM "$pid"
        wait "$pid" || rc=$?
        cat "$out/stop.log"
        [ $rc -eq 143 ] || { echo "FAILED: $placement: exit $rc after SIGTERM, not 143"; exit 1; }
        grep -q "^summary: " "$out/stop.log" || { echo "FAILED: $placement: no summary"; exit 1; }
        grep -q "stopped by SIGTERM: [0-9]* of 200 files not started" "$out/stop.log" ||
            { echo "FAILED: $placement: the stop is not said"; exit 1; }
        [ "$(wc -l <"$out/stop.jsonl")" -lt 200 ] || { echo "FAILED: $placement: every file ran"; exit 1; }
        sleep 0.5
        if pgrep -f "$out/stop-model.bin" >/dev/null; then
            pgrep -a -f "$out/stop-model.bin"
            echo "FAILED: $placement: a worker process was left behind"
            exit 1
        fi
    done
    # decoding options (item 3): bad values named with the valid ones; each option changes the
    # tokens of greedy decoding, and worker processes decode with the options given to the parent
    expect_refused "too many beams" "9 is not a whole number from 1 to 8" "${common[@]}" --beam-size 9 "$work/batch"
    expect_refused "a temperature over 1" "2 is not a temperature from 0 to 1" "${common[@]}" --temperature 2 "$work/batch"
    local greedy option got per args
    greedy=$("$tool" "${common[@]}" "$work/batch/a.wav" | grep -o '"tokens":\[[^]]*\]')
    for option in beam prompt temperature; do
        case $option in
            beam) args=(--beam-size 3) ;;
            prompt) args=(--prompt "Every GPU is used.") ;;
            temperature) args=(--temperature 0.5 --best-of 2) ;;
        esac
        got=$("$tool" "${common[@]}" "${args[@]}" "$work/batch/a.wav" | grep -o '"tokens":\[[^]]*\]')
        echo "${args[*]}: $got, greedy $greedy"
        if [ -z "$got" ] || [ "$got" = "$greedy" ]; then
            echo "FAILED: ${args[*]}: the greedy tokens"
            exit 1
        fi
        [ $option != temperature ] || continue # sampling: the sims' logits need not be the CPU's to the bit
        per=$(WSP_GGML_SIM_DEVICES=2 "$tool" --model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback \
            --per-device "${args[@]}" "$work/batch/a.wav" | grep -o '"tokens":\[[^]]*\]')
        [ "$per" = "$got" ] || { echo "FAILED: ${args[*]}: --per-device's workers gave $per"; exit 1; }
    done
    # one GPU device: taken by default
    rc=0
    WSP_GGML_SIM_DEVICES=1 "$tool" --model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback \
        "$work/batch/a.wav" >"$out/one.jsonl" 2>"$out/one.log" || rc=$?
    cat "$out/one.jsonl" "$out/one.log"
    [ $rc -eq 0 ] || { echo "FAILED: one GPU: exit $rc"; exit 1; }
    grep -q '"device":"SIM0"' "$out/one.jsonl" || { echo "FAILED: the one GPU device was not used"; exit 1; }
    echo "PASS: bad options refused before any file, subfolders searched, the empty WAV reported, SIGTERM stops"
    echo "      the run with its summary and no worker left, one GPU taken"
}

# the audio people have (issue 34, item 1; Note [audio decoding] in examples/whisper/audio.cpp):
# the clip in every format, decoded by whisper_audio as the transcriber hears it, sample for sample
# the ffmpeg tool's own decoding to 16 kHz mono; the lossy ones aligned with the WAV (codec delay
# dropped); damaged files refused with FFmpeg's reason; then one batch of all of them
transcribe_audio() {
    local work=$1 whisper_dir=$2
    local out
    transcribe_setup "$work" "$whisper_dir"
    command -v ffmpeg >/dev/null || skip "the ffmpeg tool is not installed (apt-get install ffmpeg): it encodes the test files"
    local audio="$work/build/whisper_audio" a="$out/audio"
    mkdir -p "$a/video"
    ff() { step "$out/ffmpeg.log" ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }
    local clip="$work/clip.wav" # espeak-ng's: 22050 Hz, mono, 16-bit
    cp "$clip" "$a/clip.wav"
    ff -i "$clip" -c:a flac "$a/clip.flac"
    ff -i "$clip" -c:a pcm_f32le "$a/float.wav"
    ff -i "$clip" -ac 2 -ar 44100 -c:a pcm_s24le "$a/stereo-44k-s24.wav"
    ff -i "$clip" -c:a libmp3lame -b:a 128k "$a/clip.mp3"
    ff -i "$clip" -c:a libvorbis -q:a 5 "$a/clip.ogg"
    ff -i "$clip" -ac 2 -c:a libopus -b:a 64k "$a/clip.opus" # 48 kHz, stereo
    ff -i "$clip" -c:a aac -b:a 128k "$a/clip.m4a"
    # a video: the audio is the second stream
    ff -f lavfi -i testsrc=size=64x48:rate=5 -i "$clip" -shortest -c:v libx264 -c:a aac "$a/video/clip.mp4"
    # over 30 s: whisper.cpp's windows, the file whole
    ff -stream_loop 14 -i "$clip" -c:a flac "$a/long.flac"
    # ten minutes of 48 kHz stereo: 220 MiB as floats, were it held whole
    ff -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=600" -ac 2 -c:a libopus -b:a 16k "$out/ten-minutes.opus"
    local compare="$src_dir/tests/whisper/compare_pcm.py"
    local f
    for f in clip.wav clip.flac float.wav stereo-44k-s24.wav clip.mp3 clip.ogg clip.opus clip.m4a video/clip.mp4; do
        "$audio" "$a/$f" >"$out/ours.f32" || { echo "FAILED: whisper_audio $f"; exit 1; }
        if [ "$(ffprobe -v error -select_streams a -show_entries stream=channels -of csv=p=0 "$a/$f")" = 2 ]; then
            # the same average of the channels as ours (the tool's own downmix weighs them otherwise)
            ff -i "$a/$f" -af "pan=mono|c0=0.5*c0+0.5*c1,aresample=16000" -f f32le "$out/ffmpeg.f32"
        else
            ff -i "$a/$f" -ac 1 -ar 16000 -f f32le "$out/ffmpeg.f32"
        fi
        "$compare" "$out/ours.f32" "$out/ffmpeg.f32" 60 || { echo "FAILED: $f: not the ffmpeg tool's samples"; exit 1; }
        cp "$out/ours.f32" "$out/$(basename "$f").f32"
    done
    # lossless: the WAV's samples; lossy: aligned with them (10-26 dB here; a codec's delay left in, or
    # one sample off, gives 0 dB or less)
    "$compare" "$out/clip.flac.f32" "$out/clip.wav.f32" 200 || { echo "FAILED: FLAC is not the WAV"; exit 1; }
    "$compare" "$out/float.wav.f32" "$out/clip.wav.f32" 200 || { echo "FAILED: float WAV is not the WAV"; exit 1; }
    for f in clip.mp3 clip.ogg clip.opus clip.m4a clip.mp4; do
        "$compare" "$out/$f.f32" "$out/clip.wav.f32" 6 || { echo "FAILED: $f is not aligned with the WAV"; exit 1; }
    done
    # memory: the output (37 MiB) and the libraries, not the file's own samples
    local info
    info=$("$audio" --info "$out/ten-minutes.opus") || { echo "FAILED: ten minutes"; exit 1; }
    echo "$info"
    python3 -c 'import json, sys; i = json.loads(sys.argv[1]); sys.exit(not (i["samples"] == 9600000 and i["peak_rss_mib"] < 110))' "$info" ||
        { echo "FAILED: ten minutes: not 9600000 samples in under 110 MiB (half the source's floats)"; exit 1; }
    # damaged files: refused with the reason
    echo "this is not audio" >"$a/text.wav"
    : >"$a/empty.mp3"
    head -c 30000 "$clip" >"$a/cut.wav"
    head -c 3000 "$a/clip.mp3" >"$a/cut.mp3"
    head -c 20000 "$a/clip.m4a" >"$a/cut.m4a"
    expect_audio_error() { # FILE PATTERN
        local rc=0
        "$audio" --info "$1" >/dev/null 2>"$out/error.log" || rc=$?
        if [ $rc -ne 1 ] || ! grep -q -- "$2" "$out/error.log"; then
            cat "$out/error.log"
            echo "FAILED: $1: exit $rc, no '$2'"
            exit 1
        fi
        cat "$out/error.log"
    }
    expect_audio_error "$a/text.wav" "Invalid data found when processing input"
    expect_audio_error "$a/empty.mp3" "Invalid data found\\|Failed to read frame size" # FFmpeg 5.1 says the latter
    expect_audio_error "$a/cut.wav" "truncated or damaged: FFmpeg found a corrupt packet at 0.6"
    expect_audio_error "$a/cut.mp3" "truncated: 0.1[0-9] s of audio where the file declares 2.8"
    expect_audio_error "$a/cut.m4a" "moov atom not found"
    expect_audio_error "$a/missing.flac" "No such file or directory"
    # the batch: the folder by the default --glob, every format transcribed, the damaged ones
    # reported with their reasons and the run going on; every format gives the WAV's tokens (the
    # test model's logits are not speech's, so this holds for the lossy ones only by their margin)
    echo "notes" >"$a/notes.txt"
    local rc=0
    "$work/build/whisper_transcribe" --model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback \
        --cpu --output-dir "$out/o" --output-format tsv "$a" >"$out/batch.jsonl" 2>"$out/batch.log" || rc=$?
    cat "$out/batch.jsonl" "$out/batch.log"
    [ $rc -eq 1 ] || { echo "FAILED: exit $rc, not 1 (the damaged files)"; exit 1; }
    [ "$(grep -c '"ok":true' "$out/batch.jsonl")" -eq 10 ] || { echo "FAILED: not 10 files transcribed"; exit 1; }
    [ "$(grep -c '"ok":false' "$out/batch.jsonl")" -eq 5 ] || { echo "FAILED: not 5 files refused"; exit 1; }
    grep -q "skipped $a/notes.txt" "$out/batch.log" || { echo "FAILED: notes.txt not named"; exit 1; }
    grep -q "cut.wav: truncated or damaged" "$out/batch.log" || { echo "FAILED: cut.wav's reason"; exit 1; }
    local want
    want=$(tokens_of "$out/batch.jsonl" "$a/clip.wav")
    for f in clip.flac float.wav stereo-44k-s24.wav clip.mp3 clip.ogg clip.opus clip.m4a video/clip.mp4; do
        if [ -z "$want" ] || [ "$(tokens_of "$out/batch.jsonl" "$a/$f")" != "$want" ]; then
            echo "FAILED: $f: not the WAV's tokens"
            exit 1
        fi
    done
    grep -F "\"file\":\"$a/long.flac\"" "$out/batch.jsonl" | grep -q '"ok":true.*"audio_s":41.77' ||
        { echo "FAILED: long.flac not decoded whole (41.77 s)"; exit 1; }
    awk -F'\t' 'NR > 1 && $1 >= 30000 { late = 1 } END { exit !late }' "$out/o/${a#/}/long.tsv" ||
        { cat "$out/o/${a#/}/long.tsv"; echo "FAILED: long.flac: no segment from whisper.cpp's second window"; exit 1; }
    local peak=${info##*\"peak_rss_mib\":}
    echo "PASS: 9 formats as the ffmpeg tool decodes them, lossy ones aligned, ten minutes in ${peak%\}} MiB,"
    echo "      5 damaged files refused with their reasons, one batch of every format, 41.77 s in two windows"
}

# resumable and sharded runs (issue 34, items 4 and 5; Note [manifest] in examples/whisper/manifest.cpp)
transcribe_shards() {
    local work=$1 whisper_dir=$2
    local out
    transcribe_setup "$work" "$whisper_dir"
    local tool="$work/build/whisper_transcribe" in="$out/in" i f rc
    local common=(--model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback --cpu --output-format txt)
    mkdir -p "$in"
    for i in $(seq -w 1 24); do
        cp "$work/batch/$(echo abc | cut -c$((10#$i % 3 + 1))).wav" "$in/f$i.wav"
    done
    echo "this is not audio" >"$in/bad.wav"
    # one process: the reference
    "$tool" "${common[@]}" "$in" >"$out/one.jsonl" 2>"$out/one.log" || true
    # the shard a process takes from the engine's variables, and bad shards refused
    "$tool" "${common[@]}" --shard 3/3 "$in" >/dev/null 2>"$out/bad.log" && { echo "FAILED: --shard 3/3 taken"; exit 1; }
    grep -q "gives shard 3 of 3, which is not a shard" "$out/bad.log" || { cat "$out/bad.log"; echo "FAILED: --shard 3/3's message"; exit 1; }
    JOB_COMPLETION_INDEX=0 "$tool" "${common[@]}" "$in" >/dev/null 2>"$out/bad.log" && { echo "FAILED: no shard count taken"; exit 1; }
    grep -q "give --shards N or WSP_SHARDS" "$out/bad.log" || { cat "$out/bad.log"; echo "FAILED: the missing count's message"; exit 1; }
    SLURM_ARRAY_TASK_ID=6 SLURM_ARRAY_TASK_MIN=2 SLURM_ARRAY_TASK_STEP=2 SLURM_ARRAY_TASK_COUNT=4 \
        "$tool" "${common[@]}" --output-dir "$out/slurm" "$in" >/dev/null 2>"$out/slurm.log" || true
    grep -q "shard 2/4 (from SLURM_ARRAY_TASK_ID): 6 of 25 files" "$out/slurm.log" ||
        { cat "$out/slurm.log"; echo "FAILED: --array=2-8:2's task 6 is not shard 2/4"; exit 1; }
    SLURM_PROCID=2 SLURM_NTASKS=3 "$tool" "${common[@]}" --output-dir "$out/srun" "$in" >/dev/null 2>"$out/srun.log" || true
    grep -q "shard 2/3 (from SLURM_PROCID): 8 of 25 files" "$out/srun.log" ||
        { cat "$out/srun.log"; echo "FAILED: srun's task 2 of 3 is not shard 2/3"; exit 1; }
    # three shards as three processes at once, as a Kubernetes Indexed Job runs them; merged: every
    # input once, the failed one named, the tokens of the one-process run
    for i in 0 1 2; do
        JOB_COMPLETION_INDEX=$i "$tool" "${common[@]}" --shards 3 --output-dir "$out/k8s" "$in" \
            >"$out/shard$i.jsonl" 2>"$out/shard$i.log" &
    done
    wait
    cat "$out"/shard*.log
    rc=0
    "$tool" merge "$out/k8s" 2>"$out/merge.log" || rc=$?
    cat "$out/merge.log"
    if [ $rc -ne 1 ] || ! grep -q "merge: failed: $in/bad.wav" "$out/merge.log" ||
        ! grep -q "25 inputs over 3 shards.*24 done, 1 failed, 0 missing, 0 done twice, 0 shards missing" "$out/merge.log"; then
        echo "FAILED: the merge of three shards"
        exit 1
    fi
    for f in "$in"/f*.wav; do
        [ "$(tokens_of "$out/one.jsonl" "$f")" = "$(cat "$out"/shard*.jsonl | tokens_of /dev/stdin "$f")" ] ||
            { echo "FAILED: $f: the shards' tokens are not the one process's"; exit 1; }
    done
    # the bad file replaced: --resume does it alone, in its shard; the merge is whole
    cp "$work/batch/a.wav" "$in/bad.wav"
    for i in 0 1 2; do
        JOB_COMPLETION_INDEX=$i WSP_SHARDS=3 "$tool" "${common[@]}" --resume --output-dir "$out/k8s" "$in" \
            >>"$out/again.jsonl" 2>>"$out/again.log"
    done
    [ "$(grep -c '"ok":true' "$out/again.jsonl")" -eq 1 ] || { cat "$out/again.log"; echo "FAILED: --resume did not do bad.wav alone"; exit 1; }
    "$tool" merge "$out/k8s" 2>"$out/merge.log" || { cat "$out/merge.log"; echo "FAILED: the merge after --resume"; exit 1; }
    [ "$(wc -l <"$out/k8s/manifest.jsonl")" -eq 25 ] || { echo "FAILED: not 25 lines merged"; exit 1; }
    # merge names what is wrong: a file done twice, a shard missing
    tail -1 "$out/k8s/manifest-1-of-3.jsonl" >"$out/line"
    cat "$out/line" >>"$out/k8s/manifest-1-of-3.jsonl"
    rm "$out/k8s/manifest-2-of-3.jsonl"
    rc=0
    "$tool" merge "$out/k8s" 2>"$out/merge.log" || rc=$?
    if [ $rc -ne 1 ] || ! grep -q "merge: done twice: .*(2 times)" "$out/merge.log" ||
        ! grep -q "merge: shard missing: 2/3" "$out/merge.log"; then
        cat "$out/merge.log"
        echo "FAILED: merge did not name the twice done file and the missing shard"
        exit 1
    fi
    # SIGTERM after a few files, then --resume: every file done, none twice, the stopped one redone
    rm "$in/bad.wav"
    local long=(--model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback --cpu --output-dir "$out/r" --output-format txt)
    "$tool" "${long[@]}" "$in" >"$out/r1.jsonl" 2>"$out/r1.log" &
    local pid=$!
    for _ in $(seq 100); do # until 3 files are done
        local n
        n=$(grep -c . "$out/r/manifest.jsonl" 2>/dev/null || true)
        [ "${n:-0}" -lt 3 ] || break
        sleep 0.1
    done
    kill -TERM $pid
    rc=0
    wait $pid || rc=$?
    [ $rc -eq 143 ] || { cat "$out/r1.log"; echo "FAILED: exit $rc after SIGTERM"; exit 1; }
    local first
    first=$(grep -c . "$out/r/manifest.jsonl")
    "$tool" "${long[@]}" --resume "$in" >"$out/r2.jsonl" 2>"$out/r2.log" || { cat "$out/r2.log"; echo "FAILED: --resume"; exit 1; }
    cat "$out/r1.log" "$out/r2.log"
    grep -q "resume: $first of 24 files done before" "$out/r2.log" || { echo "FAILED: --resume did not skip $first files"; exit 1; }
    [ "$(grep -c . "$out/r/manifest.jsonl")" -eq 24 ] || { echo "FAILED: not 24 lines"; exit 1; }
    [ "$(grep -o '"path":"[^"]*"' "$out/r/manifest.jsonl" | sort | uniq -d | wc -l)" -eq 0 ] ||
        { echo "FAILED: a file done twice"; exit 1; }
    # a failed file: --resume leaves it, --retry-failed does it again
    echo "this is not audio" >"$in/f99.wav"
    "$tool" "${long[@]}" --resume "$in" >"$out/r4.jsonl" 2>"$out/r4.log" || true
    "$tool" "${long[@]}" --resume "$in" >"$out/r5.jsonl" 2>"$out/r5.log" || true
    rc=0
    "$tool" "${long[@]}" --retry-failed "$in" >"$out/r6.jsonl" 2>"$out/r6.log" || rc=$?
    if [ "$(grep -c . "$out/r4.jsonl")" -ne 1 ] || [ -s "$out/r5.jsonl" ] || [ $rc -ne 1 ] ||
        [ "$(grep -c '"ok":false' "$out/r6.jsonl")" -ne 1 ] || ! grep -q "f99.wav" "$out/r6.jsonl"; then
        cat "$out"/r[456].log
        echo "FAILED: a failed file: done once, left by --resume, done again by --retry-failed (exit $rc)"
        exit 1
    fi
    rm "$in/f99.wav"
    # a changed file is done again; the rest is not
    touch "$in/f07.wav"
    "$tool" "${long[@]}" --resume "$in" >"$out/r3.jsonl" 2>"$out/r3.log"
    if [ "$(grep -c . "$out/r3.jsonl")" -ne 1 ] || ! grep -q "f07.wav" "$out/r3.jsonl"; then
        cat "$out/r3.log"
        echo "FAILED: the touched file alone is not done again"
        exit 1
    fi
    echo "PASS: 3 shards (JOB_COMPLETION_INDEX) merged, each input once with the one process's tokens; --resume"
    echo "      after SIGTERM at $first of 24 files completed the set with none twice; a changed file redone"
}

# a real Slurm (issue 34, item 5): tests/slurm/cluster.sh starts munged, slurmctld and slurmd on
# this machine; `sbatch --array=0-3` transcribes a folder on one sim per task with --resume; one
# task is cancelled (scancel) while it works and requeued; merge finds every file done once, with
# the text of one process over the same folder. Every daemon is stopped at exit.
transcribe_slurm() {
    local work=$1 whisper_dir=$2
    local out
    transcribe_setup "$work" "$whisper_dir"
    local cluster="$src_dir/tests/slurm/cluster.sh" tool="$work/build/whisper_transcribe"
    local state="$out/slurm" in="$out/in" rc=0 env_line i
    # shellcheck disable=SC2064 # the names are fixed now
    trap "'$cluster' stop '$state' >/dev/null 2>&1; rm -rf '$out'" EXIT
    env_line=$("$cluster" start "$state" 2>"$out/cluster.log") || rc=$?
    [ $rc -ne 77 ] || skip "$env_line"
    [ $rc -eq 0 ] || { cat "$out/cluster.log"; echo "FAILED: the Slurm cluster did not start"; exit 1; }
    eval "$env_line"
    mkdir -p "$in"
    for i in $(seq -w 1 32); do
        cp "$work/batch/$(echo abc | cut -c$((10#$i % 3 + 1))).wav" "$in/clip$i.wav"
    done
    local args=(--model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback --output-format txt)
    # the same folder in one process, on one sim
    WSP_GGML_SIM_DEVICES=1 "$tool" "${args[@]}" --output-dir "$out/one" "$in" >/dev/null 2>"$out/one.log" ||
        { cat "$out/one.log"; echo "FAILED: the one-process run"; exit 1; }
    cat >"$out/job.sh" <<EOF
#!/bin/bash
exec env WSP_GGML_SIM_DEVICES=1 "$tool" ${args[*]@Q} --output-dir "$out/run" --resume "$in"
EOF
    chmod +x "$out/job.sh"
    local jid t0=$SECONDS
    jid=$(sbatch --parsable --array=0-3 --requeue --cpus-per-task=1 --open-mode=append \
        --output="$out/task-%a.log" "$out/job.sh") || { echo "FAILED: sbatch"; exit 1; }
    # task 1 cancelled once its first file is done, and requeued
    local n=0
    for _ in $(seq 600); do
        n=$(grep -c . "$out/run/manifest-1-of-4.jsonl" 2>/dev/null || true)
        [ "${n:-0}" -lt 1 ] || break
        sleep 0.1
    done
    [ "${n:-0}" -ge 1 ] || { cat "$out"/task-*.log; echo "FAILED: task 1 did no file in 60 s"; exit 1; }
    scancel "${jid}_1"
    for _ in $(seq 100); do
        [ "$(squeue -h -j "${jid}_1" -t all -o %T)" != CANCELLED ] || break
        sleep 0.1
    done
    local cancelled_at
    cancelled_at=$(grep -c . "$out/run/manifest-1-of-4.jsonl")
    scontrol requeue "${jid}_1" || { echo "FAILED: scontrol requeue ${jid}_1"; exit 1; }
    for _ in $(seq 1200); do
        [ -n "$(squeue -h -j "$jid")" ] || break
        sleep 0.1
    done
    [ -z "$(squeue -h -j "$jid")" ] || { squeue -j "$jid"; echo "FAILED: the array did not end in 120 s"; exit 1; }
    local array_s=$((SECONDS - t0))
    cat "$out"/task-*.log
    echo "task 1 when cancelled: $(grep -h "stopped by SIGTERM" "$out/task-1.log" | tr '\n' ' ')"
    grep -q "resume: $cancelled_at of 8 files done before" "$out/task-1.log" ||
        { echo "FAILED: the requeued task did not resume after its $cancelled_at files"; exit 1; }
    "$tool" merge "$out/run" 2>"$out/merge.log" || { cat "$out/merge.log"; echo "FAILED: merge"; exit 1; }
    cat "$out/merge.log"
    grep -q "32 inputs over 4 shards.*32 done, 0 failed, 0 missing, 0 done twice, 0 shards missing" "$out/merge.log" ||
        { echo "FAILED: not every file once"; exit 1; }
    local f
    for f in "$in"/*.wav; do
        local txt=${f#/}
        cmp -s "$out/one/${txt%.wav}.txt" "$out/run/${txt%.wav}.txt" || { echo "FAILED: $f: not the one process's text"; exit 1; }
    done
    "$cluster" stop "$state" 2>/dev/null
    if pgrep -f "$state" | grep -q .; then
        pgrep -a -f "$state"
        echo "FAILED: a daemon of the test cluster was left"
        exit 1
    fi
    echo "one process: $(sed -n 's/^summary: //p' "$out/one.log")"
    echo "PASS: sbatch --array=0-3 over 32 clips on sims in $array_s s, task 1 cancelled after $cancelled_at files and"
    echo "      requeued, merge: every file once with the one process's text; no daemon left"
}

# wsp-whisper-server's tests: the server there (else skipped); sets server, fixed (the options
# every run has), server_pid (global: the exit trap kills a server a failed check left) and out
server_setup() {
    local work=$1 whisper_dir=$2
    transcribe_setup "$work" "$whisper_dir"
    server="$work/build/wsp-whisper-server"
    [ -x "$server" ] || skip "wsp-whisper-server was not built (it needs cpp-httplib: scripts/install-deps.sh)"
    command -v curl >/dev/null || skip "curl is not installed"
    server_pid=
    fixed=(--model "$work/model-tiny-f16.bin" --threads 1 --max-tokens 10 --no-fallback)
    # shellcheck disable=SC2064 # the folder is named now
    trap "[ -z \"\${server_pid:-}\" ] || kill \$server_pid 2>/dev/null; rm -rf '$out'" EXIT
}

# a server on a free port, ready: sets server_pid and url
start_server() { # LOG ARGS...
    local log=$1
    shift
    "$server" "${fixed[@]}" --port 0 "$@" >/dev/null 2>"$log" &
    server_pid=$!
    for _ in $(seq 300); do
        ! grep -q "ready" "$log" || break
        kill -0 $server_pid 2>/dev/null || { cat "$log"; echo "FAILED: the server exited"; exit 1; }
        sleep 0.1
    done
    grep -q "ready" "$log" || { cat "$log"; echo "FAILED: the server is not ready in 30 s"; exit 1; }
    url=http://127.0.0.1:$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log")
}

stop_server() { # the exit status must be 0
    local rc=0
    kill -TERM "$server_pid"
    wait "$server_pid" || rc=$?
    server_pid=
    [ $rc -eq 0 ] || { echo "FAILED: the server exited $rc after SIGTERM"; exit 1; }
}

# wsp-whisper-server (issue 36; Note [server requests] in examples/whisper/server.cpp), with curl
server_test() {
    local work=$1 whisper_dir=$2
    local out server fixed url
    server_setup "$work" "$whisper_dir"
    command -v ffmpeg >/dev/null || skip "the ffmpeg tool is not installed (apt-get install ffmpeg): it makes a long file"
    local model="$work/model-tiny-f16.bin" a="$work/batch/a.wav"
    post() { # OUT FIELD... : the status on stdout
        local o=$1
        shift
        local fields=() f
        for f in "$@"; do
            fields+=(-F "$f")
        done
        curl -s -o "$o" -D "$o.headers" -w '%{http_code}\n' "${fields[@]}" "$url/v1/audio/transcriptions"
    }
    # the batch transcriber's files for the same clip and options: the reference
    "$work/build/whisper_transcribe" "${fixed[@]}" --cpu --language en --output-dir "$out/ref" \
        --output-format json,srt,vtt "$a" >"$out/ref.jsonl" 2>"$out/ref.log" || { cat "$out/ref.log"; echo "FAILED: the reference"; exit 1; }
    local ref="$out/ref/${a#/}"
    ref=${ref%.wav}
    start_server "$out/server.log" --cpu
    [ "$(curl -s "$url/health")" = '{"status":"ok"}' ] || { echo "FAILED: /health"; exit 1; }
    curl -s "$url/v1/models" | grep -q '"id":"model-tiny-f16"' || { echo "FAILED: /v1/models"; exit 1; }
    local format
    for format in json text srt vtt verbose_json; do
        [ "$(post "$out/r.$format" file=@"$a" model=whisper-1 language=en response_format=$format)" = 200 ] ||
            { cat "$out/r.$format"; echo "FAILED: $format: not 200"; exit 1; }
    done
    if ! cmp "$out/r.srt" "$ref.srt" || ! cmp "$out/r.vtt" "$ref.vtt"; then
        echo "FAILED: srt or vtt: not the transcriber's"
        exit 1
    fi
    python3 - "$out" "$ref.json" "$out/ref.jsonl" <<'PY_' || { echo "FAILED: json, text, verbose_json: not the transcriber's"; exit 1; }
import json, sys
out, ref = sys.argv[1], json.load(open(sys.argv[2]))
line = json.loads(open(sys.argv[3]).readline())
text = line["text"].lstrip(" ")
assert json.load(open(out + "/r.json")) == {"text": text}, (open(out + "/r.json").read(), text)
assert open(out + "/r.text").read() == text + "\n"
v = json.load(open(out + "/r.verbose_json"))
assert v["task"] == "transcribe" and v["language"] == "english" and v["text"] == text, v
# the segments' text keeps whisper.cpp's leading space, as OpenAI's does; the transcriber's drops it
assert [s["text"].lstrip(" ") for s in v["segments"]] == [s["text"] for s in ref["segments"]], (v, ref)
assert [s["tokens"] for s in v["segments"]] == [[t["id"] for t in s["tokens"]] for s in ref["segments"]], (v, ref)
assert [(s["start"], s["end"]) for s in v["segments"]] == [(s["start"], s["end"]) for s in ref["segments"]], (v, ref)
print("json, text, verbose_json: the transcriber's text, segments, times and tokens")
PY_
    # OpenAI's own Node.js client: what it returns is what curl got
    local openai="$src_dir/.third_party/openai-node/node_modules/openai" n_ok=6 n_bad=8 # the requests answered 200, 400
    if command -v node >/dev/null && [ -f "$openai/index.mjs" ]; then
        mkdir -p "$out/client"
        node "$src_dir/tests/whisper/openai_client.mjs" "$openai" "$url" "$a" "$work/batch/d.wav" "$out/client" ||
            { echo "FAILED: the openai client"; exit 1; }
        for format in text srt vtt; do
            cmp "$out/client/$format" "$out/r.$format" || { echo "FAILED: the client's $format is not curl's"; exit 1; }
        done
        python3 - "$out" <<'PY_' || { echo "FAILED: the client's json or verbose_json is not curl's"; exit 1; }
import json, sys
out = sys.argv[1]
for f in ("json", "verbose_json"):
    assert json.load(open(f"{out}/client/{f}")) == json.load(open(f"{out}/r.{f}")), f
assert "text" in json.load(open(f"{out}/client/translation"))
PY_
        n_ok=$((n_ok + 6))
        n_bad=$((n_bad + 1))
    else
        echo "NOTE: node or the openai package is missing (scripts/fetch-openai.sh): the client's part is left out"
    fi
    # bad input: 400 with the field named, nothing queued, the next request served
    expect_status() { # WHAT STATUS PATTERN FIELD...
        local what=$1 want=$2 pattern=$3 got
        shift 3
        got=$(post "$out/bad.json" "$@")
        if [ "$got" != "$want" ] || ! grep -q -- "$pattern" "$out/bad.json"; then
            cat "$out/bad.json"
            echo "FAILED: $what: $got, not $want with '$pattern'"
            exit 1
        fi
        echo "$what: $got $(cat "$out/bad.json")"
    }
    local bad="$work/batch/d.wav"
    expect_status "not audio" 400 '"param":"file"' file=@"$bad"
    expect_status "no file" 400 "needs a multipart/form-data field 'file'" model=whisper-1
    expect_status "a response_format" 400 '"param":"response_format"' file=@"$a" response_format=xml
    expect_status "a language" 400 '"param":"language"' file=@"$a" language=xx
    expect_status "a temperature" 400 '"param":"temperature"' file=@"$a" temperature=2
    expect_status "word timestamps" 400 "only 'segment'" file=@"$a" "timestamp_granularities[]=word"
    head -c 40 "$a" >"$out/cut.wav"
    expect_status "a cut WAV" 400 '"param":"file"' file=@"$out/cut.wav"
    : >"$out/empty.wav"
    expect_status "an empty file" 400 '"param":"file"' file=@"$out/empty.wav"
    expect_status "after them" 200 '"text"' file=@"$a"
    curl -s "$url/metrics" >"$out/metrics"
    local line
    for line in "wsp_whisper_requests_total{status=\"400\"} $n_bad" "wsp_whisper_requests_total{status=\"200\"} $n_ok" \
        "wsp_whisper_request_seconds_count $((n_ok + n_bad))" 'wsp_whisper_queue_depth 0'; do
        grep -qxF "$line" "$out/metrics" || { cat "$out/metrics"; echo "FAILED: /metrics has no '$line'"; exit 1; }
    done
    stop_server
    # limits: 413 over --max-upload-mb, 401 without the key
    head -c 1100000 /dev/zero >"$out/big.wav"
    start_server "$out/server2.log" --cpu --max-upload-mb 1 --api-key "k3y"
    expect_status "over 1 MiB" 413 "larger than the server's --max-upload-mb" file=@"$out/big.wav"
    expect_status "no key" 401 '"code":"invalid_api_key"' file=@"$a"
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer k3y" -F file=@"$a" "$url/v1/audio/transcriptions")" = 200 ] ||
        { echo "FAILED: the key"; exit 1; }
    stop_server
    # back-pressure: a queue of 1 and 6 requests at once, each answered once, 200 or 429; 504 past
    # the deadline; SIGTERM with a request in flight: it is answered, the server exits 0
    step "$out/ffmpeg.log" ffmpeg -nostdin -loglevel error -y -stream_loop 99 -i "$a" -c:a flac "$out/long.flac"
    start_server "$out/server3.log" --cpu --queue 1
    local i requests=()
    for i in 1 2 3 4 5 6; do
        post "$out/q$i.json" file=@"$out/long.flac" >"$out/q$i.status" &
        requests+=($!)
    done
    wait "${requests[@]}" || true
    local statuses
    statuses=$(sort "$out"/q*.status | uniq -c | tr -s ' ' | tr '\n' ',')
    echo "6 requests at once, --queue 1: $statuses"
    if [ "$(cat "$out"/q*.status | grep -c -E '^(200|429)$')" -ne 6 ] || ! grep -q 200 "$out"/q*.status ||
        ! grep -q 429 "$out"/q*.status || ! grep -qi "^Retry-After: 1" "$out"/q*.json.headers; then
        echo "FAILED: not each 200 or 429, with some of each"
        exit 1
    fi
    stop_server
    start_server "$out/server4.log" --cpu --timeout-s 0.3
    expect_status "past --timeout-s" 504 "timed out" file=@"$out/long.flac"
    stop_server
    start_server "$out/server5.log" --cpu
    post "$out/late.json" file=@"$out/long.flac" >"$out/late.status" &
    local request=$!
    for _ in $(seq 200); do # until it is being transcribed
        ! curl -s "$url/metrics" | grep -q 'busy_workers{device="CPU"} 1' || break
        sleep 0.05
    done
    kill -TERM "$server_pid"
    wait "$request" || true
    local rc=0
    wait "$server_pid" || rc=$?
    server_pid=
    if [ $rc -ne 0 ] || [ "$(cat "$out/late.status")" != 200 ]; then
        cat "$out/server5.log"
        echo "FAILED: SIGTERM in flight: exit $rc, the request answered $(cat "$out/late.status"), not 200"
        exit 1
    fi
    grep -q "finishing what is in flight" "$out/server5.log" || { echo "FAILED: SIGTERM was not in flight"; exit 1; }
    echo "PASS: every response format as whisper_transcribe writes it, 8 bad inputs 400, 413, 401, 429 under load,"
    echo "      504 past the deadline, SIGTERM answers the request in flight and exits 0"
}

wav_seconds() { # WAV: its length in seconds
    python3 -c "import sys, wave; w = wave.open(sys.argv[1]); print(w.getnframes() / w.getframerate())" "$1"
}

# wsp-whisper-server under load (tests/whisper/load.py) over 2 sims, a worker process each, with
# a queue smaller than the concurrency: 300 requests at 16, each answered exactly once (200 with
# the text one request alone gets, or 429), /metrics counting each once, no worker left after
# SIGTERM; then again with a worker killed by SIGKILL in the middle: it is restarted, its request
# retried on a worker and answered 200
server_load() {
    local work=$1 whisper_dir=$2
    local out server fixed url
    server_setup "$work" "$whisper_dir"
    local a="$work/clip.wav" audio_s expect run
    audio_s=$(wav_seconds "$a")
    for run in plain kill; do
        WSP_GGML_SIM_DEVICES=2 WSP_GGML_ALL_GPUS=0 start_server "$out/$run.log" --per-device --queue 4
        expect=$(curl -s -F file=@"$a" -F model=whisper-1 "$url/v1/audio/transcriptions" |
            python3 -c "import json, sys; print(json.load(sys.stdin)['text'])")
        local kill=()
        [ $run = plain ] || kill=(--kill-worker "$server_pid" --kill-at 100)
        python3 "$src_dir/tests/whisper/load.py" "$url" "$a" --requests 300 --concurrency 16 --audio-seconds "$audio_s" \
            --expect-text "$expect" "${kill[@]}" >"$out/$run.json" || { cat "$out/$run.log"; echo "FAILED: load.py"; exit 1; }
        curl -s "$url/metrics" >"$out/$run.metrics"
        local workers
        workers=$(pgrep -P "$server_pid" | tr '\n' ' ')
        stop_server
        echo "$run: $(cat "$out/$run.json")"
        grep "restarting\|is back" "$out/$run.log" || true
        python3 - "$out/$run.json" "$out/$run.metrics" $run <<'PY_' || { cat "$out/$run.log"; echo "FAILED: the load test ($run)"; exit 1; }
import json, re, sys
r = json.load(open(sys.argv[1]))
metrics = open(sys.argv[2]).read()
run = sys.argv[3]
assert r["answered_once"] == 300, f"{300 - r['answered_once']} requests not answered exactly once"
assert set(r["status"]) <= {"200", "429"}, f"answers other than 200 and 429: {r['status']}"
assert r["status"].get("200", 0) > 0 and r["status"].get("429", 0) > 0, f"not both 200 and 429: {r['status']}"
assert r["wrong_text"] == 0, f"{r['wrong_text']} answers with another text"
counted = sum(int(n) for n in re.findall(r'^wsp_whisper_requests_total\{status="\d+"\} (\d+)$', metrics, re.M))
assert counted == 301, f"/metrics counts {counted} requests, not 301 (the load's and one alone)"
restarts = sum(int(n) for n in re.findall(r'^wsp_whisper_worker_restarts_total\{device="SIM\d"\} (\d+)$', metrics, re.M))
if run == "kill":
    assert len(r["killed"]) == 1, "no worker was killed"
    assert restarts == 1, f"{restarts} restarts, not 1"
else:
    assert restarts == 0, f"{restarts} restarts without a kill"
PY_
        local p
        for p in $workers; do
            ! kill -0 "$p" 2>/dev/null || { echo "FAILED: worker $p outlived the server"; exit 1; }
        done
        [ $run = plain ] || grep -q "killed by signal 9: restarting it; its request is tried again" "$out/$run.log" ||
            { cat "$out/$run.log"; echo "FAILED: the server did not say it restarted the worker"; exit 1; }
    done
    # a request whose worker dies, and whose second worker dies too: 503; the server goes on
    command -v ffmpeg >/dev/null || skip "the ffmpeg tool is not installed (apt-get install ffmpeg): it makes a long file"
    step "$out/ffmpeg.log" ffmpeg -nostdin -loglevel error -y -stream_loop 99 -i "$a" -c:a flac "$out/long.flac"
    WSP_GGML_SIM_DEVICES=1 WSP_GGML_ALL_GPUS=0 start_server "$out/twice.log" --per-device
    busy() { # waits until the one worker has a request
        for _ in $(seq 400); do
            ! curl -s "$url/metrics" | grep -qxF 'wsp_whisper_busy_workers{device="SIM0"} 1' || return 0
            sleep 0.05
        done
        cat "$out/twice.log"
        echo "FAILED: the worker never took the request"
        exit 1
    }
    curl -s -o "$out/twice.json" -w '%{http_code}' -F file=@"$out/long.flac" -F model=whisper-1 \
        "$url/v1/audio/transcriptions" >"$out/twice.status" &
    local request=$!
    busy
    pkill -KILL -P "$server_pid"
    for _ in $(seq 200); do
        ! grep -q "is tried again" "$out/twice.log" || break
        sleep 0.05
    done
    busy
    pkill -KILL -P "$server_pid"
    wait "$request" || true
    if [ "$(cat "$out/twice.status")" != 503 ] || ! grep -q "died twice" "$out/twice.json"; then
        cat "$out/twice.log" "$out/twice.json"
        echo "FAILED: a request whose workers died twice: $(cat "$out/twice.status"), not 503"
        exit 1
    fi
    [ "$(curl -s -o /dev/null -w '%{http_code}' -F file=@"$a" -F model=whisper-1 "$url/v1/audio/transcriptions")" = 200 ] ||
        { cat "$out/twice.log"; echo "FAILED: no request served after the worker died twice"; exit 1; }
    stop_server
    echo "PASS: 300 requests at 16 over 2 sims with --queue 4, each answered once (200 with the same text or 429),"
    echo "      /metrics counting each once, no worker left; a worker killed mid-run restarted, nothing lost;"
    echo "      a request whose workers died twice answered 503, the next one 200"
}

# the load test's figures side by side (bench/server_load.sh): 300 requests at 16, --queue 8,
# on 1, 2 and 4 sims, a worker process per device and one context on the all-GPU device
server_bench() {
    local work=$1 whisper_dir=$2
    local out server fixed url
    server_setup "$work" "$whisper_dir"
    local a="$work/clip.wav" audio_s n mode
    audio_s=$(wav_seconds "$a")
    printf '%-5s %-11s %6s %6s %8s %8s %8s %11s\n' sims placement 200s 429s req/s p50_s p95_s audio_s/s
    for n in 1 2 4; do
        for mode in per-device all-gpus; do
            [ "$n" -gt 1 ] || [ $mode = per-device ] || continue
            WSP_GGML_SIM_DEVICES=$n WSP_GGML_ALL_GPUS=0 start_server "$out/$n-$mode.log" --$mode --queue 8
            python3 "$src_dir/tests/whisper/load.py" "$url" "$a" --requests 300 --concurrency 16 \
                --audio-seconds "$audio_s" >"$out/r.json" || { cat "$out/$n-$mode.log"; echo "FAILED: load.py"; exit 1; }
            stop_server
            python3 - "$out/r.json" "$n" "$mode" <<'PY_'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<5} {sys.argv[3]:<11} {r['status'].get('200', 0):>6} {r['status'].get('429', 0):>6} "
      f"{r['rps']:>8} {r['p50_s']:>8} {r['p95_s']:>8} {r['audio_s_per_s']:>11}")
PY_
        done
    done
}

mode=${1:-}
shift || true
case $mode in
    build) build "$@" ;;
    check) check "$@" ;;
    transcribe) transcribe "$@" ;;
    transcribe-checks) transcribe_checks "$@" ;;
    transcribe-audio) transcribe_audio "$@" ;;
    transcribe-shards) transcribe_shards "$@" ;;
    transcribe-slurm) transcribe_slurm "$@" ;;
    server) server_test "$@" ;;
    server-load) server_load "$@" ;;
    server-bench) server_bench "$@" ;;
    peer) peer "$@" ;;
    *)
        echo "usage: $0 build BUILD_DIR WORK WHISPER_DIR | check|transcribe|peer WORK WHISPER_DIR ARGS..." >&2
        exit 2
        ;;
esac
