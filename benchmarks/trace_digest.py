"""A digest of the executor's traces on the virtual clock, timing fields removed: a refactor's behaviour check.

Runs the live executor (``agree``'s machinery: :func:`executor.agree.live_episodes`, an in-process loopback world
on a :class:`executor.clock.VirtualClock`) for ``sequential`` and MCPP's deterministic form, one run per seed
(the world's seed equal to the run's), at a fault-free cell where the budget binds and at a cell with injected
faults (500s and connection resets: the retry paths). Each trace is read back, every field
that measures the machine rather than the run is dropped (wall times, lags, planner milliseconds, per-try
timestamps, the trace id, the start time, the world's port, the checkout's path), and the rest is hashed. Two checkouts that follow the same rules
print the same digests.

Run (about a minute on an idle core)::

    python -m benchmarks.trace_digest            # 20 seeds
    python -m benchmarks.trace_digest --seeds 5

To measure an older checkout, run the same file with that checkout first on the path:
``PYTHONPATH=/path/to/old python benchmarks/trace_digest.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tempfile
from pathlib import Path

#: fields that measure the machine or the moment, not the run (dropped before hashing)
TIMING = {"wall_s", "planner_ms", "judge_wall_s", "trace_id", "started_utc", "max_lag_s", "cpu_wait_s", "slip",
          "lag", "loop_lag_s", "overhead_ms", "sent_at", "first_byte_at", "answered_at", "ended_at", "latency",
          "queued_s", "backoff_s", "censored_at", "try_log", "starvation",
          "base_url", "source"}  # the world's port and the checkout's path: not the run

METHODS = ("sequential", "mc_portfolio_rollout[sim_limit=1500]")
#: (name, budget ratio, deadline ratio, fault rates)
CELLS = (("budget_binds", 0.5, 1.5, None),
         # no 429: a Retry-After gate waits wall seconds, which no virtual clock can repeat
         ("faults", 1.0, 1.5, {"rate_500": 0.08, "rate_reset": 0.04}))


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in sorted(x.items()) if k not in TIMING
                and not any(w in k for w in ("wall", "lag", "cpu"))}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    if isinstance(x, float):
        return round(x, 9)
    return x


def digest_dir(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(path.glob("trial_*.jsonl")):
        for line in f.read_text().splitlines():
            if line.strip():
                h.update(json.dumps(_strip(json.loads(line)), sort_keys=True).encode())
                h.update(b"\n")
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    from executor.agree import live_episodes
    from executor.inputs import load_dag, make_workflow
    from executor.world import Faults
    from simulator.base import cliargs
    from simulator.costs.nominal import nominal_budget, nominal_deadline

    ap = cliargs.ArgumentParser(prog="python -m benchmarks.trace_digest", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=cliargs.integer(1), default=20, help="seeds per cell (default 20)")
    ap.add_argument("--dag", type=cliargs.integer(0), default=0, help="the example pool's row (default 0)")
    args = ap.parse_args(argv)
    import executor

    pool_path = str(Path(executor.__file__).resolve().parents[1] / "examples" / "example_pool.jsonl")
    pool, d = load_dag(pool_path, args.dag)
    wf = make_workflow(pool, d, pool_path, None, "", None, "token_cost_mean")
    B, D = nominal_budget(wf.arr), nominal_deadline(wf.arr)
    for cell, br, dr, faults in CELLS:
        for method in METHODS:
            with tempfile.TemporaryDirectory() as tmp:
                whole = hashlib.sha256()
                for seed in range(args.seeds):
                    out = Path(tmp) / f"s{seed}"
                    out.mkdir()
                    asyncio.run(live_episodes(wf, pool, method, br * B, dr * D, 1, scale=0.05, seed=seed,
                                              world_seed=seed, params={"M": 8}, concurrency=1, trace_dir=str(out),
                                              faults=None if faults is None else Faults(**faults)))
                    whole.update(digest_dir(out).encode())
            print(f"{cell:13s} {method:40s} {whole.hexdigest()[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
