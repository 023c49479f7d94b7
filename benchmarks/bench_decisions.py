"""The prediction surface's decisions of one trial, replayed alone: the kernel's CPU, fastest of N runs.

Run by hand::

    python -m benchmarks.bench_decisions capture --pool P --dag I [--trial T] --out decisions.pkl
    python -m benchmarks.bench_decisions replay decisions.pkl [--reps 5] [--track-cells N]

Why: a whole trial's CPU seconds move by several percent from run to run on
a shared machine, more than a kernel change of a few percent. ``capture``
runs one MCPP trial of the surface (the published 100 x 100 axes, 0.05-10 x
the DAG's nominal budget and deadline, log-spaced; M = 64, 2048
candidates) and keeps the inputs of every call of
``simulator.surface.decide.decide_cells_kernel``; ``replay`` runs each
captured decision ``--reps`` times (one core) and keeps its fastest run
(noise only ever adds time), and prints their sum with a digest of every
decision's chosen pairs: two trees that print the same digest decided the
same. Compare two trees by replaying one capture from each checkout,
alternating which goes first. ``replay`` also splits the kernel's time by
the decisions' number of cells (where a trial's time goes: the few
decisions near the root hold thousands of cells); ``--track-cells N``
replays with the per-cell counts kept up to N cells instead of
``decide.TRACK_CELLS`` (the same choices, other early stops).

The capture is a pickle this command writes for its own replay: keep it
local (loading a pickle runs code; never replay one from elsewhere).
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")  # one core, before numba loads

import hashlib  # noqa: E402
import pickle  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import simulator.surface.decide as decide  # noqa: E402
from simulator.base import cliargs  # noqa: E402
from simulator.base.errors import ConfigError, cli_entry  # noqa: E402
from simulator.costs.arrays import CostSetting, dag_arrays  # noqa: E402
from simulator.costs.nominal import nominal_budget, nominal_deadline  # noqa: E402
from simulator.pools.pool import load_pool  # noqa: E402
from simulator.simulate import policy_for  # noqa: E402
from simulator.surface.tree import mcpp_trial_cells  # noqa: E402

SEED = 42


def capture(pool_path: str, dag: int, trial: int, out: str) -> int:
    """Run the trial's tree and write every decision's kernel inputs to ``out``; their number."""
    pool = load_pool(pool_path)
    if not 0 <= dag < len(pool):
        raise ConfigError(f"{pool_path}: --dag {dag}: the pool has rows 0-{len(pool) - 1}")
    arr = dag_arrays(pool, dag, CostSetting())
    axis = np.geomspace(0.05, 10, 100)
    budgets, deadlines = axis * nominal_budget(arr, ""), axis * nominal_deadline(arr, "")
    policy, _ = policy_for("mc_portfolio_rollout", {"max_candidate_actions": 2048}, None, pool[dag].model_ids)
    kernel = decide.decide_cells_kernel
    calls = []

    def keep(arr_, bounds, dec, pairs, M, grid, best, track):
        calls.append((arr_, bounds, dec, pairs, M, grid, tuple(x.copy() for x in best), track))
        return kernel(arr_, bounds, dec, pairs, M, grid, best, track)

    decide.decide_cells_kernel = keep
    try:
        mcpp_trial_cells(arr, policy, budgets, deadlines, SEED, dag, trial)
    finally:
        decide.decide_cells_kernel = kernel
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(calls, f)
    os.replace(tmp, out)
    return len(calls)


#: upper ends of the decision sizes (cells) ``replay`` splits the kernel's time by
SIZE_BINS = (1, 2, 20, 100, 1024, 10**9)


def replay(path: str, reps: int, track_cells: int | None = None) -> tuple[float, str, int, dict]:
    """(the decisions' fastest kernel seconds summed, the digest of their choices, their number, and by
    decision size (the upper end of its bin in ``SIZE_BINS``): [decisions, seconds])."""
    with open(path, "rb") as f:
        calls = pickle.load(f)  # noqa: S301 -- written by ``capture`` on this machine (module docstring)
    first = calls[0]
    decide.decide_cells_kernel(*first[:6], (first[6][0].copy(), first[6][1].copy()), first[7])  # compile / load
    digest = hashlib.sha256()
    total = 0.0
    by_size = {hi: [0, 0.0] for hi in SIZE_BINS}
    for arr, bounds, dec, pairs, M, grid, best, track in calls:
        cells = best[0].shape[0]
        if track_cells is not None:
            track = cells <= track_cells
        fastest = np.inf
        for _ in range(reps):
            best_w, best_p = best[0].copy(), best[1].copy()
            t0 = time.perf_counter()
            decide.decide_cells_kernel(arr, bounds, dec, pairs, M, grid, (best_w, best_p), track)
            fastest = min(fastest, time.perf_counter() - t0)
        digest.update(best_w.tobytes())
        digest.update(best_p.tobytes())
        total += fastest
        size = by_size[next(hi for hi in SIZE_BINS if cells <= hi)]
        size[0] += 1
        size[1] += fastest
    return total, digest.hexdigest()[:16], len(calls), by_size


@cli_entry
def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(prog="python -m benchmarks.bench_decisions", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    cap = sub.add_parser("capture", help="run one trial's tree and keep its decisions")
    cap.add_argument("--pool", type=cliargs.input_path(), required=True)
    cap.add_argument("--dag", type=int, required=True)
    cap.add_argument("--trial", type=int, default=0)
    cap.add_argument("--out", type=cliargs.output_path(), required=True)
    rep = sub.add_parser("replay", help="replay captured decisions, fastest of --reps runs each")
    rep.add_argument("capture", type=cliargs.input_path())
    rep.add_argument("--reps", type=int, default=5)
    rep.add_argument("--track-cells", type=int, default=None,
                     help=f"keep per-cell counts up to this many cells (default: the capture's, {decide.TRACK_CELLS})")
    a = ap.parse_args(argv)
    if a.what == "capture":
        n = capture(a.pool, a.dag, a.trial, a.out)
        print(f"{n} decisions -> {a.out}")
        return 0
    if a.reps < 1:
        raise ConfigError(f"--reps {a.reps}: at least 1")
    if not os.path.isfile(a.capture):
        raise ConfigError(f"{a.capture}: no such file (write one with `capture`)")
    if a.track_cells is not None and a.track_cells < 0:
        raise ConfigError(f"--track-cells {a.track_cells}: at least 0")
    total, digest, n, by_size = replay(a.capture, a.reps, a.track_cells)
    print(f"kernel {total:.3f} s (fastest of {a.reps}) over {n} decisions, choices digest {digest}")
    lo = 1
    for hi, (count, seconds) in by_size.items():
        span = f">= {lo}" if hi == SIZE_BINS[-1] else f"{lo}" if hi == lo else f"{lo}-{hi}"
        print(f"  {span} cells: {count} decisions, {seconds:.3f} s ({seconds / max(total, 1e-12):.1%})")
        lo = hi + 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
