#!/usr/bin/env python3
"""The simulated live driver's own cost: N episodes of two per-attempt baselines under the ``live`` rules.

Runs :func:`simulator.engine.live_episode.run_live_episode` for ``sequential_4`` and ``uniform`` on the example
pool's DAG 0 (budget 0.7 x nominal, the nominal deadline, seed 5, trials 0..N-1) and prints a digest of the
episodes' outcomes (success, makespan, cost) and the wall seconds. The Python policies are cheap, so the time is
the driver's (the :class:`~simulator.engine.live_core.LiveCore` it drives, its draws and its bookkeeping). To
compare two checkouts, alternate runs with each checkout first on the path::

    PYTHONPATH=/path/to/old python benchmarks/bench_live_driver.py 1000
    PYTHONPATH=. python benchmarks/bench_live_driver.py 1000

Equal digests say the two drove the same episodes.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import executor
    from executor.inputs import load_dag, make_workflow
    from simulator.base import cliargs
    from simulator.costs.nominal import nominal_budget, nominal_deadline
    from simulator.engine.live_episode import run_live_episode
    from simulator.engine.loop import MAX_EVENTS
    from simulator.engine.registry import LIVE_PER_ATTEMPT
    from simulator.simulate import policy_for

    ap = cliargs.ArgumentParser(prog="python -m benchmarks.bench_live_driver", description=__doc__.splitlines()[0])
    ap.add_argument("episodes", type=cliargs.integer(1), nargs="?", default=1000, help="episodes per method")
    args = ap.parse_args(argv)
    pool_path = str(Path(executor.__file__).resolve().parents[1] / "examples" / "example_pool.jsonl")
    pool, d = load_dag(pool_path, 0)
    wf = make_workflow(pool, d, pool_path, None, "", None, "token_cost_mean")
    budget, deadline = 0.7 * nominal_budget(wf.arr), nominal_deadline(wf.arr)
    h = hashlib.sha256()
    t0 = time.perf_counter()
    for method in ("sequential_4", "uniform"):
        policy = policy_for(method, None, None, wf.stats.model_ids, LIVE_PER_ATTEMPT)[0]
        for trial in range(args.episodes):
            r = run_live_episode(wf.arr, policy, budget, deadline, 5, 0, trial, max_events=MAX_EVENTS,
                                 per_attempt=True)
            h.update(repr((bool(r.success), round(r.makespan, 9), round(r.total_cost, 9))).encode())
    print(f"{h.hexdigest()[:16]} {time.perf_counter() - t0:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
