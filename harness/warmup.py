"""Cold start of ``local`` on several workers: each kernel group compiled once, in parallel, before the shards.

On an empty numba cache every worker of a ``local`` run compiles every
kernel its methods need, one after the other (numba compiles under one lock
per process), and all workers compile the same ones at the same time: two
workers on two cores spend the compile time twice over for the time of one.
Here the run first starts one short process per *kernel group* of its
methods, all at once:

* ``baseline``: the compiled baselines (the trial loop, the engine);
* ``mcpp``: MCPP and its variants (the simulation kernel, the atomic launch);
* ``other``: every other method (the further baselines' kernels), warmed only
  when one of the groups above is cold.

Each process runs its group's methods on the first DAG of shard 0 for one
trial and the first deadline, through the shard's own code
(:func:`harness.shard_runner.simulate_dag`, the shard's settings and
environment), so it compiles exactly the signatures the shards will ask for;
MCPP plans with M = 1 and at most 8 candidates (values, not types: the same
compiled code, a fraction of the time). Its records are thrown away. Then
the workers start and load the compiled code from the cache. Nothing a run
records can change (compiled code is the same whichever process compiled
it); a warm-up that fails or exceeds :data:`LIMIT_S` only costs its time,
and the workers compile what is missing, as without it.

Skipped with one worker or one CPU, with ``SIMULATOR_PREWARM=0``, when the
groups' kernels are cached already, and when only one group is cold (one
worker compiles it as fast as a warm-up process would).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from simulator.base import prewarm

if TYPE_CHECKING:  # the run directory's module imports the simulator: only where it is used
    from .rundir import RunDir

#: longest time the workers wait for the warm-up
LIMIT_S = 300.0
#: cache index stems (``[package/]<module>.<function>``) that tell a group's kernels are compiled
GROUP_KERNELS: dict[str, tuple[str, ...]] = {
    "baseline": ("baselines/compiled.trial_range",),
    "mcpp": ("mcpp/kernel.run_pairs_serial", "engine/loop.launch_atomic"),
}
#: MCPP values that make the warm-up's decisions cheap (the types, hence the compiled code, are the run's)
CHEAP_MCPP = {"M": 1, "max_candidate_actions": 8}
#: the warm-up process: ``[python, *COMMAND, RUN_DIR, GROUP]`` with cwd = ROOT (the tree of the job lines; ``-m``
#: puts it first on the module path, so the warm-up compiles that tree's kernels)
COMMAND = ("-m", "harness.warmup")


def group_of_method(method: str, execution_rules: str) -> str:
    """The kernel group of ``method`` under the run's execution rules."""
    from simulator.cli.prewarm_groups import group_of
    from simulator.engine.registry import execution_of
    from simulator.methods import method_spec

    spec = method_spec(method)
    return group_of(spec, execution_of(spec, execution_rules)) or "other"


def groups_to_warm(methods: list[str], execution_rules: str) -> list[str]:
    """The groups a warm-up should compile for these methods (empty: no warm-up)."""
    present = list(dict.fromkeys(group_of_method(m, execution_rules) for m in methods))
    cold = [g for g in present if g in GROUP_KERNELS and not prewarm.cache_has(GROUP_KERNELS[g])]
    if not cold:
        return []
    todo = cold + (["other"] if "other" in present else [])
    return todo if len(todo) >= 2 else []


def warm_up(
    rd: RunDir, n_workers: int, env: dict, log: Callable[[str], None], python: tuple | None = None
) -> dict | None:
    """Compile the run's kernel groups in parallel before ``n_workers`` workers start; what it did, or None.

    ``python`` is the job lines' ``python .../run_shard.py`` pair (their interpreter and script; None: this
    interpreter and this checkout): the warm-up must compile the code the shards run.
    """
    if n_workers < 2 or not prewarm.enabled() or not rd.shards:
        return None
    from .shards import ShardSpec

    spec = rd.shard(0)
    if not isinstance(spec, ShardSpec):  # a prediction-surface job's shard: they compile as they go
        return None
    groups = groups_to_warm(spec.methods, spec.execution_rules)
    if not groups:
        return None
    python, root = (python[0], os.path.dirname(python[1])) if python else (sys.executable, str(prewarm.ROOT))
    log(f"local: cold numba cache: compiling the {', '.join(groups)} kernels once, in parallel, before the workers "
        "start (a few seconds, once per machine)")  # fmt: skip
    t0 = time.monotonic()
    procs = {
        g: subprocess.Popen([python, *COMMAND, rd.path, g], env=env, cwd=root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        for g in groups
    }
    failed = []
    for g, p in procs.items():
        try:
            _, err = p.communicate(timeout=max(1.0, LIMIT_S - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        if p.returncode != 0:
            last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            failed.append(f"{g} ({last[0][:200]})")
    seconds = time.monotonic() - t0
    log(f"local: cold numba cache: compiled the {', '.join(groups)} kernels in parallel in {seconds:.1f} s"
        + (f"; the workers compile the rest (failed: {'; '.join(failed)})" if failed else ""))  # fmt: skip
    return {"groups": groups, "seconds": round(seconds, 2), "failed": len(failed)}


def child_main(argv: list[str]) -> int:
    """The warm-up process of one group: its methods, first DAG of shard 0, one trial, records discarded."""
    run_dir, group = argv
    from .rundir import RunDir
    from .shard_runner import load_pools, settings_of, simulate_dag

    spec = RunDir(run_dir).shard(0)
    methods = [m for m in spec.methods if group_of_method(m, spec.execution_rules) == group]
    if not methods:
        return 0
    spec = dataclasses.replace(
        spec, methods=methods, dags=spec.dags[:1], n_trials=1, deadlines=spec.deadlines[:1], baseline_suite=[],
        mcpp={**spec.mcpp, **CHEAP_MCPP}, progress_file=None,
    )  # fmt: skip
    pool, planning_pool = load_pools(spec, spec.dags)
    simulate_dag(pool, 0, spec, settings_of(spec), planning_pool, lambda n: None)
    return 0


if __name__ == "__main__":
    from .cli_util import exit_now

    exit_now(child_main(sys.argv[1:]))  # the workers wait for this process: no interpreter teardown
