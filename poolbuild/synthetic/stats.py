"""The statistics of synthetic pools: per-(node, model) templates and empirical rows.

Two sources, each with ``node(rng, n_rows, legacy) -> {model: (template,
rows or None)}``: :class:`ParametricStats` (a family of correlated parametric
LLMs, :data:`DEFAULT_MODELS` standing in for the paper's CodeFlow models) and
:class:`LibraryStats` (templates drawn from a CSV library). The command
line's ``--models``, ``--model-spec`` and ``--template-csv`` are read here.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulator.base.errors import UserError
from simulator.base.jsonread import load_json_file

#: Probability floor of the legacy model (ratio mode needs p_v > 0 on every node).
LEGACY_P_FLOOR = 0.05


P_CLIP = (0.01, 0.995)


@dataclass(frozen=True)
class ModelSpec:
    """Parametric LLM: who succeeds how often, how long it talks and how fast.

    ``ability`` shifts the success logit (shared node difficulty is
    subtracted, so models are correlated across nodes); ``tokens_mean`` is the
    mean output length on a typical node, ``tokens_sigma`` the lognormal
    spread of one attempt's length; latency = overhead + tokens /
    ``tokens_per_sec`` x noise.
    """

    ability: float
    tokens_mean: float
    tokens_sigma: float
    tokens_per_sec: float
    overhead_sec: float = 0.5
    thinking: bool = False


#: Plausible stand-ins for the paper's CodeFlow models (Qwen3 4B/30B, instruct/thinking):
#: thinking models succeed more often but emit ~6x more tokens; the 30B models
#: succeed more often, are slower per token (and pricier: ``simulator.costs.charges``).
DEFAULT_MODELS: dict[str, ModelSpec] = {
    "4B_ins": ModelSpec(ability=-0.4, tokens_mean=450, tokens_sigma=0.35, tokens_per_sec=110),
    "4B_think": ModelSpec(
        ability=0.5, tokens_mean=3000, tokens_sigma=0.5, tokens_per_sec=110, thinking=True
    ),
    "30B_ins": ModelSpec(ability=0.4, tokens_mean=550, tokens_sigma=0.35, tokens_per_sec=60),
    "30B_think": ModelSpec(
        ability=1.3, tokens_mean=2600, tokens_sigma=0.5, tokens_per_sec=60, thinking=True
    ),
}


@dataclass(frozen=True)
class ParamConfig:
    """Knobs of the parametric family shared by all models."""

    base_logit: float = 1.0  # success logit of an ability-0 model on a median node
    difficulty_sd: float = 1.3  # spread of the per-node difficulty shared by all models
    model_noise_sd: float = 0.4  # per-(node, model) deviation from the shared difficulty
    size_sigma: float = 0.4  # per-node output-size factor shared by all models (lognormal)
    think_difficulty_tokens: float = 0.25  # thinking models write more on harder nodes
    latency_noise_sigma: float = 0.15  # per-attempt tokens/sec noise (lognormal)
    length_success_beta: float = 0.6  # logit drop per sd of log length (long answers fail more)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _r(x: float, nd: int = 4) -> float:
    """Rounded float (small, stable files)."""
    return float(round(float(x), nd))


def _template_from_rows(rows: list[dict[str, Any]]) -> dict[str, float]:
    from simulator.pools.stats import template_from_rows

    return {k: _r(v, 6) for k, v in template_from_rows(rows).items()}


class ParametricStats:
    """Per-node statistics of several correlated parametric models."""

    def __init__(self, models: dict[str, ModelSpec], cfg: ParamConfig = ParamConfig()) -> None:
        self.models = models
        self.cfg = cfg

    @property
    def model_ids(self) -> list[str]:
        return list(self.models)

    def node(
        self, rng: np.random.Generator, n_rows: int, legacy: str
    ) -> dict[str, tuple[dict[str, float], list[dict[str, Any]] | None]]:
        """``{model: (template, rows or None)}`` for one node."""
        c = self.cfg
        difficulty = float(rng.normal(0.0, c.difficulty_sd))
        size = float(np.exp(rng.normal(0.0, c.size_sigma)))
        out = {}
        for m, spec in self.models.items():
            eps = float(rng.normal(0.0, c.model_noise_sd))
            p = _sigmoid(c.base_logit + spec.ability - difficulty + eps)
            p = min(max(p, P_CLIP[0]), P_CLIP[1])
            if m == legacy:
                p = max(p, LEGACY_P_FLOOR)
            tok_mean = spec.tokens_mean * size
            if spec.thinking:
                tok_mean *= math.exp(c.think_difficulty_tokens * difficulty)
            if n_rows <= 0:
                out[m] = (self._template(spec, p, tok_mean), None)
            else:
                rows = self._rows(rng, spec, p, tok_mean, n_rows, m == legacy)
                out[m] = (_template_from_rows(rows), rows)
        return out

    def _template(self, spec: ModelSpec, p: float, tok_mean: float) -> dict[str, float]:
        s2 = spec.tokens_sigma**2 + self.cfg.latency_noise_sigma**2
        gen_mean = tok_mean / spec.tokens_per_sec
        return {
            "success_prob": _r(p, 6),
            "lat_mean": _r(spec.overhead_sec + gen_mean),
            "lat_std": _r(gen_mean * math.sqrt(math.expm1(s2))),
            "cost_mean": _r(tok_mean, 2),
            "token_cost_mean": _r(tok_mean, 2),
        }

    def _rows(
        self,
        rng: np.random.Generator,
        spec: ModelSpec,
        p: float,
        tok_mean: float,
        n_rows: int,
        need_success: bool,
    ) -> list[dict[str, Any]]:
        c = self.cfg
        sig = spec.tokens_sigma
        for _attempt in range(100):
            z = rng.normal(0.0, 1.0, size=n_rows)
            tokens = np.maximum(1, np.rint(tok_mean * np.exp(sig * z - sig * sig / 2)))
            noise = np.exp(rng.normal(0.0, c.latency_noise_sigma, size=n_rows))
            lat = spec.overhead_sec + tokens / spec.tokens_per_sec * noise
            ps = 1.0 / (1.0 + np.exp(-(_logit(p) - c.length_success_beta * z)))
            succ = rng.random(n_rows) < ps
            if succ.any() or not need_success:
                break
        if need_success and not succ.any():  # practically unreachable with p >= 0.05, R >= 1
            succ[int(np.argmin(z))] = True
        return [
            {
                "latency": _r(lat[i]),
                "success": int(succ[i]),
                "cost": int(tokens[i]),
                "token_cost": int(tokens[i]),
            }
            for i in range(n_rows)
        ]


TEMPLATE_FIELDS = ("success_prob", "lat_mean", "lat_std", "cost_mean")


def read_template_csv(path: str | Path) -> dict[str, list[dict[str, float]]]:
    """Template library ``{model_id: [template, ...]}`` (model ``default`` without a model_id column)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: template CSV not found")
    lib: dict[str, list[dict[str, float]]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        cols = [c.strip() for c in reader.fieldnames or []]
        missing = [c for c in TEMPLATE_FIELDS if c not in cols]
        if missing:
            raise UserError(f"{path}: template CSV lacks column(s) {missing} (has {cols})")
        for lineno, raw in enumerate(reader, start=2):
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
            if not any(row.values()):
                continue
            tpl: dict[str, float] = {}
            for key in TEMPLATE_FIELDS + ("token_cost_mean",):
                if key == "token_cost_mean" and not row.get(key):
                    continue
                try:
                    x = float(row[key])
                except ValueError:
                    raise UserError(
                        f"{path}: line {lineno}: {key}={row[key]!r} is not a number"
                    ) from None
                if not math.isfinite(x) or x < 0:
                    raise UserError(f"{path}: line {lineno}: {key}={row[key]!r} must be finite, >= 0")
                tpl[key] = x
            if tpl["success_prob"] > 1:
                raise UserError(f"{path}: line {lineno}: success_prob must be in [0, 1]")
            if tpl["lat_mean"] <= 0:
                raise UserError(f"{path}: line {lineno}: lat_mean must be > 0")
            lib.setdefault(row.get("model_id") or "default", []).append(tpl)
    if not lib:
        raise UserError(f"{path}: template CSV has no rows")
    return lib


class LibraryStats:
    """Per-node statistics drawn from a template library (one row per node and model).

    With ``R`` rows, attempts are drawn around the template: latency lognormal
    (moment-matched to ``lat_mean``/``lat_std``), cost and tokens proportional
    to latency (long attempts cost more), success logit lowered for long
    attempts.
    """

    def __init__(self, library: dict[str, list[dict[str, float]]], beta: float = 0.6) -> None:
        self.library = library
        self.beta = beta

    @property
    def model_ids(self) -> list[str]:
        return list(self.library)

    def node(
        self, rng: np.random.Generator, n_rows: int, legacy: str
    ) -> dict[str, tuple[dict[str, float], list[dict[str, Any]] | None]]:
        out = {}
        for m, rows in self.library.items():
            cands = rows
            if m == legacy:
                cands = [t for t in rows if t["success_prob"] > 0]
                if not cands:
                    raise UserError(
                        f"template CSV: legacy model {m!r} has no row with success_prob > 0"
                    )
            tpl = dict(cands[int(rng.integers(len(cands)))])
            tpl.setdefault("token_cost_mean", tpl["cost_mean"])
            if n_rows <= 0:
                out[m] = ({k: _r(v, 6) for k, v in tpl.items()}, None)
            else:
                r = self._rows(rng, tpl, n_rows, m == legacy)
                out[m] = (_template_from_rows(r), r)
        return out

    def _rows(
        self, rng: np.random.Generator, tpl: dict[str, float], n_rows: int, need_success: bool
    ) -> list[dict[str, Any]]:
        mu, sd = tpl["lat_mean"], tpl["lat_std"]
        s = math.sqrt(math.log1p((sd / mu) ** 2)) if mu > 0 else 0.0
        p = tpl["success_prob"]
        for _attempt in range(100):
            z = rng.normal(0.0, 1.0, size=n_rows)
            lat = mu * np.exp(s * z - s * s / 2)
            scale = lat / mu
            if p <= 0:
                succ = np.zeros(n_rows, dtype=bool)
            else:
                ps = 1.0 / (1.0 + np.exp(-(_logit(p) - self.beta * z)))
                succ = rng.random(n_rows) < ps
            if succ.any() or not need_success:
                break
        if need_success and not succ.any():
            succ[int(np.argmin(z))] = True
        return [
            {
                "latency": _r(max(lat[i], 1e-3)),
                "success": int(succ[i]),
                "cost": _r(tpl["cost_mean"] * scale[i], 3),
                "token_cost": _r(tpl["token_cost_mean"] * scale[i], 3),
            }
            for i in range(n_rows)
        ]


def resolve_models(spec: str | None) -> dict[str, ModelSpec]:
    """``--models``: a count (first N default models) or a comma list of model ids."""
    if spec is None or str(spec).strip() == "":
        return dict(DEFAULT_MODELS)
    s = str(spec).strip()
    if s.isdigit():
        k = int(s)
        if not 1 <= k <= len(DEFAULT_MODELS):
            raise UserError(f"--models {k}: choose 1..{len(DEFAULT_MODELS)} or a list of model ids")
        return dict(list(DEFAULT_MODELS.items())[:k])
    out = {}
    for m in s.split(","):
        m = m.strip()
        if not m:
            continue
        if m not in DEFAULT_MODELS:
            raise UserError(
                f"unknown parametric model {m!r}; known: {', '.join(DEFAULT_MODELS)} "
                "(use --model-spec FILE to define others)"
            )
        out[m] = DEFAULT_MODELS[m]
    if not out:
        raise UserError("--models is empty")
    return out


def _load_json(path: Path, what: str) -> Any:
    if not Path(path).exists():
        raise UserError(f"{path}: {what} file not found")
    return load_json_file(path, what=f"{what} file")


def load_model_spec(path: str | Path) -> dict[str, ModelSpec]:
    """JSON ``{model_id: {ability, tokens_mean, tokens_sigma, tokens_per_sec, ...}}``."""
    data = _load_json(Path(path), "model spec")
    if not isinstance(data, dict) or not data:
        raise UserError(f"{path}: expected an object {{model_id: {{ability, tokens_mean, ...}}}}")
    out = {}
    for m, fields in data.items():
        try:
            out[str(m)] = ModelSpec(**fields)
        except TypeError as exc:
            raise UserError(f"{path}: model {m!r}: {exc}") from None
    return out
