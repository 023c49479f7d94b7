"""MCPP's parameters: defaults, validation, environment variables and CLI flags.

One place resolves every parameter of ``mc_portfolio_rollout`` (``docs/policies.md``)
so the command line, the harness (environment variables written into job
lines) and the Python API agree, and the resolved values are recorded with
the results (``mc_portfolio_params``).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.validation import check_number

#: The method name of MCPP (defined here, the lowest MCPP module, so that the
#: policy, the method registry, the CLIs and the harness share one spelling).
MCPP = "mc_portfolio_rollout"
CANDIDATE_GENERATORS = ("faithful", "corrected")
EVALUATIONS = ("faithful", "crn", "halving", "crn_halving")
#: ``reuse``: "off" (the paper's planner) or "state" (a decision is a function of the planner state: draws
#: keyed by the state, not the trial, and a state met again reuses the decision and its simulations)
REUSES = ("off", "state")

#: environment variable -> parameter name
ENV_VARS: dict[str, str] = {
    "MC_PORTFOLIO_MODEL_IDS": "model_ids",
    "MC_PORTFOLIO_BASE_KS": "base_ks",
    "MC_PORTFOLIO_M": "M",
    "MC_PORTFOLIO_RANDOM_FREE_N": "random_free_n",
    "MC_PORTFOLIO_MAX_EXACT_ACTIONS": "max_exact_actions",
    "MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS": "max_candidate_actions",
    "MC_PORTFOLIO_MAX_ROLLOUT_STEPS": "max_rollout_steps",
    "MC_PORTFOLIO_DELTA": "delta",
    "MC_PORTFOLIO_CANDIDATE_GENERATOR": "candidate_generator",
    "MC_PORTFOLIO_EVALUATION": "evaluation",
    "MC_PORTFOLIO_HALVING_ETA": "halving_eta",
    "MC_PORTFOLIO_HALVING_ROUNDS": "halving_rounds",
    "MC_PORTFOLIO_TIME_LIMIT_MS": "time_limit_ms",
    "MC_PORTFOLIO_SIM_LIMIT": "sim_limit",
    "MC_PORTFOLIO_REUSE": "reuse",
}

# keys that never change results (not part of the recorded parameters)
RUNTIME_KEYS = ("dag_model_ids", "n_threads", "record_decisions", "prune", "launch_rule")


@dataclass(frozen=True)
class MCPPParams:
    """Resolved MCPP parameters (``docs/policies.md`` defaults; options beyond the paper are off)."""

    model_ids: tuple | None = None  # names (or positions); None = every model, first-seen order
    base_ks: tuple[int, ...] = (1, 4, 16, 64)
    M: int = 64
    random_free_n: int = 3
    max_exact_actions: int | None = None  # None = len(base_ks) ** random_free_n
    max_candidate_actions: int = 260
    max_rollout_steps: int = 10000
    delta: float = 0.05
    candidate_generator: str = "faithful"
    evaluation: str = "faithful"
    halving_eta: int = 2
    halving_rounds: int = 4
    time_limit_ms: float | None = None  # anytime planner: per-decision wall-time limit (None = faithful)
    #: anytime planner, deterministic form: at most this many simulations per decision, the same anytime order
    sim_limit: int | None = None
    reuse: str = "off"  # "state": decisions keyed by, and reused across, identical planner states

    @property
    def anytime(self) -> bool:
        """The anytime planner (a wall-time or a simulation limit per decision) instead of the faithful one."""
        return self.time_limit_ms is not None or self.sim_limit is not None

    @property
    def exact_cap(self) -> int:
        if self.max_exact_actions is not None:
            return self.max_exact_actions
        return len(self.base_ks) ** self.random_free_n

    def record(self) -> dict:
        """JSON-able dict of every parameter, with ``max_exact_actions`` resolved."""
        d = asdict(self)
        d["model_ids"] = list(self.model_ids) if self.model_ids is not None else None
        d["base_ks"] = list(self.base_ks)
        d["max_exact_actions"] = self.exact_cap
        if self.time_limit_ms is None:
            # absent, not null, when off: the faithful default's records stay byte-identical
            del d["time_limit_ms"]
        if self.sim_limit is None:
            del d["sim_limit"]
        if self.reuse == "off":
            del d["reuse"]  # likewise
        return d


def _split(value: Any) -> list:
    if isinstance(value, str):
        return [s for s in value.replace(",", " ").split() if s]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _int(name: str, value: Any, lo: int = 1) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        x = float(value)
        if not x.is_integer():
            raise ValueError
        x = int(x)
    except (TypeError, ValueError):
        raise ConfigError(f"MCPP parameter {name} must be an integer, got {value!r}") from None
    if x < lo:
        raise ConfigError(f"MCPP parameter {name} must be >= {lo}, got {x}")
    return x


def resolve_params(params: Mapping[str, Any] | None = None, **overrides: Any) -> MCPPParams:
    """Validate a params dict (CLI/env/API keys of :class:`MCPPParams`) into :class:`MCPPParams`.

    Unknown keys are refused (a typo must not silently run the default);
    runtime-only keys (``RUNTIME_KEYS``) are ignored here.
    """
    raw = {**dict(params or {}), **overrides}
    fields = set(MCPPParams.__dataclass_fields__)
    unknown = [k for k in raw if k not in fields and k not in RUNTIME_KEYS]
    if unknown:
        raise ConfigError(f"unknown MCPP parameter(s) {unknown}; known: {sorted(fields)}")
    out: dict[str, Any] = {}
    if raw.get("model_ids") not in (None, "", [], ()):
        ids = tuple(str(x) if not isinstance(x, int) else x for x in _split(raw["model_ids"]))
        if len(set(ids)) != len(ids):
            raise ConfigError(f"MCPP model_ids has duplicates: {list(ids)}")
        out["model_ids"] = ids
    if raw.get("base_ks") not in (None, "", [], ()):
        ks = tuple(_int("base_ks", k) for k in _split(raw["base_ks"]))
        if len(set(ks)) != len(ks):
            raise ConfigError(f"MCPP base_ks has duplicates: {list(ks)}")
        out["base_ks"] = ks
    for name in ("M", "max_candidate_actions", "max_rollout_steps", "halving_rounds"):
        if raw.get(name) is not None:
            out[name] = _int(name, raw[name])
    if raw.get("random_free_n") is not None:
        out["random_free_n"] = _int("random_free_n", raw["random_free_n"])
    if raw.get("max_exact_actions") is not None:
        out["max_exact_actions"] = _int("max_exact_actions", raw["max_exact_actions"], lo=0)
    if raw.get("halving_eta") is not None:
        out["halving_eta"] = _int("halving_eta", raw["halving_eta"], lo=2)
    if raw.get("delta") is not None:
        try:
            delta = float(raw["delta"])
        except (TypeError, ValueError):
            raise ConfigError(f"MCPP parameter delta must be a number, got {raw['delta']!r}") from None
        if not (0.0 < delta < 1.0) or math.isnan(delta):
            raise ConfigError(f"MCPP parameter delta must be in (0, 1), got {delta}")
        out["delta"] = delta
    if raw.get("time_limit_ms") not in (None, ""):
        out["time_limit_ms"] = check_number(
            raw["time_limit_ms"], "MCPP parameter time_limit_ms", lo=0.0, lo_inclusive=False
        )
    if raw.get("sim_limit") not in (None, ""):
        out["sim_limit"] = _int("sim_limit", raw["sim_limit"])
        if "time_limit_ms" in out:
            raise ConfigError("MCPP parameters time_limit_ms and sim_limit are two forms of one limit: give one")
    for name, choices in (
        ("candidate_generator", CANDIDATE_GENERATORS),
        ("evaluation", EVALUATIONS),
        ("reuse", REUSES),
    ):
        if raw.get(name) not in (None, ""):
            val = str(raw[name]).strip().lower().replace("-", "_").replace("+", "_")
            if val not in choices:
                raise ConfigError(f"MCPP {name} must be one of {', '.join(choices)}, got {raw[name]!r}")
            out[name] = val
    return MCPPParams(**out)


def mcpp_params_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``MC_PORTFOLIO_*`` variables that are set (non-empty), as a params dict.

    Values stay strings; :func:`resolve_params` validates them. The harness
    calls this once when it prepares a run and writes the result into the job
    lines (workers never read the environment themselves).
    """
    env = os.environ if environ is None else environ
    return {name: env[var] for var, name in ENV_VARS.items() if env.get(var, "").strip()}


def add_mcpp_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the MCPP flags (``--mc-portfolio-m`` ...) to a parser; unset flags mean the default."""
    g = parser.add_argument_group("MCPP (mc_portfolio_rollout)")
    g.add_argument("--mc-portfolio-model-ids", metavar="IDS", help="models of the portfolio (comma list; default: all)")
    g.add_argument("--mc-portfolio-base-ks", metavar="KS", help="sample counts (comma list; default 1,4,16,64)")
    g.add_argument("--mc-portfolio-m", type=int, metavar="M", help="simulations per (candidate, member) pair (64)")
    g.add_argument("--mc-portfolio-random-free-n", type=int, metavar="N", help="free nodes of the random branch (3)")
    g.add_argument(
        "--mc-portfolio-max-exact-actions", type=int, metavar="N", help="full-product cap (len(base_ks)**random_free_n)"
    )
    g.add_argument("--mc-portfolio-max-candidate-actions", type=int, metavar="N", help="candidate cap (260)")
    g.add_argument("--mc-portfolio-max-rollout-steps", type=int, metavar="N", help="events per simulation (10000)")
    g.add_argument("--mc-portfolio-delta", type=cliargs.number(0, 1), metavar="D", help="Hoeffding delta, reporting only (0.05)")
    g.add_argument(
        "--mc-portfolio-candidate-generator", choices=CANDIDATE_GENERATORS, help="option: corrected generator"
    )
    g.add_argument("--mc-portfolio-evaluation", choices=EVALUATIONS, help="option: crn / halving evaluation")
    g.add_argument("--mc-portfolio-halving-eta", type=int, metavar="ETA", help="halving: keep 1/ETA per round (2)")
    g.add_argument("--mc-portfolio-halving-rounds", type=int, metavar="R", help="halving: rounds (4)")
    g.add_argument(
        "--mc-portfolio-time-limit-ms",
        metavar="MS",
        help="anytime planner: wall-time limit per decision in ms (default: off, the faithful planner)",
    )
    g.add_argument(
        "--mc-portfolio-sim-limit",
        metavar="N",
        help="anytime planner, deterministic: at most N simulations per decision (repeatable, unlike a time limit)",
    )
    g.add_argument(
        "--mc-portfolio-reuse",
        choices=REUSES,
        help="option: 'state' keys a decision's draws by the planner state and reuses it when the state repeats",
    )


def mcpp_params_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The MCPP flags that were given, as a params dict (pass to :func:`resolve_params`)."""
    out = {}
    for name in ENV_VARS.values():
        val = getattr(args, "mc_portfolio_" + name.lower(), None)
        if val is not None:
            out[name] = val
    return out
