#!/usr/bin/env python3
"""Peak memory of ``python -m simulator simulate`` against the trial count.

``simulate`` once kept one Python dict per trial (1e6 trials = 1.2 GB, 1e8
killed by the kernel without a message). It now aggregates as it goes, so
its peak resident set should not depend on the number of trials. This
benchmark runs the command in a fresh child process per trial count and
reads the child's own peak RSS from ``os.wait4`` (``ru_maxrss``, KiB on
Linux), so each number belongs to one run only.

    python -m benchmarks.bench_memory                      # 1e3, 1e5, 1e7 trials
    python -m benchmarks.bench_memory --trials 1000 100000 # quicker

Sequential baseline, DAG 0 of the example pool, nominal budget and
deadline, one compiled thread (NUMBA_NUM_THREADS=1). Writes
benchmarks/results_memory.json.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from simulator.base import cliargs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POOL = os.path.join(ROOT, "examples", "example_pool.jsonl")
OUT = os.path.join(ROOT, "benchmarks", "results_memory.json")


def measure(trials: int, dag: int, method: str) -> dict:
    """Run one ``simulate`` in a child reaped by ``os.wait4``: its peak RSS (MiB), wall time,
    summary. Output goes to a file, not a pipe, so a large summary cannot block the child."""
    cmd = [sys.executable, "-m", "simulator", "simulate", "--pool", POOL, "--dag", str(dag),
           "--budget-ratio", "1", "--deadline-ratio", "1", "--method", method,
           "--trials", str(trials), "--seed", "0", "--json"]
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    out_path = os.path.join(ROOT, "benchmarks", f".bench_memory_{os.getpid()}.out")
    t0 = time.perf_counter()
    with open(out_path, "wb") as out_f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out_f, stderr=subprocess.PIPE)
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # tell Popen it is reaped
    wall = time.perf_counter() - t0
    try:
        with open(out_path, encoding="utf-8") as f:
            text = f.read()
    finally:
        os.unlink(out_path)
    if proc.returncode != 0:
        raise RuntimeError(f"simulate failed ({proc.returncode}): {err.decode()[-500:]}")
    summary = json.loads(text)
    return {"trials": trials, "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "wall_sec": round(wall, 2), "summary": summary}


def main() -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, nargs="+", default=[1000, 100_000, 10_000_000])
    ap.add_argument("--dag", type=int, default=0)
    ap.add_argument("--method", default="sequential")
    ap.add_argument("--out", type=cliargs.output_path(), default=OUT)
    args = ap.parse_args()
    rows = []
    for n in args.trials:
        row = measure(n, args.dag, args.method)
        rows.append(row)
        print(f"{n:>12,d} trials: peak RSS {row['peak_rss_mib']:8.1f} MiB, {row['wall_sec']:8.1f} s",
              flush=True)
    base = rows[0]["peak_rss_mib"]
    for row in rows:
        row["rss_ratio_to_first"] = round(row["peak_rss_mib"] / base, 3)
    result = {
        "what": "peak RSS of `python -m simulator simulate` (fresh child per row, os.wait4 ru_maxrss)",
        "pool": "examples/example_pool.jsonl", "dag": args.dag, "method": args.method,
        "budget_ratio": 1, "deadline_ratio": 1, "numba_threads": 1,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "load_avg_1min": round(os.getloadavg()[0], 2)},
        "rows": rows,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
