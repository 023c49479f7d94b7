"""1 vs 2 threads on MCPP decisions, on an idle machine and with another process holding one core.

Run by hand (never in the test suite; about 3-5 minutes on a 2-core machine)::

    python -m benchmarks.bench_threads                 # -> benchmarks/results_threads.json
    python -m benchmarks.bench_threads --write-readme  # also the section in benchmarks/README.md

The decisions are those of ``bench_scaling``'s threads part (the first
faithful decision of a synthetic layered DAG, width 4, 2048 candidates, M = 64
below 40 nodes and 8 from 40 nodes), for 4-model DAGs and also 1-model ones
(where a parallel pair loop gains least). Each case is timed with 1 and 2
threads, interleaved (1, 2, 1, 2, ...): on a shared machine only a side-by-side
ratio means something. "Loaded" runs the same with a busy process started by
this script (``python -c "while True: pass"``, normal priority) holding one
core for the whole measurement: the load a second job or another user's
benchmark puts on a 2-core machine. A speed-up below 1 there would mean that
asking for 2 threads makes a decision slower than one thread.
"""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numba

from simulator.base import cliargs

from .bench_scaling import threads_part
from .common import finish_run, log, measured_line, run_record

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results_threads.json"
START, END = "<!-- bench_threads:start -->", "<!-- bench_threads:end -->"


SPIN = "import time; t = time.perf_counter(); x = 0\nfor i in range(8_000_000): x += i * i\nprint(time.perf_counter() - t)"


def _spin(n_procs: int) -> float:
    """Seconds of the slowest of ``n_procs`` identical CPU-bound processes started together."""
    ps = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True) for _ in range(n_procs)]
    return max(float(p.communicate()[0]) for p in ps)


def machine_ceiling(reps: int) -> dict:
    """What 2 cores give 2 independent processes here: 2 x (time of one alone) / (time of two together).

    The same pure-Python loop in one process, then in two at once, interleaved. No
    shared memory, no synchronisation: a thread speed-up cannot beat this (on a
    virtual machine the two cores may share a physical core or its memory bandwidth).
    """
    ratios = []
    for _ in range(reps):
        one, two = _spin(1), _spin(2)
        ratios.append(2 * one / two)
    return {"speedup_median": float(sorted(ratios)[len(ratios) // 2]), "speedup_range": [min(ratios), max(ratios)]}


@contextmanager
def busy_core():
    """A process spinning on one core for the duration of the block."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)  # let the scheduler see it
        yield
    finally:
        p.kill()
        p.wait()


def markdown(res: dict) -> str:
    lines = [
        START,
        "## 1 vs 2 threads, idle and loaded (`bench_threads.py`)",
        "",
        "```bash",
        "python -m benchmarks.bench_threads --write-readme   # -> benchmarks/results_threads.json",
        "```",
        "",
        "1 -> 2 threads on faithful first decisions (cap 2048; interleaved runs, ratio = t1 / t2 per pair, "
        f"{res['args']['reps']} pairs per case), idle and with a busy process holding one core:",
        "",
        "| load | nodes | models | M | 1 thread ms | 2 threads ms | speed-up (median) | range |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for load in ("idle", "loaded"):
        for r in res[load]:
            lo, hi = r["speedup_range"]
            lines.append(
                f"| {load} | {r['nodes']} | {r['models']} | {r['M_measured']} | {r['t1_ms']:.1f} | {r['t2_ms']:.1f} "
                f"| {r['speedup_median']:.2f} | {lo:.2f}-{hi:.2f} |"
            )
    cb, ca = res.get("ceiling_before"), res.get("ceiling_after")
    if cb and ca:
        lines += ["", "The machine's own ceiling, 2 identical CPU-bound processes at once against one alone (2 x t1 / t2; "
                  "no sharing, no synchronisation), measured before and after the idle rows: "
                  f"x{cb['speedup_median']:.2f} (range {cb['speedup_range'][0]:.2f}-{cb['speedup_range'][1]:.2f}) and "
                  f"x{ca['speedup_median']:.2f} (range {ca['speedup_range'][0]:.2f}-{ca['speedup_range'][1]:.2f})."]  # fmt: skip
    lines += [
        "",
        measured_line(res) + " (the loaded rows add the busy process's 1.0). Reproduce: `python -m benchmarks.bench_threads --write-readme`.",
        END,
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5, 20, 40, 80])
    ap.add_argument("--models", type=int, nargs="+", default=[4, 1])
    ap.add_argument("--reps", type=int, default=3, help="interleaved 1-thread/2-thread pairs per case (3)")
    ap.add_argument("--m", type=int, default=None, help="simulations per pair (default: 64 below 40 nodes, else 8)")
    ap.add_argument("--out", type=cliargs.output_path(), default=str(OUT))
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)
    if numba.config.NUMBA_NUM_THREADS < 2:
        print("needs 2 numba threads (NUMBA_NUM_THREADS >= 2)", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    res = run_record(args)
    res["ceiling_before"] = machine_ceiling(args.reps)
    res["idle"] = threads_part(args.sizes, args.reps, log, args.models, args.m)
    res["ceiling_after"] = machine_ceiling(args.reps)
    log(f"machine ceiling (2 processes / 1): before x{res['ceiling_before']['speedup_median']:.2f}, "
        f"after x{res['ceiling_after']['speedup_median']:.2f}")  # fmt: skip
    with busy_core():
        res["loaded"] = threads_part(args.sizes, args.reps, lambda m: log("loaded " + m), args.models, args.m)
    finish_run(args, res, markdown, START, END, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
