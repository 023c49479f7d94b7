"""Run one shard: simulate each DAG of the slice and write its records atomically.

Used by ``run_shard.py`` (the job line). Every setting comes from the
:class:`~harness.shards.ShardSpec` (the command line); the ``MC_PORTFOLIO_*``
and ``PLANNING_*`` variables are removed from the environment first, so
nothing can silently read them. A DAG whose output file verifies is skipped;
anything else (missing, truncated, partial) is recomputed and replaced by an
atomic rename, so a kill at any moment loses at most the DAG in progress.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from simulator.base.errors import ConfigError, PoolError
from simulator.base.io_utils import atomic_write_json, atomic_write_text, dumps_compact
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.limits import BUDGET, DEADLINE
from simulator.costs.nominal import nominal_budget, nominal_deadline
from simulator.methods import is_baseline, uses_planning
from simulator.pools.pool import load_pool
from simulator.simulate import RunSettings, simulate_dag_budget

from .grid import RATIO
from .methods import SUITE_SEP
from .shards import ShardSpec, part_header

ENV_PREFIXES = ("MC_PORTFOLIO_", "PLANNING_")


def scrub_environment() -> None:
    """Workers take settings from their command line only (never from the environment)."""
    for k in list(os.environ):
        if k.startswith(ENV_PREFIXES):
            del os.environ[k]


class ProgressFile:
    """Throttled JSON progress for the orchestrator's heartbeat and progress bars."""

    def __init__(self, path: str | None, shard: str, total: int, period: float = 1.0) -> None:
        self.path, self.shard, self.total, self.period = path, shard, total, period
        self.done = 0
        self.dags_done = 0
        self._last = 0.0

    def add(self, n: int) -> None:
        self.done += int(n)
        self.write()

    def write(self, force: bool = False) -> None:
        if not self.path:
            return
        now = time.time()
        if not force and now - self._last < self.period:
            return
        self._last = now
        atomic_write_json(
            self.path,
            {"shard": self.shard, "done": self.done, "total": self.total, "dags_done": self.dags_done,
             "time": now, "pid": os.getpid()},
            indent=None,
            fsync=False,  # progress only (rewritten every second): no fsync, which waits for the disk
        )  # fmt: skip


def _nominal(fn: Callable, arr, where: str, required: bool) -> float | None:
    """The nominal scale; None (not an error) when the grid does not need it and it is undefined."""
    try:
        return fn(arr, where)
    except ConfigError:
        if required:
            raise
        return None


def simulate_dag(pool, pos: int, spec: ShardSpec, settings: RunSettings, planning_pool, progress) -> list[dict]:
    """All records of one DAG of the shard, with the cell fields, in a fixed order."""
    st = pool[pos]
    dag = int(st.index)
    where = f"DAG {dag} (problem {st.problem_id!r}): "
    arr = dag_arrays(pool, pos, settings.cost)
    nb = _nominal(nominal_budget, arr, where, spec.budget.kind == RATIO)
    nd = _nominal(nominal_deadline, arr, where, any(d.kind == RATIO for d in spec.deadlines))
    budget = spec.budget.realize(nb, BUDGET)
    cells = spec.cells()
    cell_deadline = [c.deadline.realize(nd, DEADLINE) for c in cells]
    unique_deadlines = list(dict.fromkeys(cell_deadline))
    trials = list(range(spec.n_trials))
    runs: list[tuple[str | None, list[dict]]] = [
        (None, simulate_dag_budget(pool, pos, budget, unique_deadlines, spec.methods, trials, settings,
                                   planning_pool=planning_pool, progress=progress))
    ]  # fmt: skip
    baselines = [m for m in spec.methods if is_baseline(m)]
    for model in spec.baseline_suite:
        if not baselines:
            break
        s_m = dataclasses.replace(settings, cost=dataclasses.replace(settings.cost, legacy_model=model))
        runs.append((model, simulate_dag_budget(pool, pos, budget, unique_deadlines, baselines, trials, s_m,
                                                progress=progress)))  # fmt: skip
    label_order = {lab.label: i for i, lab in enumerate(spec.labels())}
    # the cell fields of a record, computed once per cell (not once per record)
    cell_fields = [
        {"cell": c.cell_id, "budget_group": spec.group, "budget_input_type": c.budget.kind,
         "budget_axis_value": c.budget.value, "budget_nominal": nb, "deadline_input_type": c.deadline.kind,
         "deadline_axis_value": c.deadline.value, "deadline_nominal": nd}
        for c in cells
    ]  # fmt: skip
    out: list[tuple[tuple, dict]] = []
    for model, records in runs:
        for r in records:
            method = r["method"]
            label = method if model is None else f"{method}{SUITE_SEP}{model}"
            order = label_order[label]
            for ci in range(len(cells)):
                if cell_deadline[ci] != r["deadline"]:
                    continue
                rec = dict(r)
                rec["method"] = label
                rec.update(cell_fields[ci])
                rec["base_method"] = method
                rec["baseline_model"] = model
                out.append(((ci, order, rec["exec_trial"]), rec))
    out.sort(key=lambda kv: kv[0])
    return [rec for _, rec in out]


def check_pool_checksum(spec: ShardSpec) -> None:
    check_pool_sha256(spec.pool, spec.pool_sha256)


def check_pool_sha256(pool: str, expected: str, what: str = "the run was prepared") -> None:
    """Refuse a pool file that changed since ``what`` (its sha256 is not ``expected``; '' checks nothing)."""
    if not expected:
        return
    import hashlib

    h = hashlib.sha256()
    try:
        with open(pool, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        raise PoolError("pool file not found", path=pool) from None
    if h.hexdigest() != expected:
        raise ConfigError(
            f"{pool}: the pool changed since {what} (sha256 {h.hexdigest()[:12]}..., "
            f"expected {expected[:12]}...); prepare a new run (or --force) instead of mixing pools"
        )


def load_pools(spec: ShardSpec, dags: list[int]):
    """(execution pool, planning pool or None) of a shard, holding only ``dags``.

    With the run's pool index (every run prepared since it exists) only the
    rows of ``dags`` are read, each checked against its digest; else the
    whole file is read and validated.
    """
    planning = spec.planning.get("pool") if uses_planning(spec.methods) else None
    if spec.pool_index:
        from .pool_index import load_indexed_rows, read_pool_index

        index = read_pool_index(spec.pool_index)
        pool = load_indexed_rows(index, spec.pool_index, "pool", spec.pool, dags, spec.pool_sha256)
        planning_pool = None
        if planning:
            if "planning_pool" in index:
                planning_pool = load_indexed_rows(index, spec.pool_index, "planning_pool", planning, dags)
            else:  # pragma: no cover - an index always has the planning pool's section when the run has one
                planning_pool = load_pool(planning, indices=dags)
        return pool, planning_pool
    pool = load_pool(spec.pool, indices=dags)
    planning_pool = load_pool(planning, indices=dags) if planning else None
    return pool, planning_pool


def run_settings(*, seed: int, cost_mode: str, latency_dist: str, prices: dict[str, float] | None,
                 default_price_model: str | None, mcpp: dict, further: dict, planning: dict, execution_rules: str,
                 methods: list[str]) -> RunSettings:
    """The simulator settings of a job's shard from the settings a grid shard and a surface job both carry
    (the planning pool only when a method plans)."""
    return RunSettings(
        seed=seed,
        cost=CostSetting(cost_mode=cost_mode, latency_dist=latency_dist, prices=prices,
                         default_price_model=default_price_model),
        mcpp=dict(mcpp),
        further=dict(further),
        execution_rules=execution_rules,
        planning=dict(planning) if uses_planning(methods) else {},
    )


def settings_of(spec: ShardSpec) -> RunSettings:
    """The simulator settings of a grid shard (every one from its command line)."""
    return run_settings(seed=spec.seed, cost_mode=spec.cost_mode, latency_dist=spec.latency_dist, prices=spec.prices,
                        default_price_model=spec.default_price_model, mcpp=spec.mcpp, further=spec.further,
                        planning=spec.planning, execution_rules=spec.execution_rules, methods=spec.methods)


def run_shard(spec: ShardSpec, log: Callable[[str], None] = print) -> dict:
    """Compute every unverified DAG of the shard; returns a summary dict."""
    scrub_environment()
    t0 = time.time()
    if not spec.pool_index:  # with the index each row read is checked against its digest (load_pools)
        check_pool_checksum(spec)
    check = spec.part_checker()
    fingerprint = spec.part_fingerprint()
    units = spec.units_per_dag()
    progress = ProgressFile(spec.progress_file, spec.shard_id, units * len(spec.dags))
    todo = []
    for d in spec.dags:
        found = check(spec.dag_output(d), d)
        if found.ok:
            progress.done += units
            progress.dags_done += 1
        else:
            if found.problem != "missing":
                log(f"shard {spec.shard_id}: {spec.dag_output(d)}: {found.problem}; recomputing it")
            todo.append(d)
    progress.write(force=True)
    reused = len(spec.dags) - len(todo)
    pool_s = 0.0
    if todo:
        t_pool = time.perf_counter()
        pool, planning_pool = load_pools(spec, todo)
        pool_s = time.perf_counter() - t_pool
        settings = settings_of(spec)
        for pos, d in enumerate(todo):
            start = progress.done
            records = simulate_dag(pool, pos, spec, settings, planning_pool, progress.add)
            path = spec.dag_output(d)
            text = "".join(dumps_compact(r) + "\n" for r in records)
            atomic_write_text(path, part_header(d, spec.group, fingerprint, text) + text)
            written = check(path, d)
            if not written.ok:  # a bug, not bad luck: never leave a wrong file behind
                os.unlink(path)
                raise RuntimeError(f"{path}: output failed verification ({written.problem})")
            progress.done = start + units
            progress.dags_done += 1
            progress.write(force=True)
    wall = time.time() - t0
    summary = {
        "shard": spec.shard_id,
        "dags": len(spec.dags),
        "computed": len(todo),
        "reused": reused,
        "records": units * len(spec.dags),
        "wall_s": round(wall, 3),
        "pool_read_s": round(pool_s, 4),
    }
    log(
        f"shard {spec.shard_id}: {len(spec.dags)} DAG(s) ({len(todo)} computed, {reused} already complete), "
        f"{summary['records']} records, {wall:.1f} s (reading the pool {pool_s:.4f} s)"
    )
    return summary
