#!/usr/bin/env bash
# Installs what the build and the tests need from Debian/Ubuntu's packages, only what is missing:
#   scripts/install-deps.sh            the build and the test suites
#   scripts/install-deps.sh client     also espeak-ng, the ffmpeg tool (it encodes the audio tests'
#                                      files), Slurm and munge (a one-machine cluster), Node.js
#                                      (where there is none) and a downloader (curl, unless npm is
#                                      on the PATH already) for the real-client tests
#   scripts/install-deps.sh hip        also the HIP toolchain (preset hip)
#   scripts/install-deps.sh all        all of these
# As root it runs apt-get itself; as another user through sudo (it says so where there is none).
# A Node.js installed from elsewhere (NodeSource, nvm) is left alone: Debian's npm conflicts with
# it, and the fetch scripts need only npm or curl. README's install lines and .ci/run call this.
set -euo pipefail

groups=(base)
for a in "$@"; do
    case "$a" in
        client | hip) groups+=("$a") ;;
        all) groups+=(client hip) ;;
        -h | --help)
            sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "install-deps: unknown group '$a' (one of: client, hip, all)" >&2
            exit 2
            ;;
    esac
done

need=()
want_cmd() { command -v "$1" >/dev/null || need+=("$2"); }   # a tool, its package
want_pkg() { dpkg -s "$1" >/dev/null 2>&1 || need+=("$1"); } # a library package
for g in "${groups[@]}"; do
    case "$g" in
        base)
            want_cmd cmake cmake
            want_cmd ninja ninja-build
            want_cmd g++ g++
            want_cmd clang-format-14 clang-format-14
            want_cmd pkg-config pkg-config # finds FFmpeg's libraries for the transcriber
            for p in libgtest-dev libbenchmark-dev libopenblas-dev libboost-context-dev libcli11-dev nlohmann-json3-dev \
                libavformat-dev libavcodec-dev libswresample-dev libcpp-httplib-dev; do
                want_pkg "$p"
            done
            ;;
        client)
            want_cmd espeak-ng espeak-ng
            want_cmd ffmpeg ffmpeg
            # a Slurm cluster of this machine alone for the batch transcriber's job array test
            # (tests/slurm/cluster.sh): the daemons, the client commands and munge
            for p in slurmctld slurmd slurm-client munge; do
                want_pkg "$p"
            done
            want_cmd python3 python3 # the model download test's local HTTP server
            want_cmd node nodejs     # OpenAI's Node.js client against the server (scripts/fetch-openai.sh)
            if ! command -v npm >/dev/null && ! command -v curl >/dev/null; then
                need+=(curl ca-certificates)
            fi
            ;;
        hip)
            want_cmd hipcc hipcc
            want_pkg libamdhip64-dev
            ;;
    esac
done

if [ ${#need[@]} -eq 0 ]; then
    echo "install-deps: nothing to install (${groups[*]})"
    exit 0
fi
as_root=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "install-deps: not root and no sudo: install as root: apt-get install -y ${need[*]}" >&2
        exit 1
    fi
    as_root=(sudo)
fi
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
