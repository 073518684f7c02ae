#!/usr/bin/env bash
# wsp-whisper-server under load, side by side: 300 requests at concurrency 16 (tests/whisper/load.py,
# a client waits Retry-After after a 429), --queue 8, whisper tiny dims on sims (1, 2 and 4), each
# placement in one run: a worker process per device (--per-device) and one context on the all-GPU
# device (--all-gpus). Prints per configuration the 200s and 429s, requests answered 200 per second,
# p50/p95 latency of the 200s, and audio seconds transcribed per second.
#   bench/server_load.sh [WORK]
# WORK: the real-client fixture's folder (default build/release/tests/whisper, which
# ctest -R WhisperClient.Build makes: the server built against this library, the model, the clip).
set -euo pipefail
src_dir=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath "${1:-$src_dir/build/release/tests/whisper}")
exec "$src_dir/tests/whisper/run.sh" server-bench "$work" "$src_dir/.third_party/whisper.rn-0.4.3"
