#!/usr/bin/env python3
"""torch.distributed's NCCL all-reduce in bench/nccl_allreduce's setting, for comparison.

--np ranks as --np processes sharing GPU 0, each with its own NCCL_HOSTID (so NCCL treats them
as separate hosts and does not refuse two ranks on one GPU), meeting through a file:// init
method. For each size from --min_bytes to --max_bytes (times --factor, then --max_bytes itself)
rank 0 prints nccl-tests' columns, as bench/nccl_allreduce does: the time of one blocking
all-reduce (dist.all_reduce, then torch.cuda.synchronize) averaged over --iters after
--warmup, algbw = bytes / time, busbw = algbw * 2(n-1)/n, and #wrong (the first and last
elements of a fresh all-reduce checked against the sum of every rank's value).

  python3 tools/gpu/torch_allreduce.py --np=2 --min_bytes=8 --max_bytes=268435456 --iters=20

Exit status: 0 when every rank finished and nothing was wrong; 1 when a rank failed (its
message names it); 3 when torch or a CUDA GPU is missing (the message says which).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, default=2, help="ranks, each a process on GPU 0")
    p.add_argument("--min_bytes", type=int, default=8, help="smallest message (f32)")
    p.add_argument("--max_bytes", type=int, default=256 << 20, help="largest message")
    p.add_argument("--factor", type=int, default=4, help="each size is the previous one times this")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    p.add_argument("--timeout_s", type=int, default=300, help="bound of the whole run")
    p.add_argument("--same_host", action="store_true",
                   help="leave NCCL_HOSTID alone (NCCL then refuses two ranks on one GPU)")
    # Internal: a rank process, and the file its ranks meet through.
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--init_file", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if (a.np < 1 or a.min_bytes < 4 or a.min_bytes % 4 or a.max_bytes < a.min_bytes
            or a.max_bytes % 4 or a.factor < 2 or a.warmup < 0 or a.iters < 1):
        p.error("want --np >= 1, 4 <= --min_bytes <= --max_bytes (multiples of 4 bytes: f32), "
                "--factor >= 2, --warmup >= 0, --iters >= 1")
    return a


def sizes(min_bytes, max_bytes, factor):
    out = []
    s = min_bytes
    while s < max_bytes:
        out.append(s)
        s *= factor
    out.append(max_bytes)
    return out


def run_rank(a):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="file://" + a.init_file, rank=a.rank,
                            world_size=a.np, device_id=torch.device("cuda", 0))
    want = a.np * (a.np + 1) / 2.0
    nccl = torch.cuda.nccl.version()
    nccl = ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl)
    if a.rank == 0:
        print("# torch_allreduce: %d ranks on GPU 0 (of %d), f32 sum, blocking calls, "
              "warmup %d, iters %d, torch %s, NCCL %s"
              % (a.np, torch.cuda.device_count(), a.warmup, a.iters, torch.__version__,
                 nccl))
        print("# %12s %12s %6s %12s %12s %12s %7s"
              % ("size(B)", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"))
        sys.stdout.flush()
    buf = torch.empty(a.max_bytes // 4, dtype=torch.float32, device="cuda")
    wrong_total = 0
    for nbytes in sizes(a.min_bytes, a.max_bytes, a.factor):
        count = nbytes // 4
        t = buf[:count]
        t.fill_(a.rank + 1.0)
        for _ in range(a.warmup):
            dist.all_reduce(t)
            torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(a.iters):
            dist.all_reduce(t)
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / a.iters
        # dist.all_reduce works in place: check a fresh one.
        t.fill_(a.rank + 1.0)
        dist.all_reduce(t)
        ends = [t[0].item(), t[count - 1].item()]
        wrong = sum(1 for v in ends if v != want)
        wrong_total += wrong
        if a.rank == 0:
            algbw = nbytes / seconds / 1e9
            busbw = algbw * 2.0 * (a.np - 1) / a.np
            print("  %12d %12d %6s %12.2f %12.3f %12.3f %7d"
                  % (nbytes, count, "float", seconds * 1e6, algbw, busbw, wrong))
            sys.stdout.flush()
    dist.destroy_process_group()
    if wrong_total:
        print("torch_allreduce: rank %d received %d wrong elements" % (a.rank, wrong_total),
              file=sys.stderr)
        return 1
    return 0


def main(argv):
    a = parse_args(argv)
    if a.rank >= 0:
        try:
            return run_rank(a)
        except Exception as e:  # a rank's failure is reported by rank, never as a traceback
            print("torch_allreduce: rank %d of %d failed: %s: %s"
                  % (a.rank, a.np, type(e).__name__, e), file=sys.stderr)
            return 2
    try:
        import torch
    except ImportError as e:
        print("torch_allreduce: torch is not installed for %s (%s)" % (sys.executable, e),
              file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("torch_allreduce: torch %s sees no CUDA GPU (check the driver and "
              "CUDA_VISIBLE_DEVICES)" % torch.__version__, file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="torch_allreduce_") as tmp:
        init_file = os.path.join(tmp, "init")
        procs = []
        for rank in range(a.np):
            env = dict(os.environ)
            if not a.same_host:
                env["NCCL_HOSTID"] = "lockstep-torch-host-%d" % rank
            cmd = [sys.executable, os.path.abspath(__file__)] + argv + [
                "--rank=%d" % rank, "--init_file=" + init_file]
            procs.append(subprocess.Popen(cmd, env=env))
        # A failed rank's peers would wait for it until the timeout: they are killed at once.
        deadline = time.monotonic() + a.timeout_s + 10
        failed = 0
        running = list(procs)
        while running:
            for proc in list(running):
                rc = proc.poll()
                if rc is None:
                    continue
                running.remove(proc)
                if rc != 0:
                    failed += 1
                    for other in running:
                        other.kill()
            if running and time.monotonic() > deadline:
                print("torch_allreduce: the run passed --timeout_s=%d; killing the ranks still "
                      "running" % a.timeout_s, file=sys.stderr)
                for proc in running:
                    proc.kill()
            time.sleep(0.05)
        if failed:
            print("torch_allreduce: %d of %d ranks failed (their messages are above)"
                  % (failed, a.np), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
