"""Run configuration: the harness variables, resolved and validated before any work.

:func:`resolve_config` reads the environment ONCE (at ``prepare``), checks
everything that can be checked without simulating (grid syntax, methods,
cost mode, prices, index file, nominal scales of ratio grids, baseline suite
models, MCPP parameters, planning statistics) and returns a
:class:`RunConfig`. Every result-changing setting then travels in the job
lines and ``run.json``; workers never read the environment.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.settings import check_mcpp_model_names
from simulator.costs.arrays import CostSetting, dag_arrays
from simulator.costs.charges import load_price_table
from simulator.costs.nominal import nominal_budget, nominal_deadline, scale_by_ratio
from simulator.methods import method_label, method_spec, uses_planning, uses_settings
from simulator.pools.pool import Pool, load_index_file, load_pool

from . import variables
from .grid import NO_GRID, Grid, resolve_grid

HARNESS_MCPP_DEFAULTS = variables.HARNESS_MCPP_DEFAULTS
REPO = variables.REPO
DEFAULT_POOL = variables.DEFAULT_POOL
DEFAULT_RESULTS_ROOT = variables.DEFAULT_RESULTS_ROOT


def cpu_count() -> int:
    return variables.cores()


@dataclass
class RunConfig:
    """A validated run configuration (see :meth:`settings` for what changes results)."""

    run_name: str
    run_dir: str
    pool_path: str
    pool_sha256: str
    pool_rows: int
    pool_models: list[str]
    dags: list[int]
    n_trials: int
    grid: Grid
    cost_mode: str
    latency_dist: str
    prices: dict[str, float] | None
    default_price_model: str | None
    methods: list[str]
    baseline_suite: list[str]
    seed: int
    mcpp: dict[str, Any]
    planning: dict[str, Any]
    dags_per_shard: int
    execution_rules: str = "published"
    further: dict[str, Any] = field(default_factory=dict)  # resolved LOADER / Chernoff parameters, {} if unused
    python: str = field(default_factory=lambda: sys.executable or "python3")
    env_resolved: dict[str, str] = field(default_factory=dict)
    nominal_summary: dict[str, Any] = field(default_factory=dict)
    #: where the run's DAG rows are in the pool files (``harness.pool_index``; not a setting: no result depends on it)
    pool_index: dict[str, Any] = field(default_factory=dict)

    def cost_setting(self, legacy_model: str | None = None) -> CostSetting:
        return CostSetting(
            cost_mode=self.cost_mode,
            latency_dist=self.latency_dist,
            prices=self.prices,
            default_price_model=self.default_price_model,
            legacy_model=legacy_model,
        )

    def settings(self) -> dict[str, Any]:
        """Every setting that changes results (the run's fingerprint is its hash)."""
        return {
            "pool_sha256": self.pool_sha256,
            "dags": list(self.dags),
            "n_exec_trials": self.n_trials,
            "grid": self.grid.to_json(),
            "cost_mode": self.cost_mode,
            "latency_dist": self.latency_dist,
            "prices": self.prices,
            "default_price_model": self.default_price_model,
            "methods": list(self.methods),
            "baseline_suite": list(self.baseline_suite),
            "seed": self.seed,
            "mcpp": dict(self.mcpp),
            "planning": dict(self.planning),
            "execution_rules": self.execution_rules,
            **({"further": dict(self.further)} if self.further else {}),  # absent when unused: old runs keep their fingerprint
        }

    def fingerprint(self) -> str:
        return settings_fingerprint(self.settings())


def settings_fingerprint(settings: Mapping[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------


def resolve_further(env: Mapping[str, str]) -> dict[str, Any]:
    """LOADER_* / DEADLINE_* variables of the further baselines -> their resolved, recorded parameters."""
    from simulator.baselines.further.variants import resolve_further_params

    return resolve_further_params(env).to_json()


def resolve_mcpp(env: Mapping[str, str]) -> dict[str, Any]:
    """MC_PORTFOLIO_* variables -> the fully resolved, recorded MCPP parameters."""
    from simulator.mcpp.params import mcpp_params_from_env, resolve_params

    raw = {**HARNESS_MCPP_DEFAULTS, **mcpp_params_from_env(env)}
    try:
        return resolve_params(raw).record()
    except ConfigError as exc:
        raise ConfigError(f"MC_PORTFOLIO_* ({variables.SOURCE}): {exc}") from None


def resolve_planning(env: Mapping[str, str]) -> dict[str, Any]:
    """PLANNING_* variables -> ``RunSettings.planning`` (only the keys that are set)."""
    from simulator.costs.planning import validate_planning

    v = {name: variables.read(env, name) for name in variables.BY_NAME if name.startswith("PLANNING_")}
    out: dict[str, Any] = {}
    if v["PLANNING_POOL_PATH"]:
        out["pool"] = v["PLANNING_POOL_PATH"]
    for var, key in (
        ("PLANNING_NOISE_LATENCY_SIGMA", "noise_latency_sigma"),
        ("PLANNING_NOISE_COST_SIGMA", "noise_cost_sigma"),
        ("PLANNING_NOISE_LOGIT_SIGMA", "noise_logit_sigma"),
    ):
        if v[var] > 0:
            out[key] = v[var]
    if any(k.startswith("noise_") for k in out) or variables.is_set(env, "PLANNING_NOISE_SEED"):
        out["noise_seed"] = v["PLANNING_NOISE_SEED"]
    if not out:
        return {}
    validated = validate_planning(out)
    return {k: validated[k] for k in out}


def _select_dags(env: Mapping[str, str], pool_rows: int) -> list[int]:
    idx_file = variables.read(env, "USE_DAG_INDICES_FILE")
    if idx_file:
        dags = load_index_file(idx_file, pool_rows)  # non-empty, distinct, in range
        source = f"index file {idx_file} ({len(dags)} DAGs)"
    else:
        dags = list(range(pool_rows))
        source = f"the pool ({pool_rows} DAGs)"
    n = variables.read(env, "N_DAGS")
    if n is not None:
        if n > len(dags):
            raise ConfigError(f"N_DAGS={n} but {source} has only {len(dags)}")
        dags = dags[:n]
    return dags


def _parse_suite(env: Mapping[str, str], pool_models: list[str]) -> list[str]:
    text = variables.read(env, "BASELINE_SUITE") or ""
    if not text or text.lower() == "none":
        return []
    if text.lower() == "all":
        return list(pool_models)
    models = [s for s in text.replace(",", " ").split() if s]
    unknown = [m for m in models if m not in pool_models]
    if unknown:
        raise ConfigError(f"BASELINE_SUITE: model(s) {unknown} are not in the pool (models: {pool_models})")
    if len(set(models)) != len(models):
        raise ConfigError("BASELINE_SUITE lists a model twice")
    return models


def default_dags_per_shard(n_dags: int, methods: list[str]) -> int:
    """A shard should take minutes and there should be enough shards to keep every core busy.

    A shard process costs ~2-3 s to start (imports, compiled-code cache); an
    MCPP DAG takes seconds to minutes per (trial x deadline), a baseline DAG
    milliseconds. So: at least ~8 shards per core with MCPP (at most 10 DAGs
    each), ~4 per core for baselines only (at most 500 DAGs each).
    """
    if uses_planning(methods):  # Python policies (MCPP, the further baselines) take seconds per DAG
        return max(1, min(10, math.ceil(n_dags / (8 * cpu_count()))))
    return max(1, min(500, math.ceil(n_dags / (4 * cpu_count()))))


def resolve_config(env: Mapping[str, str] | None = None, check_dags: bool = True, *,
                   methods: list[str] | None = None, grid: bool = True) -> RunConfig:
    """Read and validate the harness variables (``docs/harness.md``); raises UserError.

    A prediction-surface job (:mod:`harness.surface.job`) passes its own resolved ``methods`` (``SURFACE_METHODS``,
    instead of ``METHOD_SET``) and ``grid=False``: its (budget, deadline) axes are its own, so the run has
    :data:`~harness.grid.NO_GRID` (every grid variable is still checked: a bad value is never silently ignored).
    """
    env = dict(os.environ if env is None else env)
    # --- cheap checks first (every variable prepare reads, and unknown names): nothing here reads the pool -------
    v = variables.check_environment(env, "prepare")
    the_grid = resolve_grid(env) if grid else NO_GRID
    methods = v["METHOD_SET"] if methods is None else list(methods)
    cost_mode = v["BUDGET_COST_MODE"]
    latency_dist = v["LATENCY_DIST"]
    n_trials = v["N_EXEC_TRIALS"]
    seed = v["SEED"]
    mcpp_all = resolve_mcpp(env)  # checked even when MCPP does not run: a bad value is never silently ignored
    mcpp = mcpp_all if uses_settings(methods, "mcpp") else {}
    further_all = resolve_further(env)  # likewise checked even when unused
    further = further_all if uses_settings(methods, "further") else {}
    planning = resolve_planning(env)
    money = cost_mode == "output_money_cost_mean"
    prices = load_price_table(v["PRICE_FILE"]) if money else None
    default_price_model = v["DEFAULT_PRICE_MODEL"]
    run_name = v["RUN_NAME"]
    root = v["RESULTS_ROOT"]
    variables.check_run_paths(v, os.path.join(root, run_name), "RESULTS_ROOT/RUN_NAME")  # before the pool is read
    # --- the pool --------------------------------------------------------------
    pool_path = v["DAG_POOL_PATH"]
    full = load_pool(pool_path)
    dags = _select_dags(env, len(full))
    pool = full.subset(dags, source=pool_path)
    pool_models = list(full.model_ids)
    suite = _parse_suite(env, pool_models)
    if mcpp_all.get("model_ids"):  # the rule the command line uses too (simulator.base.settings)
        check_mcpp_model_names(mcpp_all["model_ids"], pool_models, "MC_PORTFOLIO_MODEL_IDS", "environment")
    dags_per_shard = v["DAGS_PER_SHARD"] or default_dags_per_shard(len(dags), methods)
    from .pool_index import index_section

    index = {"pool": index_section(pool_path, dags)}  # the file's sha256 and its rows' places, in one read
    cfg = RunConfig(
        run_name=run_name,
        run_dir=os.path.join(root, run_name),
        pool_path=pool_path,
        pool_sha256=index["pool"]["sha256"],
        pool_rows=len(full),
        pool_models=pool_models,
        dags=dags,
        n_trials=n_trials,
        grid=the_grid,
        cost_mode=cost_mode,
        latency_dist=latency_dist,
        prices=prices,
        default_price_model=default_price_model,
        methods=methods,
        baseline_suite=suite,
        seed=seed,
        mcpp=mcpp,
        planning=planning,
        further=further,
        execution_rules=v["EXECUTION_RULES"],
        dags_per_shard=dags_per_shard,
        python=v["PYTHON"],
        pool_index=index,
    )
    cfg.env_resolved = _resolved_table(env, cfg)
    if check_dags:
        cfg.nominal_summary = check_pool(cfg, pool)
    if planning.get("pool"):  # after check_pool: a misaligned planning pool is refused with its own message
        index["planning_pool"] = index_section(planning["pool"], dags)
    return cfg


def ratio_values(grid, what: str) -> list[float]:
    """The ratio values of the grid's budget (or deadline) axis: the smallest and the largest suffice."""
    from .grid import RATIO

    vals = [g.budget.value for g in grid.groups if g.budget.kind == RATIO] if what == "budget" else [
        d.value for g in grid.groups for d in g.deadlines if d.kind == RATIO]
    return sorted({min(vals), max(vals)}) if vals else []


def check_pool(cfg: RunConfig, pool: Pool) -> dict[str, Any]:
    """Per-DAG checks that need the statistics; returns a summary of the nominal scales.

    Builds each DAG's arrays in the run's cost setting (money mode fails here
    on a missing price), computes the nominal scales (a ratio grid fails here
    on a node with p = 0, naming DAG and node), checks the baseline suite
    models exist on each DAG and that a planning pool is aligned.
    """
    setting = cfg.cost_setting()
    budgets: list[float] = []
    deadlines: list[float] = []
    planning_pool = None
    if cfg.planning.get("pool"):
        planning_pool = load_pool(cfg.planning["pool"])
        if len(planning_pool) != cfg.pool_rows:
            raise ConfigError(
                f"PLANNING_POOL_PATH {cfg.planning['pool']}: {len(planning_pool)} DAGs, but the execution pool "
                f"has {cfg.pool_rows}; the planning pool must be aligned row by row"
            )
    specs = [method_spec(method) for method in cfg.methods]
    dag_checks = [(spec, getattr(cfg, spec.settings_key) if spec.settings_key else {})  # each method's own refusal
                  for spec in specs if spec.check_dag is not None]  # of a DAG (e.g. MCPP's portfolio models)
    for i in range(len(pool)):
        st = pool[i]
        where = f"DAG {st.index} (problem {st.problem_id!r}, {cfg.pool_path} line {st.line}): "
        arr = dag_arrays(pool, i, setting)
        for spec, settings_params in dag_checks:
            spec.refuse_dag(settings_params, st, arr, where)
        for model in cfg.baseline_suite:
            if model not in st.model_ids:
                raise ConfigError(f"{where}BASELINE_SUITE model {model!r} is not on this DAG ({list(st.model_ids)})")
            dag_arrays(pool, i, cfg.cost_setting(model))
        if cfg.grid.uses_budget_ratio:
            budgets.append(nominal_budget(arr, where))
            for r in ratio_values(cfg.grid, "budget"):
                scale_by_ratio(r, budgets[-1], "budget", "BUDGET_RATIOS (environment)", where)
        if cfg.grid.uses_deadline_ratio:
            deadlines.append(nominal_deadline(arr, where))
            for r in ratio_values(cfg.grid, "deadline"):
                scale_by_ratio(r, deadlines[-1], "deadline", "DEADLINE_RATIOS (environment)", where)
        if planning_pool is not None:
            ps = planning_pool[st.index]
            if list(ps.node_ids) != list(st.node_ids) or ps.model_ids != st.model_ids:
                raise ConfigError(
                    f"{where}the planning pool's row {st.index} (problem {ps.problem_id!r}) is not aligned: "
                    "node ids or models differ"
                )
    out: dict[str, Any] = {}
    for name, vals in (("nominal_budget", budgets), ("nominal_deadline", deadlines)):
        if vals:
            s = sorted(vals)
            out[name] = {"min": s[0], "median": s[len(s) // 2], "max": s[-1]}
    return out


def _resolved_table(env: Mapping[str, str], cfg: RunConfig) -> dict[str, str]:
    """Each variable ``prepare`` reads with the value this run uses (printed by prepare)."""
    shown = {}
    for var in variables.VARIABLES:
        if var.group not in variables.PREPARE_GROUPS or var.name == "RUN_DIR":
            continue
        if var.group in ("mcpp", "further") and not variables.is_set(env, var.name):
            continue  # the resolved MCPP / further parameters are shown below, in one line
        val = (env.get(var.name) or "").strip()
        shown[var.name] = val if val else (f"{var.default} (default)" if var.default else "(unset)")
    shown["DAG_POOL_PATH"] = cfg.pool_path
    shown["RESULTS_ROOT"] = os.path.dirname(cfg.run_dir)
    shown["N_DAGS"] = f"{len(cfg.dags)}" + ("" if variables.is_set(env, "N_DAGS") else " (all)")
    shown["METHOD_SET"] = f"{(env.get('METHOD_SET') or '').strip() or 'all'} -> {', '.join(method_label(m) for m in cfg.methods)}"
    shown["DAGS_PER_SHARD"] = str(cfg.dags_per_shard) + ("" if variables.is_set(env, "DAGS_PER_SHARD") else " (auto)")
    if cfg.mcpp:
        shown["MC_PORTFOLIO_*"] = json.dumps(cfg.mcpp)
    if cfg.further:
        shown["LOADER_* / DEADLINE_*"] = json.dumps(cfg.further)
    return shown
