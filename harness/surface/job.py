"""The ``surface`` job: settings, shards, per-DAG parts, resume, and the merge into the published files.

A surface run lives in ``<run>/surface_job/``, a run directory of the
ordinary layout (``run.json`` with ``"kind": "surface"``, ``jobs_list.txt``,
``state/``, ``logs/``, ``outputs/``), so the harness's workers run it
unchanged: ``local`` (this action), ``auto`` workers (``RUN_DIR=<run>/surface_job
bash run_experiment.sh auto``) and SLURM (``surface --slurm``). A shard is a
slice of DAGs; each DAG's part (every method's successes and mean cost per
cell) is written atomically to ``outputs/dag_NNNNNN.json`` and verified, so a
killed run redoes only unfinished DAGs and any number of workers writes the
same parts. ``merge`` assembles ``<run>/surface/`` (``docs/surface.md``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import time
from dataclasses import dataclass, field

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_json, atomic_write_text, dumps_compact

from ..runjson import read_run_json
from ..shards import RUN_SHARD, FileCheck, compress_ints

KIND = "surface"
JOB_DIR = "surface_job"
PART_FORMAT = 2  # 2: a part carries the sha256 of its content (parts of format 1 are recomputed)


@dataclass
class SurfaceShard:
    """One shard of a surface run: a slice of DAGs (every method, cell and trial of each)."""

    shard: int
    dags: list[int]
    n_cells: int
    n_trials: int
    n_methods: int
    fingerprint: str
    out_dir: str = "outputs"
    progress_file: str | None = None
    method_names: list[str] = field(default_factory=list)  # the run's methods (a part has each of them)

    @property
    def shard_id(self) -> str:
        return f"s{self.shard:05d}"

    def units_per_dag(self) -> int:
        return self.n_cells * self.n_trials * self.n_methods

    def relative_to(self, run_dir: str) -> SurfaceShard:
        return dataclasses.replace(
            self, out_dir=os.path.join(run_dir, self.out_dir),
            progress_file=os.path.join(run_dir, self.progress_file) if self.progress_file else None,
        )  # fmt: skip

    def part(self, dag: int, out_dir: str | None = None) -> str:
        return os.path.join(out_dir or self.out_dir, f"dag_{dag:06d}.json")

    def verify(self, out_dir: str | None = None, quick: bool = False) -> dict[int, FileCheck]:
        """Every part checked in full (``quick`` is the same: a part is one small JSON document)."""
        return {d: check_part(self.part(d, out_dir), d, self.fingerprint, self.counts()) for d in self.dags}

    def counts(self) -> dict:
        return {"n_cells": self.n_cells, "n_trials": self.n_trials, "n_methods": self.n_methods,
                "methods": list(self.method_names)}  # fmt: skip

    def command(self, python: str) -> str:
        argv = [python, RUN_SHARD, "--surface", "--shard", str(self.shard), "--dags", compress_ints(self.dags)]
        return " ".join(shlex.quote(a) for a in argv)

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @staticmethod
    def from_json(obj: dict) -> SurfaceShard:
        return SurfaceShard(**obj)


def _is_count(x: object, n: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= n


def _is_cost(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _matrix_problem(m: object, n_cells: int, ok) -> str:
    if not isinstance(m, list) or not m or not all(isinstance(r, list) and len(r) == len(m[0]) for r in m):
        return "not a matrix"
    if len(m) * len(m[0]) != n_cells:
        return f"{len(m)}x{len(m[0])} cells, expected {n_cells}"
    bad = [x for r in m for x in r if not ok(x)]
    return f"value {bad[0]!r} out of range" if bad else ""


def part_problem(doc: object, dag: int, fingerprint: str, counts: dict | None = None) -> str:
    """Why a parsed part is not this DAG's part of this run ('' when it is)."""
    if not isinstance(doc, dict) or doc.get("format") != PART_FORMAT:
        return "unexpected records"
    if doc.get("fingerprint") != fingerprint:
        return "another run's part (fingerprint differs)"
    if doc.get("dag_index") != dag:
        return f"the part of DAG {doc.get('dag_index')!r}, not of DAG {dag}"
    if not isinstance(doc.get("problem_id"), str) or not isinstance(doc.get("n_nodes"), int):
        return "no problem_id or n_nodes"
    if counts is None:
        return ""
    n = counts["n_trials"]
    if doc.get("n_trials") != n:
        return f"n_trials {doc.get('n_trials')!r}, expected {n}"
    methods = doc.get("methods")
    if not isinstance(methods, dict) or len(methods) != counts["n_methods"]:
        return f"{len(methods) if isinstance(methods, dict) else 'no'} methods, expected {counts['n_methods']}"
    if counts.get("methods") and sorted(methods) != sorted(counts["methods"]):
        return f"methods {sorted(methods)}, expected {sorted(counts['methods'])}"
    for name, m in methods.items():
        if not isinstance(m, dict):
            return f"method {name!r}: not an object"
        for key, ok in (("successes", lambda x: _is_count(x, n)), ("mean_cost", _is_cost)):
            why = _matrix_problem(m.get(key), counts["n_cells"], ok)
            if why:
                return f"method {name!r}: {key}: {why} (counts within 0..{n} trials)"
    return ""


def check_part(path: str, dag: int, fingerprint: str, counts: dict | None = None) -> FileCheck:
    """A DAG's part is done when it parses, names this DAG and this run's settings, and its counts fit.

    ``counts`` (cells, trials, methods of the run): every success count is an
    integer in 0..n_trials, every mean cost a finite number >= 0, every
    matrix has the run's cells.
    """
    if not os.path.exists(path):
        return FileCheck(False, "missing")
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.loads(fh.read(), parse_constant=_no_constant)
    except (OSError, ValueError):
        return FileCheck(False, "truncated or not JSON")
    problem = part_problem(doc, dag, fingerprint, counts)
    if problem:
        return FileCheck(False, problem)
    if doc.get("sha256") != part_sha256(doc):
        return FileCheck(False, "edited (its content differs from its sha256)")
    return FileCheck(True, "", n_lines=1)


def part_sha256(doc: dict) -> str:
    """The sha256 of a part's content (every field but ``sha256``), compact JSON with sorted keys."""
    import hashlib

    body = {k: v for k, v in doc.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


@dataclass
class SurfaceConfig:
    """Everything that changes a surface (its fingerprint is the hash of :meth:`settings`)."""

    pool_path: str
    pool_sha256: str
    dags: list[int]
    methods: list[str]
    budgets: list[float]
    deadlines: list[float]
    n_trials: int
    seed: int
    cost_mode: str
    latency_dist: str
    prices: dict | None
    default_price_model: str | None
    mcpp: dict
    further: dict
    planning: dict
    execution_rules: str
    dataset: str
    model_ids: list[str] = field(default_factory=list)

    def settings(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("dataset")
        d.pop("model_ids")
        return d

    def fingerprint(self) -> str:
        from ..config import settings_fingerprint

        return settings_fingerprint(self.settings())

    def run_settings(self):
        from ..shard_runner import run_settings

        return run_settings(seed=self.seed, cost_mode=self.cost_mode, latency_dist=self.latency_dist,
                            prices=self.prices, default_price_model=self.default_price_model, mcpp=self.mcpp,
                            further=self.further, planning=self.planning, execution_rules=self.execution_rules,
                            methods=self.methods)


def resolve_surface(env=None) -> tuple[SurfaceConfig, object]:
    """(the surface settings, the run configuration): every setting read and checked before any work."""
    from simulator.costs.arrays import dag_arrays
    from simulator.costs.nominal import nominal_budget
    from simulator.pools.pool import load_pool

    from .. import variables
    from ..config import resolve_config
    from .axes import DEADLINES, MONEY_BUDGETS, TOKEN_HIGH, TOKEN_LOW, parse_axis

    env = dict(os.environ if env is None else env)
    v = variables.check_environment(env, "surface")
    for name in ("SURFACE_BUDGETS", "SURFACE_DEADLINES"):  # set but empty: refused (unset means the default)
        if name in env and not str(env[name]).strip():
            parse_axis(env[name], name)
    budgets_text = v["SURFACE_BUDGETS"]
    deadlines = parse_axis(v["SURFACE_DEADLINES"] or DEADLINES, "SURFACE_DEADLINES")
    if budgets_text:
        budgets = parse_axis(budgets_text, "SURFACE_BUDGETS")
    from simulator.methods import resolve_methods

    # the methods' names and variants follow the grid's rules, refused under their own name; the job has no grid
    # (its axes are its own), so no nominal scale is needed to prepare it
    cfg = resolve_config(env, methods=resolve_methods(v["SURFACE_METHODS"], "SURFACE_METHODS (environment)"),
                         grid=False)
    if not budgets_text:
        if cfg.cost_mode == "output_money_cost_mean":
            budgets = parse_axis(MONEY_BUDGETS, "SURFACE_BUDGETS")
        else:
            full = load_pool(cfg.pool_path, indices=cfg.dags)
            setting = cfg.cost_setting()
            noms = [nominal_budget(dag_arrays(full, i, setting), f"DAG {full[i].index}: ") for i in range(len(full))]
            lo, hi = TOKEN_LOW * min(noms), TOKEN_HIGH * max(noms)
            budgets = parse_axis(f"{lo!r}:{hi!r}:100", "SURFACE_BUDGETS")
    from simulator.engine.registry import split_method_list

    named = split_method_list(v["SURFACE_METHODS"])  # the order given (sets expand in the registry's order)
    methods = sorted(cfg.methods, key=lambda m: (named.index(m) if m in named else len(named), cfg.methods.index(m)))
    return SurfaceConfig(
        pool_path=cfg.pool_path, pool_sha256=cfg.pool_sha256, dags=list(cfg.dags), methods=methods,
        budgets=budgets, deadlines=deadlines, n_trials=cfg.n_trials, seed=cfg.seed, cost_mode=cfg.cost_mode,
        latency_dist=cfg.latency_dist, prices=cfg.prices, default_price_model=cfg.default_price_model,
        mcpp=dict(cfg.mcpp), further=dict(cfg.further), planning=dict(cfg.planning),
        execution_rules=cfg.execution_rules, dataset=cfg.run_name, model_ids=list(cfg.pool_models),
    ), cfg  # fmt: skip


def prepare_surface(run_dir: str, cfg: SurfaceConfig, run_cfg, dags_per_shard: int | None = None) -> str:
    """Write ``<run>/surface_job/`` (run.json, jobs_list.txt); refuse a directory prepared with other settings."""
    job = os.path.join(run_dir, JOB_DIR)
    path = os.path.join(job, "run.json")
    fp = cfg.fingerprint()
    if os.path.exists(path):
        old = read_run_json(path)
        if old.get("fingerprint") != fp:
            diff = sorted(k for k in set(old.get("settings", {})) | set(cfg.settings())
                          if old.get("settings", {}).get(k) != cfg.settings().get(k))  # fmt: skip
            raise ConfigError(f"{job}: a surface with different settings is there ({', '.join(diff)} differ); "
                              "use another RUN_NAME, or move that directory away")  # fmt: skip
    k = dags_per_shard or max(1, min(10, len(cfg.dags) // 8 or 1))
    shards = [
        SurfaceShard(shard=n, dags=cfg.dags[s : s + k], n_cells=len(cfg.budgets) * len(cfg.deadlines),
                     n_trials=cfg.n_trials, n_methods=len(cfg.methods), fingerprint=fp, method_names=list(cfg.methods),
                     progress_file=os.path.join("state", f"s{n:05d}.progress"))
        for n, s in enumerate(range(0, len(cfg.dags), k))
    ]  # fmt: skip
    os.makedirs(os.path.join(job, "outputs"), exist_ok=True)
    os.makedirs(os.path.join(job, "state"), exist_ok=True)
    atomic_write_text(os.path.join(job, "jobs_list.txt"), "".join(s.command(run_cfg.python) + "\n" for s in shards))
    doc = {"kind": KIND, "format": PART_FORMAT, "fingerprint": fp, "settings": cfg.settings(),
           "config": dataclasses.asdict(cfg), "shards": [s.to_json() for s in shards]}  # fmt: skip
    atomic_write_json(path, doc)
    return job


def load_job(job_dir: str) -> tuple[SurfaceConfig, list[SurfaceShard]]:
    """The job's settings and shards; one line (not a traceback) when there is no job or its run.json is bad."""
    path = os.path.join(job_dir, "run.json")
    if not os.path.exists(path):
        raise ConfigError(f"{job_dir}: no surface job here (no run.json); compute one first with "
                          "`bash run_experiment.sh surface` (same RUN_NAME / RESULTS_ROOT, or RUN_DIR)")  # fmt: skip
    doc = read_run_json(path)
    try:
        if doc.get("kind") != KIND:
            raise KeyError("kind")
        cfg = SurfaceConfig(**doc["config"])
        return cfg, [SurfaceShard.from_json(s).relative_to(job_dir) for s in doc["shards"]]
    except (KeyError, TypeError, AttributeError):
        raise ConfigError(f"{path}: not the run.json of a surface job (edited or of another kind); "
                          "move the directory away and compute the surface again") from None


def run_surface_shard(shard: int, log=print) -> int:
    """Compute every unverified DAG part of shard ``shard`` of the job in the working directory."""
    from simulator.pools.pool import load_pool
    from simulator.surface.compute import method_surface

    from ..shard_runner import ProgressFile, check_pool_sha256, scrub_environment

    scrub_environment()
    t0 = time.time()
    cfg, shards = load_job(os.getcwd())
    spec = shards[shard]
    units = spec.units_per_dag()
    progress = ProgressFile(spec.progress_file, spec.shard_id, units * len(spec.dags))
    check_pool_sha256(cfg.pool_path, cfg.pool_sha256)
    todo = []
    for d in spec.dags:
        found = check_part(spec.part(d), d, spec.fingerprint, spec.counts())
        if not found.ok:
            if found.problem != "missing":
                log(f"surface shard {spec.shard_id}: {spec.part(d)}: {found.problem}; recomputing it")
            todo.append(d)
    progress.done = units * (len(spec.dags) - len(todo))
    progress.write(force=True)
    settings = cfg.run_settings()
    planning_pool = load_pool(cfg.planning["pool"], indices=todo) if cfg.planning.get("pool") and todo else None
    pool = load_pool(cfg.pool_path, indices=todo) if todo else None
    for pos, d in enumerate(todo):
        methods = {}
        for method in cfg.methods:
            ms = method_surface(pool, pos, method, cfg.budgets, cfg.deadlines, list(range(cfg.n_trials)), settings,
                                planning_pool=planning_pool, progress=progress.add)  # fmt: skip
            methods[method] = {"route": ms.route, "successes": ms.successes.tolist(),
                               "mean_cost": ms.mean_cost.tolist(), "stats": ms.stats}  # fmt: skip
        st = pool[pos]
        part = {"format": PART_FORMAT, "fingerprint": spec.fingerprint, "dag_index": d, "problem_id": st.problem_id,
                "n_nodes": st.n_nodes, "n_trials": cfg.n_trials, "methods": methods}  # fmt: skip
        part["sha256"] = part_sha256(part)
        atomic_write_text(spec.part(d), dumps_compact(part) + "\n")
        progress.dags_done += 1
        progress.write(force=True)
    log(f"surface shard {spec.shard_id}: {len(spec.dags)} DAG(s) ({len(todo)} computed), {time.time() - t0:.1f} s")
    return 0


__all__ = ["SurfaceShard", "SurfaceConfig", "resolve_surface", "prepare_surface", "run_surface_shard"]


def surface_shard_main(argv: list[str]) -> int:
    """``run_shard.py --surface --shard N --dags ...`` (the job line; run in the job directory)."""

    from ..cli_util import run_cli

    ap = cliargs.ArgumentParser(prog="run_shard.py --surface")
    ap.add_argument("--shard", type=int, required=True)
    ap.add_argument("--dags", default="", help="the shard's DAGs (for the reader; run.json is authoritative)")
    a = ap.parse_args(argv)
    return run_cli(lambda: run_surface_shard(a.shard))
