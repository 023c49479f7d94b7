"""What the cold-start helper (:mod:`simulator.base.prewarm`) compiles for ``python -m simulator simulate``.

``python -m simulator simulate ARGS`` starts, before its own imports, the
hidden command ``python -m simulator _prewarm ARGS`` (:func:`start`). The
helper parses and checks ARGS with the same code as the run
(:func:`simulator.cli.main.parse_simulate`) and compiles its group of the run's
kernels on a tiny DAG of the same models, for the argument types the run
passes (:func:`warm`). The groups are split so that both processes take
about as long:

* ``baseline`` (a compiled baseline): the helper compiles the engine's event
  step, its per-attempt launch (with the draws) and the no-progress check;
  the run compiles the state, the static plan and the trial loop around them.
* ``mcpp`` (MCPP and its variants): the helper compiles the simulation
  kernel (``run_pairs_serial`` and what it calls) by making one decision
  with the run's method, parameters and launch rule (its answer is thrown
  away); the run compiles the episode driver (the atomic launch ahead, while
  it waits) and the planner's bounds.

Other methods get no helper. Nothing starts on a warm cache (every helper
kernel has an index: :func:`simulator.base.prewarm.cache_has`). Measured in
``benchmarks/bench_coldstart.py``; ``tests/test_prewarm.py`` checks that a
run on the helper's cache compiles none of the group's kernels (the
signatures agree) and prints the same result.

Only the standard library is imported at the top: :func:`start` runs first.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.base import prewarm

#: the hidden command of ``python -m simulator`` that is the helper
COMMAND = "_prewarm"
#: cache file stems (``<subpackage>/<module>.<function>``) of every kernel a helper compiles
KERNEL_FILES = ("engine/loop.advance_arrays", "engine/loop.launch_per_attempt_arrays",
                "engine/loop.no_progress_reason_arrays", "mcpp/kernel.run_pairs_serial")  # fmt: skip


def start(argv: Sequence[str]) -> None:
    """Start the helper of ``python -m simulator ARGV`` if it is a ``simulate`` a helper can speed up."""
    if list(argv[:1]) != ["simulate"] or any(a in ("-h", "--help") for a in argv):
        return
    if prewarm.enabled() and not prewarm.cache_has(KERNEL_FILES):
        prewarm.launch([COMMAND, *argv[1:]])


def group_of(spec, ex) -> str | None:
    """The kernel group of a method (registry entry, execution rules), or None (no helper)."""
    if ex.compiled:
        return "baseline"
    if spec.settings_key == "mcpp":
        return "mcpp"
    return None


def waited_kernels(group: str | None) -> list:
    """The kernels of ``group`` that the helper compiles (and the run waits for)."""
    if group == "baseline":
        from simulator.engine import loop as engine

        return [engine.advance_arrays, engine.launch_per_attempt_arrays, engine.no_progress_reason_arrays]
    if group == "mcpp":
        from simulator.mcpp import kernel as mcpp_kernel

        return [mcpp_kernel.run_pairs_serial]
    return []


def _tiny_arrays(model_ids: Sequence[str]):
    """A 4-node DAG with empirical rows for ``model_ids`` (what a pool line becomes)."""
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.engine.testing import layered_dag
    from simulator.pools.pool import pool_from_objects

    return dag_arrays(pool_from_objects([layered_dag(1, n_nodes=4, models=tuple(model_ids))]), 0, CostSetting())


def _stems(kernels: list) -> list[str]:
    """Cache file stems (``<subpackage>/<module>.<function>``, the form of :func:`prewarm.cache_has`) of ``kernels``."""
    return [k.py_func.__module__.removeprefix("simulator.").replace(".", "/") + "." + k.py_func.__name__ for k in kernels]


def warm_baseline() -> None:
    """Compile the event step, the per-attempt launch and the no-progress check, in the order the trial
    loop needs them, for the arguments the engine's entries pass (``advance``, ``launch_per_attempt``,
    ``no_progress_reason``): the kernels themselves, not those entries (the run never calls them)."""
    import numpy as np

    from simulator.engine.loop import (
        N_CNT,
        N_INT_ROWS,
        advance_arrays,
        launch_per_attempt_arrays,
        no_progress_reason_arrays,
    )

    a = _tiny_arrays(("a", "b"))
    n, m = a.n, a.m
    scal, cnt, key = np.zeros(4), np.zeros(N_CNT, dtype=np.int64), np.zeros(1, dtype=np.uint64)
    ni, nf, attempt_no = np.zeros((N_INT_ROWS, n), dtype=np.int64), np.zeros((2, n)), np.zeros(n * m, dtype=np.int64)
    ints, cap, mask = np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(m, dtype=np.bool_)
    prewarm.compile_for(advance_arrays, n, a.child_ptr, a.child_idx, scal, cnt, ni, nf)
    prewarm.compile_for(launch_per_attempt_arrays, n, m, a.node_ids, a.available, a.row_ptr, a.rows, a.tmpl,
                        a.lat_dist, a.charge_is_latency, scal, cnt, key, ni, nf, attempt_no, ints, ints, cap,
                        ints)  # fmt: skip
    prewarm.compile_for(no_progress_reason_arrays, n, m, a.parent_ptr, a.available, a.tmpl, a.legacy, scal, ni, nf,
                        mask, True, cap)  # fmt: skip


def _stand_in_bounds(arr):
    """Planning bounds of the right types without compiling their kernels (the run compiles those)."""
    import numpy as np

    from simulator.mcpp.kernel import PlanBounds

    nm = (arr.n, arr.m)
    return PlanBounds(np.zeros(nm), np.zeros(nm), np.zeros(nm), np.zeros(nm, dtype=np.int64), np.zeros(nm), np.zeros(nm))


def warm_mcpp(method: str, params: dict, model_ids: Sequence[str], launch: str) -> None:
    """One decision of ``method`` on a tiny DAG of the run's models (compiles the simulation kernel)."""
    from simulator.engine.testing import first_view
    from simulator.mcpp import policy as mc_portfolio_policy
    from simulator.simulate import policy_for

    arr = _tiny_arrays(model_ids)
    mc_portfolio_policy.plan_bounds = _stand_in_bounds  # this process only compiles: its decision is thrown away
    policy, _ = policy_for(method, params, None, model_ids, launch)
    policy.reset(arr, 0, 0, 0)
    policy.act(first_view(arr, 5000.0, 200.0))


def warm(method: str, spec, ex, params: dict, model_ids: Sequence[str]) -> None:
    """The helper's work for a checked ``simulate`` run (nothing when its group is cached already)."""
    group = group_of(spec, ex)
    if group is None or prewarm.cache_has(_stems(waited_kernels(group))):
        return
    if group == "baseline":
        warm_baseline()
    else:
        warm_mcpp(method, params, model_ids, ex.launch)
