#!/usr/bin/env python3
"""Summarises peer JSON lines (measure_peers.sh) as a Markdown table per world size:
per size and peer, the median over runs of time_us_p50 and of busbw_gbps.
   python3 bench/peers/peer_table.py OUT_DIR/np2.jsonl [OUT_DIR/np4.jsonl ...]"""
import collections
import json
import statistics
import sys

IMPLS = ["mpi_vader", "mpi_tcp", "gloo_ring_chunked", "gloo_halving_doubling"]


def human(n):
    for unit, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if n >= unit:
            return f"{n // unit}{suffix}"
    return str(n)


for path in sys.argv[1:]:
    runs = collections.defaultdict(list)  # (np, bytes, impl) -> [lines]
    for line in open(path):
        j = json.loads(line)
        runs[(j["np"], j["bytes"], j["impl"])].append(j)
    for np_ in sorted({k[0] for k in runs}):
        sizes = sorted({k[1] for k in runs if k[0] == np_})
        print(f"\nnp={np_}: median over runs of time_us_p50 (us) / busbw (GB/s); "
              "runs per cell in [], ! = a wrong result")
        print("| bytes | " + " | ".join(IMPLS) + " |")
        print("|---" * (1 + len(IMPLS)) + "|")
        for b in sizes:
            cells = []
            for impl in IMPLS:
                lines = runs.get((np_, b, impl), [])
                if not lines:
                    cells.append("-")
                    continue
                t = statistics.median(x["time_us_p50"] for x in lines)
                bw = statistics.median(x["busbw_gbps"] for x in lines)
                bad = "" if all(x["correct"] for x in lines) else "!"
                cells.append(f"{t:.1f} / {bw:.3f} [{len(lines)}]{bad}")
            print(f"| {human(b)} | " + " | ".join(cells) + " |")
