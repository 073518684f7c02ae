#!/usr/bin/env python3
"""compare_pcm.py OURS REFERENCE MIN_DB: two files of float32 samples (16 kHz mono), equal in length
within 64 samples and OURS within MIN_DB of the reference by signal-to-noise ratio; exit 1 if not."""
import array
import math
import sys


def load(path):
    samples = array.array("f")
    with open(path, "rb") as f:
        samples.frombytes(f.read())
    return samples


ours, ref, min_db = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
n = min(len(ours), len(ref))
err = sum((x - y) ** 2 for x, y in zip(ours[:n], ref[:n]))
snr = 10 * math.log10(sum(y * y for y in ref[:n]) / err) if err else math.inf
print(f"{sys.argv[1]}: {len(ours)} samples, {len(ref)} in {sys.argv[2]}, SNR {snr:.1f} dB (at least {min_db:g})")
sys.exit(0 if abs(len(ours) - len(ref)) <= 64 and snr >= min_db else 1)
