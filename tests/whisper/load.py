#!/usr/bin/env python3
"""A bounded load test of wsp-whisper-server (tests/whisper/run.sh server-load).

REQUESTS uploads of one file at CONCURRENCY at once to /v1/audio/transcriptions. Each client
thread sends a request, waits for its answer, and after a 429 waits the Retry-After it was given
before its next one. With --kill-worker SERVER_PID, once --kill-at answers have come back, one of
the server's worker processes (a child with --worker-device) is killed with SIGKILL while it
transcribes.

Prints one JSON object: the answers by status, each request's answer count (every one must be 1),
the 200s whose text differs from --expect-text, requests per second, p50/p95 latency of the 200s,
audio seconds per second, and the pid killed.
"""

import argparse
import http.client
import json
import math
import os
import signal
import statistics
import sys
import threading
import time
import urllib.parse
import uuid


def multipart(path):
    boundary = uuid.uuid4().hex
    with open(path, "rb") as f:
        data = f.read()
    parts = [
        (b'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-1'),
        (b'Content-Disposition: form-data; name="file"; filename="' + os.path.basename(path).encode() +
         b'"\r\nContent-Type: application/octet-stream\r\n\r\n' + data),
    ]
    body = b"".join(b"--" + boundary.encode() + b"\r\n" + p + b"\r\n" for p in parts)
    body += b"--" + boundary.encode() + b"--\r\n"
    return body, "multipart/form-data; boundary=" + boundary


def workers_of(pid):
    """The server's child processes that are workers."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"--worker-device" in cmd:
            out.append(int(entry))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("file")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--audio-seconds", type=float, required=True, help="the file's length")
    ap.add_argument("--expect-text", default=None)
    ap.add_argument("--kill-worker", type=int, default=0, help="the server's pid")
    ap.add_argument("--kill-at", type=int, default=50)
    a = ap.parse_args()

    body, ctype = multipart(a.file)
    host = urllib.parse.urlparse(a.url)
    lock = threading.Lock()
    next_id = [0]
    answers = [0] * a.requests  # answers each request got
    status = {}
    latency = []
    wrong = []
    killed = []

    def take():
        with lock:
            if next_id[0] >= a.requests:
                return -1
            next_id[0] += 1
            return next_id[0] - 1

    def answered(i, code, seconds, text):
        with lock:
            answers[i] += 1
            status[code] = status.get(code, 0) + 1
            if code == 200:
                latency.append(seconds)
                if a.expect_text is not None and text != a.expect_text:
                    wrong.append(text)
            done = sum(status.values())
            if a.kill_worker and not killed and done >= a.kill_at:
                victims = workers_of(a.kill_worker)
                if victims:
                    os.kill(victims[0], signal.SIGKILL)
                    killed.append(victims[0])

    def client():
        while (i := take()) >= 0:
            t0 = time.monotonic()
            conn = http.client.HTTPConnection(host.hostname, host.port, timeout=300)
            try:
                conn.request("POST", "/v1/audio/transcriptions", body, {"Content-Type": ctype})
                r = conn.getresponse()
                payload = r.read()
                retry = r.getheader("Retry-After")
                code = r.status
            except (OSError, http.client.HTTPException) as e:
                print(f"request {i}: {e}", file=sys.stderr)
                code, payload, retry = 0, b"", None
            finally:
                conn.close()
            text = None
            if code == 200:
                text = json.loads(payload)["text"]
            answered(i, code, time.monotonic() - t0, text)
            if code == 429:
                time.sleep(float(retry or 1))

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ok = status.get(200, 0)
    lat = sorted(latency)
    print(json.dumps({
        "requests": a.requests,
        "concurrency": a.concurrency,
        "status": {str(k): v for k, v in sorted(status.items())},
        "answered_once": sum(1 for n in answers if n == 1),
        "wrong_text": len(wrong),
        "wall_s": round(wall, 3),
        "rps": round(ok / wall, 2),
        "p50_s": round(statistics.median(lat), 3) if lat else None,
        "p95_s": round(lat[math.ceil(0.95 * len(lat)) - 1], 3) if lat else None,
        "audio_s_per_s": round(ok * a.audio_seconds / wall, 2),
        "killed": killed,
    }))


if __name__ == "__main__":
    main()
