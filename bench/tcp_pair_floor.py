#!/usr/bin/env python3
"""How close two TCP ranks on one host come to what loopback TCP itself allows.

Per round, back to back: raw loopback exchanges of 1 MiB and 2000 KiB each way
(bench/tcp_loopback_probe: no reduction, no collective), then `lockstep bench allreduce
--np 2 --transport tcp --sizes 2M:2M --peers mpi` with its fusion measurement. A two-rank
all-reduce of S bytes must move S bytes each way (S/2 in reduce-scatter, S/2 in
all-gather), so the raw exchanges give a floor that no algorithm over these sockets beats:

  2 MiB all-reduce >= two 1 MiB exchanges
  fused 100 x 40 KiB bucket (4000 KiB) >= two 2000 KiB exchanges

and the fusion speed-up is bounded by separate / (two 2000 KiB exchanges).

Only rounds whose bench saw both CPUs share an L3 are summarised (the host moves vCPUs
between L3s; the bench reports which). Medians over those rounds.

  bazel build //client:lockstep //bench/...
  bench/tcp_pair_floor.py --rounds 6
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

# The bench's fused bucket is 100 x 40 KiB; two ranks exchange half of it in each phase.
HALF_FUSED_BUCKET = 100 * 40 * 1024 // 2


def probe(bazel_bin, nbytes):
    out = subprocess.run(
        [os.path.join(bazel_bin, "bench/tcp_loopback_probe"), "--reps=300", f"--bytes={nbytes}"],
        check=True, capture_output=True, text=True).stdout
    m = re.search(r"median ([0-9.]+) us", out)
    if not m:
        sys.exit(f"tcp_loopback_probe printed no median: {out!r}")
    return float(m.group(1))


def bench(bazel_bin, json_out):
    out = subprocess.run(
        [os.path.join(bazel_bin, "client/lockstep"), "bench", "allreduce", "--np", "2",
         "--transport", "tcp", "--sizes", "2M:2M", "--rounds", "1", "--peers", "mpi",
         "--json_out", json_out, "--peers_dir", os.path.join(bazel_bin, "bench/peers")],
        check=True, capture_output=True, text=True).stdout
    m = re.search(r"# fusion: .* separate ([0-9.]+) us .* fused ([0-9.]+) us", out)
    if not m:
        sys.exit(f"lockstep bench printed no fusion line:\n{out}")
    rows = [json.loads(line) for line in open(json_out)]
    shared = all(max(r["probe_ns_before"], r["probe_ns_after"]) < 200 for r in rows)
    times = {r["impl"]: r["time_us_p50"] for r in rows}
    ours = next((t for impl, t in times.items() if impl.startswith("lockstep")), None)
    return shared, ours, times.get("mpi_tcp"), float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--bazel_bin", default="bazel-bin")
    args = ap.parse_args()
    kept = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            p1, p2 = probe(args.bazel_bin, 1 << 20), probe(args.bazel_bin, HALF_FUSED_BUCKET)
            shared, ours, mpi, sep, fused = bench(args.bazel_bin, os.path.join(tmp, "rows.json"))
            row = dict(p1=p1, p2=p2, ours=ours, mpi=mpi, sep=sep, fused=fused)
            print(f"round {r}: {'shared L3' if shared else 'different L3s (not summarised)'}: "
                  f"raw 1 MiB {p1:.0f} us, raw 2000 KiB {p2:.0f} us; 2 MiB all-reduce ours "
                  f"{ours:.0f} us, Open MPI {mpi or float('nan'):.0f} us; fusion separate "
                  f"{sep:.0f} us, fused {fused:.0f} us", flush=True)
            if shared and ours and mpi:
                kept.append(row)
    if not kept:
        sys.exit("no round saw both CPUs share an L3; run again")
    med = {k: statistics.median(row[k] for row in kept) for k in kept[0]}
    floor2m, floor_fused = 2 * med["p1"], 2 * med["p2"]
    print(f"\nmedians over {len(kept)} shared-L3 rounds")
    print(f"2 MiB: floor (two raw 1 MiB exchanges) {floor2m:.0f} us; ours {med['ours']:.0f} us "
          f"= {med['ours'] / floor2m:.2f}x floor; Open MPI {med['mpi']:.0f} us = "
          f"{med['mpi'] / floor2m:.2f}x floor; Open MPI / ours {med['mpi'] / med['ours']:.2f}x")
    print(f"fusion: floor (two raw 2000 KiB exchanges) {floor_fused:.0f} us; fused "
          f"{med['fused']:.0f} us = {med['fused'] / floor_fused:.2f}x floor; separate "
          f"{med['sep']:.0f} us; speed-up {med['sep'] / med['fused']:.2f}x, at most "
          f"{med['sep'] / floor_fused:.2f}x over these sockets")


if __name__ == "__main__":
    main()
