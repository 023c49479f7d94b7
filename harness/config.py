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

from simulator.arrays import LATENCY_DISTS, CostSetting, dag_arrays
from simulator.costs import COST_MODES, load_price_table, normalize_cost_mode
from simulator.errors import ConfigError
from simulator.methods import MCPP, resolve_methods
from simulator.nominal import nominal_budget, nominal_deadline
from simulator.pool import Pool, load_index_file, load_pool
from simulator.settings import check_mcpp_model_names, check_seed, check_trials

from .grid import Grid, resolve_grid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_POOL = os.path.join(REPO, "examples", "example_pool.jsonl")
DEFAULT_RESULTS_ROOT = os.path.join(REPO, "results", "runs")
HARNESS_MCPP_DEFAULTS = {"max_candidate_actions": 2048}  # docs/harness.md: the shell harness sets 2048

#: (variable, default shown by prepare, meaning). Result-changing ones go into run.json.
ENV_VARS: list[tuple[str, str, str]] = [
    ("DAG_POOL_PATH", "examples/example_pool.jsonl", "input pool (JSONL)"),
    ("RUN_NAME", "example", "run directory name"),
    ("RESULTS_ROOT", "results/runs", "directory holding the run directories"),
    ("N_DAGS", "all", "how many DAGs (from the index file, else rows 0..N-1)"),
    ("USE_DAG_INDICES_FILE", "", "index file of the DAGs to use"),
    ("N_EXEC_TRIALS", "100", "trials per (DAG, cell, method)"),
    ("BUDGET_DEADLINE_VALUES_MAP", "", "absolute grid B1:D1,D2;B2:D1,D3"),
    ("BUDGET_VALUES", "", "absolute budget axis"),
    ("DEADLINE_VALUES", "", "absolute deadline axis (s; inf allowed)"),
    ("BUDGET_RATIOS", "0.3 0.5 1.0 2.0 5.0 10.0", "budget axis, x nominal budget"),
    ("DEADLINE_RATIOS", "1.0", "deadline axis, x nominal deadline"),
    ("BUDGET_COST_MODE", "token_cost_mean", "cost mode (token, money, cost, latency)"),
    ("LATENCY_DIST", "lognormal", "parametric latency distribution"),
    ("PRICE_FILE", "", "JSON {model: $ per 1M output tokens} over the default prices"),
    ("DEFAULT_PRICE_MODEL", "", "model pricing the id 'default' when a node names none"),
    ("METHOD_SET", "all", "all, seq, static, mcpp, baselines or a comma list"),
    ("BASELINE_SUITE", "", "models to re-run the baselines with (comma list or 'all')"),
    ("SEED", "42", "run seed"),
    ("PLANNING_POOL_PATH", "", "planning pool aligned row by row (robustness)"),
    ("PLANNING_NOISE_LATENCY_SIGMA", "0", "planner latency noise (log-normal sigma)"),
    ("PLANNING_NOISE_COST_SIGMA", "0", "planner cost noise (log-normal sigma)"),
    ("PLANNING_NOISE_LOGIT_SIGMA", "0", "planner success noise (logit sigma)"),
    ("PLANNING_NOISE_SEED", "0", "planner noise seed"),
    ("DAGS_PER_SHARD", "auto", "DAGs per shard (auto: n_dags / (8 x cores) with MCPP, max 10; else / (4 x cores))"),
    ("N_WORKERS", "all cores", "processes of `local`"),
    ("MAX_SHARD_FAILURES", "3", "tries before a shard is marked failed"),
    ("HEARTBEAT_SECONDS", "10", "heartbeat period of a running shard"),
    ("STALE_SECONDS", "120", "heartbeat age after which `resume` releases a claim"),
]
MC_DEFAULT_TEXT = "docs/policies.md defaults; MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=2048"


def _env(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def _int(env: Mapping[str, str], name: str, default: int, lo: int = 0) -> int:
    text = _env(env, name)
    if not text:
        return default
    try:
        x = int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} must be an integer") from None
    if x < lo:
        raise ConfigError(f"{name}={x} must be >= {lo}")
    return x


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    text = _env(env, name)
    if not text:
        return default
    try:
        x = float(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} must be a number") from None
    if not math.isfinite(x) or x < 0:
        raise ConfigError(f"{name}={text!r} must be a non-negative number")
    return x


def _abspath(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


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
    python: str = field(default_factory=lambda: sys.executable or "python3")
    env_resolved: dict[str, str] = field(default_factory=dict)
    nominal_summary: dict[str, Any] = field(default_factory=dict)

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
        }

    def fingerprint(self) -> str:
        return settings_fingerprint(self.settings())


def settings_fingerprint(settings: Mapping[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------


def resolve_mcpp(env: Mapping[str, str]) -> dict[str, Any]:
    """MC_PORTFOLIO_* variables -> the fully resolved, recorded MCPP parameters."""
    from simulator.mcpp_params import mcpp_params_from_env, resolve_params

    raw = {**HARNESS_MCPP_DEFAULTS, **mcpp_params_from_env(env)}
    return resolve_params(raw).record()


def resolve_planning(env: Mapping[str, str]) -> dict[str, Any]:
    """PLANNING_* variables -> ``RunSettings.planning`` (only the keys that are set)."""
    from simulator.planning import validate_planning

    out: dict[str, Any] = {}
    pool = _env(env, "PLANNING_POOL_PATH")
    if pool:
        out["pool"] = _abspath(pool)
    for var, key in (
        ("PLANNING_NOISE_LATENCY_SIGMA", "noise_latency_sigma"),
        ("PLANNING_NOISE_COST_SIGMA", "noise_cost_sigma"),
        ("PLANNING_NOISE_LOGIT_SIGMA", "noise_logit_sigma"),
    ):
        x = _float(env, var, 0.0)
        if x > 0:
            out[key] = x
    if any(k.startswith("noise_") for k in out) or _env(env, "PLANNING_NOISE_SEED"):
        out["noise_seed"] = _int(env, "PLANNING_NOISE_SEED", 0)
    if not out:
        return {}
    validated = validate_planning(out)
    return {k: validated[k] for k in out}


def _select_dags(env: Mapping[str, str], pool_rows: int) -> list[int]:
    idx_file = _env(env, "USE_DAG_INDICES_FILE")
    if idx_file:
        dags = load_index_file(_abspath(idx_file), pool_rows)
        if not dags:
            raise ConfigError(f"{idx_file}: the index file selects no DAG")
        if len(set(dags)) != len(dags):
            raise ConfigError(f"{idx_file}: the index file lists a DAG twice")
        source = f"index file {idx_file} ({len(dags)} DAGs)"
    else:
        dags = list(range(pool_rows))
        source = f"the pool ({pool_rows} DAGs)"
    n_text = _env(env, "N_DAGS")
    if n_text and n_text.lower() != "all":
        n = _int(env, "N_DAGS", len(dags), lo=1)
        if n > len(dags):
            raise ConfigError(f"N_DAGS={n} but {source} has only {len(dags)}")
        dags = dags[:n]
    return dags


def _parse_suite(env: Mapping[str, str], pool_models: list[str]) -> list[str]:
    text = _env(env, "BASELINE_SUITE")
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
    if MCPP in methods:
        return max(1, min(10, math.ceil(n_dags / (8 * cpu_count()))))
    return max(1, min(500, math.ceil(n_dags / (4 * cpu_count()))))


def resolve_config(env: Mapping[str, str] | None = None, check_dags: bool = True) -> RunConfig:
    """Read and validate the harness variables (``docs/harness.md``); raises UserError."""
    env = dict(os.environ if env is None else env)
    # --- cheap checks first: nothing below reads the pool ------------------------
    grid = resolve_grid(env)
    methods = resolve_methods(_env(env, "METHOD_SET") or "all")
    cost_mode = normalize_cost_mode(_env(env, "BUDGET_COST_MODE") or COST_MODES[0])
    latency_dist = _env(env, "LATENCY_DIST") or "lognormal"
    if latency_dist not in LATENCY_DISTS:
        raise ConfigError(f"LATENCY_DIST={latency_dist!r}: choose one of {', '.join(LATENCY_DISTS)}")
    # the rules the command line uses too (simulator.settings)
    n_trials = check_trials(_env(env, "N_EXEC_TRIALS") or 100, "N_EXEC_TRIALS", "environment")
    seed = check_seed(_env(env, "SEED") or 42, "SEED", "environment")
    mcpp = resolve_mcpp(env) if MCPP in methods else {}
    planning = resolve_planning(env)
    money = cost_mode == "output_money_cost_mean"
    prices = load_price_table(_env(env, "PRICE_FILE") or None) if money else None
    default_price_model = _env(env, "DEFAULT_PRICE_MODEL") or None
    run_name = _env(env, "RUN_NAME") or "example"
    if "/" in run_name or run_name in (".", ".."):
        raise ConfigError(f"RUN_NAME={run_name!r} must be a plain name (no '/')")
    root = _abspath(_env(env, "RESULTS_ROOT") or DEFAULT_RESULTS_ROOT)
    # --- the pool --------------------------------------------------------------
    pool_path = _abspath(_env(env, "DAG_POOL_PATH") or DEFAULT_POOL)
    full = load_pool(pool_path)
    dags = _select_dags(env, len(full))
    pool = full.subset(dags, source=pool_path)
    pool_models = list(full.model_ids)
    if mcpp.get("model_ids"):
        check_mcpp_model_names(mcpp["model_ids"], pool_models, "MC_PORTFOLIO_MODEL_IDS", "environment")
    suite = _parse_suite(env, pool_models)
    dps_text = _env(env, "DAGS_PER_SHARD")
    if dps_text and dps_text.lower() != "auto":
        dags_per_shard = _int(env, "DAGS_PER_SHARD", 1, lo=1)
    else:
        dags_per_shard = default_dags_per_shard(len(dags), methods)
    cfg = RunConfig(
        run_name=run_name,
        run_dir=os.path.join(root, run_name),
        pool_path=pool_path,
        pool_sha256=full.checksum(),
        pool_rows=len(full),
        pool_models=pool_models,
        dags=dags,
        n_trials=n_trials,
        grid=grid,
        cost_mode=cost_mode,
        latency_dist=latency_dist,
        prices=prices,
        default_price_model=default_price_model,
        methods=methods,
        baseline_suite=suite,
        seed=seed,
        mcpp=mcpp,
        planning=planning,
        dags_per_shard=dags_per_shard,
        python=_env(env, "PYTHON") or sys.executable or "python3",
    )
    cfg.env_resolved = _resolved_table(env, cfg)
    if check_dags:
        cfg.nominal_summary = check_pool(cfg, pool)
    return cfg


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
    mcpp_policy = None
    if MCPP in cfg.methods and cfg.mcpp.get("model_ids"):
        from simulator.mc_portfolio_policy import MCPortfolioPolicy

        mcpp_policy = MCPortfolioPolicy(cfg.mcpp)
    for i in range(len(pool)):
        st = pool[i]
        where = f"DAG {st.index} (problem {st.problem_id!r}, {cfg.pool_path} line {st.line}): "
        arr = dag_arrays(pool, i, setting)
        if mcpp_policy is not None:  # MC_PORTFOLIO_MODEL_IDS: the planner's own rule, checked before any work
            mcpp_policy.dag_model_ids = st.model_ids
            try:
                mcpp_policy.model_positions(arr)
            except ConfigError as exc:
                raise ConfigError(f"{where}MC_PORTFOLIO_MODEL_IDS: {exc}") from None
        for model in cfg.baseline_suite:
            if model not in st.model_ids:
                raise ConfigError(f"{where}BASELINE_SUITE model {model!r} is not on this DAG ({list(st.model_ids)})")
            dag_arrays(pool, i, cfg.cost_setting(model))
        if cfg.grid.uses_budget_ratio:
            budgets.append(nominal_budget(arr, where))
        if cfg.grid.uses_deadline_ratio:
            deadlines.append(nominal_deadline(arr, where))
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
    """Each harness variable with the value this run uses (printed by prepare)."""
    shown = {}
    for name, default, _ in ENV_VARS:
        val = _env(env, name)
        shown[name] = val if val else (f"{default} (default)" if default else "(unset)")
    shown["DAG_POOL_PATH"] = cfg.pool_path
    shown["RESULTS_ROOT"] = os.path.dirname(cfg.run_dir)
    shown["N_DAGS"] = f"{len(cfg.dags)}" + ("" if _env(env, "N_DAGS") else " (all)")
    shown["METHOD_SET"] = f"{_env(env, 'METHOD_SET') or 'all'} -> {', '.join(cfg.methods)}"
    shown["DAGS_PER_SHARD"] = str(cfg.dags_per_shard) + ("" if _env(env, "DAGS_PER_SHARD") else " (auto)")
    if cfg.mcpp:
        shown["MC_PORTFOLIO_*"] = json.dumps(cfg.mcpp)
    for var in sorted(k for k in env if k.startswith("MC_PORTFOLIO_")):
        shown[var] = env[var]
    return shown
