"""Method names of the further baselines, their corrections, parameters and environment variables.

Eight faithful methods (``FURTHER_METHODS``). Each documented correction of a
published defect is a suffix that makes its own method name (off by default):

=============  ========================================================================
suffix         applies to (docs/further_baselines.md, section 5)
=============  ========================================================================
``_units``     the six LOADER methods: cost in the cost mode's unit
``_rcur0``     ``loader_static``, ``loader_static_bf``: ``r_cur = 0``
``_clamp``     the six LOADER methods: ``p = 1`` nodes still take ``t``
``_lambert1``  the six LOADER methods: closed form returns 1, not 64
``_kappa``     the two deadline methods: exact ``theta`` upper bound
``_fixed``     every correction that applies to the method
=============  ========================================================================

Parameters are resolved once (from a mapping or the environment) by
:func:`resolve_further_params`, which refuses bad values with one readable
line (:mod:`simulator.base.validation`) before any work starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.jsonread import load_json_file
from simulator.base.validation import (
    check_choice,
    check_input_file,
    check_int,
    check_number,
    check_unknown_names,
)
from simulator.baselines.further.chernoff import RESERVATION_MODES, SPACINGS, DeadlineParams
from simulator.baselines.further.loader import FIX_CLAMP_A, FIX_LAMBERT1, FIX_RCUR0, FIX_UNITS, LoaderParams

LOADER_METHODS = (
    "loader_static",
    "loader_dual",
    "loader_dual_all_paths",
    "loader_dual_colgen",
    "loader_static_bf",
    "loader_dual_bf",
)
DEADLINE_METHODS = ("deadline_static", "deadline_receding")
FURTHER_METHODS: tuple[str, ...] = LOADER_METHODS + DEADLINE_METHODS
STATIC_LOADER = ("loader_static", "loader_static_bf")

# suffix -> (loader fix bits, uses the exact theta bound, base methods it applies to)
CORRECTIONS: dict[str, tuple[int, bool, tuple[str, ...]]] = {
    "units": (FIX_UNITS, False, LOADER_METHODS),
    "rcur0": (FIX_RCUR0, False, STATIC_LOADER),
    "clamp": (FIX_CLAMP_A, False, LOADER_METHODS),
    "lambert1": (FIX_LAMBERT1, False, LOADER_METHODS),
    "kappa": (0, True, DEADLINE_METHODS),
}


@dataclass(frozen=True)
class FurtherVariant:
    """One method name: its base policy and the corrections it switches on."""

    name: str
    base: str
    fixes: int = 0  # LOADER FIX_* bits
    use_kappa: bool = False  # deadline: exact theta upper bound (`_kappa`)

    @property
    def family(self) -> str:
        return "deadline" if self.base in DEADLINE_METHODS else "loader"

    @property
    def corrections(self) -> tuple[str, ...]:
        out = [s for s, (bits, kap, bases) in CORRECTIONS.items()
               if self.base in bases and ((bits and self.fixes & bits) or (kap and self.use_kappa))]  # fmt: skip
        return tuple(out)


def _variants() -> dict[str, FurtherVariant]:
    out: dict[str, FurtherVariant] = {m: FurtherVariant(m, m) for m in FURTHER_METHODS}
    for suffix, (bits, kap, bases) in CORRECTIONS.items():
        for m in bases:
            out[f"{m}_{suffix}"] = FurtherVariant(f"{m}_{suffix}", m, bits, kap)
    for m in FURTHER_METHODS:
        bits = 0
        kap = False
        for b, k, bases in CORRECTIONS.values():
            if m in bases:
                bits |= b
                kap = kap or k
        out[f"{m}_fixed"] = FurtherVariant(f"{m}_fixed", m, bits, kap)
    return out


VARIANTS: dict[str, FurtherVariant] = _variants()
CORRECTED_METHODS: tuple[str, ...] = tuple(
    f"{m}_{s}" for m in FURTHER_METHODS for s in CORRECTIONS if m in CORRECTIONS[s][2]
)
FIXED_METHODS: tuple[str, ...] = tuple(f"{m}_fixed" for m in FURTHER_METHODS)
ALL_FURTHER_METHODS: tuple[str, ...] = FURTHER_METHODS + CORRECTED_METHODS + FIXED_METHODS
FURTHER_METHOD_SETS: dict[str, tuple[str, ...]] = {
    "further": FURTHER_METHODS,
    "further_fixed": FIXED_METHODS,
    "further_corrections": CORRECTED_METHODS,
}


def variant(name: str) -> FurtherVariant:
    """The variant called ``name``; an unknown name is refused with the closest spelling."""
    if name not in VARIANTS:
        check_choice(name, "method", tuple(VARIANTS))
    return VARIANTS[name]


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------

COLGEN_KEYS = (
    "max_dual_iters",
    "stable_rounds",
    "eta_beta",
    "eta_lambda",
    "max_cg_iters",
    "inner_dual_iters",
    "max_active_paths",
    "add_path_tol",
)
ENV_COLGEN_PATH = "LOADER_COLGEN_PARAMS_PATH"
ENV_DEADLINE = {
    "DEADLINE_THETA_GRID_SIZE": "theta_grid_size",
    "DEADLINE_THETA_GRID_SPACING": "theta_grid_spacing",
    "DEADLINE_BUDGET_RESERVATION_MODE": "budget_reservation_mode",
    "DEADLINE_BUDGET_RESERVATION_C": "budget_reservation_c",
    "DEADLINE_BUDGET_RESERVATION_ALPHA": "budget_reservation_alpha",
}
ENV_TRACE = "DEADLINE_TRACE"
ENV_TRACE_LEVEL = "DEADLINE_TRACE_LEVEL"
TRACE_LEVELS = ("summary", "theta", "theta_full", "iter")
ENV_NAMES = (ENV_COLGEN_PATH, *ENV_DEADLINE, ENV_TRACE, ENV_TRACE_LEVEL)


def _loader_value(key: str, value: Any, name: str, source: str | None) -> Any:
    if key == "stable_rounds":
        return check_int(value, name, source, lo=0)
    if key in ("eta_beta", "eta_lambda"):
        return check_number(value, name, source, lo=0.0, lo_inclusive=False)
    if key == "add_path_tol":
        return check_number(value, name, source, lo=0.0)
    return check_int(value, name, source, lo=1)  # iteration counts and path limits


def check_loader_params(values: Mapping[str, Any], source: str | None = None) -> LoaderParams:
    """LOADER parameters from a mapping (unknown keys, zero iterations, non-positive steps refused)."""
    check_unknown_names(values.keys(), [f.name for f in fields(LoaderParams)], "LOADER parameter(s)", source)
    return replace(LoaderParams(), **{k: _loader_value(k, v, k, source) for k, v in values.items()})


def _deadline_value(key: str, value: Any, name: str, source: str | None) -> Any:
    if key == "theta_grid_size":
        return max(2, check_int(value, name, source))  # published: values below 2 are raised to 2
    if key == "theta_grid_spacing":
        return SPACINGS[check_choice(value, name, tuple(SPACINGS), source)]
    if key == "budget_reservation_mode":
        return RESERVATION_MODES[check_choice(value, name, tuple(RESERVATION_MODES), source)]
    if key == "budget_reservation_c":
        return check_number(value, name, source, lo=0.0)
    if key == "budget_reservation_alpha":
        return check_number(value, name, source, lo=0.0, hi=1.0)
    if key == "max_iters":
        return check_int(value, name, source, lo=1)
    return check_number(value, name, source, lo=0.0, lo_inclusive=False)  # gap ratio, dual_lr, tol


def check_deadline_params(values: Mapping[str, Any], source: str | None = None) -> DeadlineParams:
    """Deadline parameters from a mapping; aliases of spacing and reservation mode become their canonical names."""
    check_unknown_names(values.keys(), [f.name for f in fields(DeadlineParams)], "deadline parameter(s)", source)
    return replace(DeadlineParams(), **{k: _deadline_value(k, v, k, source) for k, v in values.items()})


@dataclass(frozen=True)
class FurtherParams:
    """Resolved parameters of every further method (recorded with the run)."""

    loader: LoaderParams = LoaderParams()
    colgen: LoaderParams = LoaderParams()
    deadline: DeadlineParams = DeadlineParams()
    trace: str | None = None  # deadline_receding trace level, None: off

    def to_json(self) -> dict:
        return {
            "loader": asdict(self.loader),
            "colgen": {k: asdict(self.colgen)[k] for k in COLGEN_KEYS},
            "deadline": asdict(self.deadline),
            "deadline_trace": self.trace,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> FurtherParams:
        """Inverse of :meth:`to_json` (values re-checked: a job line is an input too)."""
        obj = dict(obj or {})
        check_unknown_names(obj.keys(), ("loader", "colgen", "deadline", "deadline_trace"), "further parameter group(s)")
        loader = check_loader_params(obj.get("loader") or {}, "further parameters")
        colgen = replace(loader, **asdict(check_loader_params(obj.get("colgen") or {}, "further parameters")))
        trace = obj.get("deadline_trace")
        if trace is not None:
            trace = check_choice(trace, "deadline_trace", TRACE_LEVELS)
        return cls(loader, colgen, check_deadline_params(obj.get("deadline") or {}, "further parameters"), trace)


def _read_colgen_file(path: str, name: str) -> dict[str, Any]:
    p = check_input_file(path, name, "environment")
    obj = load_json_file(p, what=f"{name} (environment)", max_bytes=16 << 20)
    if not isinstance(obj, dict):
        raise ConfigError(f"{name} (environment): {str(p)!r} must hold a JSON object of column-generation parameters")
    check_unknown_names(obj.keys(), COLGEN_KEYS, "column-generation parameter(s)", f"{str(p)!r}")
    return obj


def resolve_further_params(environ: Mapping[str, str] | None = None) -> FurtherParams:
    """The parameters of every further method from the environment (``os.environ`` by default).

    Reads ``LOADER_COLGEN_PARAMS_PATH`` (a JSON object with any of
    ``COLGEN_KEYS``), the ``DEADLINE_*`` variables and ``DEADLINE_TRACE`` /
    ``DEADLINE_TRACE_LEVEL``. Called once where a run starts; the result is
    recorded and handed to workers, which never read the environment.
    """
    env = os.environ if environ is None else environ
    loader = LoaderParams()
    colgen = loader
    path = env.get(ENV_COLGEN_PATH, "").strip()
    if path:
        colgen = check_loader_params(_read_colgen_file(path, ENV_COLGEN_PATH), f"{ENV_COLGEN_PATH} {path!r}")
    dl = {f: _deadline_value(f, env[var], var, "environment")
          for var, f in ENV_DEADLINE.items() if env.get(var, "").strip() != ""}  # fmt: skip
    deadline = replace(DeadlineParams(), **dl)
    trace = None
    flag = env.get(ENV_TRACE, "").strip()
    if flag:
        on = check_choice(flag, ENV_TRACE, ("0", "1", "true", "false", "yes", "no"), "environment")
        if on in ("1", "true", "yes"):
            trace = check_choice(env.get(ENV_TRACE_LEVEL, "theta").strip() or "theta", ENV_TRACE_LEVEL,
                                 TRACE_LEVELS, "environment")  # fmt: skip
    elif env.get(ENV_TRACE_LEVEL, "").strip():
        check_choice(env[ENV_TRACE_LEVEL].strip(), ENV_TRACE_LEVEL, TRACE_LEVELS, "environment")
    return FurtherParams(loader, colgen, deadline, trace)
