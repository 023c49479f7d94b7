"""Synthetic DAG pools: experiments without rollouts, always labelled synthetic.

Why: MCPP and the baselines need a DAG pool to run, and real rollouts (GPU
hours, Lean) are not always at hand. This module builds pools in the format of
``docs/pool_format.md`` from

* a **topology**: ``layered``, ``chain``, ``fork_join``, or the real dependency
  graphs of the bundled benchmarks (``codeflow``: CodeFlowBench-Repo
  subproblems; ``proofflow``: ProofFlowBench proof graphs, self-loops dropped
  with a warning), and
* **statistics**: a parametric family of LLMs (default: the paper's CodeFlow
  models ``4B_ins``, ``4B_think``, ``30B_ins``, ``30B_think``) or a template
  library CSV (``success_prob, lat_mean, lat_std, cost_mean[,
  token_cost_mean, model_id]``), optionally with ``R`` empirical rows per
  (node, model).

Every line carries ``synthetic: true`` and a ``dag_kind`` starting with
``synthetic_``, so a synthetic pool is never mistaken for measured data. All
randomness comes from numpy Generators keyed by ``(seed, DAG index, purpose)``:
the same command writes the same bytes, and the topology of DAG ``k`` does not
depend on the statistics settings.

Command line: ``python -m poolbuild.synthetic --help``; see ``docs/synthetic.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codeflow.dataset import DEFAULT_DATASET as CODEFLOW_DATASET
from codeflow.dataset import load_problems as load_codeflow_problems
from ProofFlow.benchmark import DEFAULT_BENCHMARK as PROOFFLOW_BENCHMARK
from ProofFlow.benchmark import load_benchmark as load_proofflow_benchmark
from simulator.base.errors import UserError, cli_entry
from simulator.pools.graph import children_of, node_depths
from simulator.pools.pool import write_pool

log = logging.getLogger("poolbuild.synthetic")

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the bundled benchmark files (the loaders' defaults)
CODEFLOW_FILE = CODEFLOW_DATASET
PROOFFLOW_FILE = PROOFFLOW_BENCHMARK
TOPOLOGIES = ("layered", "chain", "fork_join", "codeflow", "proofflow")
DAG_KINDS = {
    "layered": "synthetic_layered",
    "chain": "synthetic_chain",
    "fork_join": "synthetic_fork_join",
    "codeflow": "synthetic_codeflow_topology",
    "proofflow": "synthetic_proofflow_topology",
}
#: Probability floor of the legacy model (ratio mode needs p_v > 0 on every node).
LEGACY_P_FLOOR = 0.05
P_CLIP = (0.01, 0.995)
# purposes of the keyed generators
_TOPO, _STATS, _SELECT = 0, 1, 2

# ----------------------------------------------------------------------------
# Graphs: parents lists indexed by node position (node id == position)
# ----------------------------------------------------------------------------


@dataclass
class Topology:
    """A DAG shape: ``parents[v]`` lists the parents of node ``v`` (ids 0..n-1)."""

    parents: list[list[int]]
    names: list[str] | None = None
    info: dict[str, Any] | None = None  # per-DAG provenance (source problem, shape params)

    @property
    def n(self) -> int:
        return len(self.parents)


def depths(parents: Sequence[Sequence[int]]) -> list[int]:
    """Longest-path depth of every node (roots 0); raises UserError on a cycle."""
    try:
        return list(node_depths(dict(enumerate(parents))).values())
    except ValueError as exc:
        raise UserError(f"the dependency graph has a cycle ({exc})") from None


def layered(
    n: int,
    n_layers: int,
    edge_prob: float,
    rng: np.random.Generator,
    max_width: int | None = None,
) -> Topology:
    """``n`` nodes in ``n_layers`` non-empty layers of at most ``max_width`` nodes.

    ``n_layers`` is raised to ``ceil(n / max_width)`` when needed.

    Each node of layer ``l >= 1`` links to every node of layer ``l-1`` with
    probability ``edge_prob`` (at least one such parent is forced, so the
    ``layer`` equals the graph depth) and to every node of layer ``l-2`` with
    probability ``edge_prob / 2``.
    """
    if n < 1:
        raise UserError("layered: --n-nodes must be >= 1")
    if max_width is not None:
        if max_width < 1:
            raise UserError("layered: --max-width must be >= 1")
        n_layers = max(n_layers, -(-n // max_width))
    n_layers = max(1, min(n_layers, n))
    sizes = np.ones(n_layers, dtype=np.int64)
    for _ in range(n - n_layers):  # each extra node joins a random layer that has room
        room = np.flatnonzero(sizes < max_width) if max_width is not None else np.arange(n_layers)
        sizes[room[int(rng.integers(len(room)))]] += 1
    layers: list[list[int]] = []
    nid = 0
    for s in sizes:
        layers.append(list(range(nid, nid + int(s))))
        nid += int(s)
    parents: list[list[int]] = [[] for _ in range(n)]
    for li in range(1, n_layers):
        prev, prev2 = layers[li - 1], layers[li - 2] if li >= 2 else []
        for v in layers[li]:
            ps = [u for u in prev if rng.random() < edge_prob]
            if not ps:
                ps = [prev[int(rng.integers(len(prev)))]]
            ps += [u for u in prev2 if rng.random() < edge_prob / 2]
            parents[v] = sorted(ps)
    info = {"n_layers": int(n_layers), "edge_prob": float(edge_prob)}
    if max_width is not None:
        info["max_width"] = int(max_width)
    return Topology(parents, info=info)


def chain(n: int) -> Topology:
    """0 -> 1 -> ... -> n-1."""
    if n < 1:
        raise UserError("chain: --n-nodes must be >= 1")
    return Topology([[v - 1] if v else [] for v in range(n)], info={})


def fork_join(width: int, length: int, repeats: int) -> Topology:
    """Root -> ``width`` parallel branches of ``length`` nodes -> join, ``repeats`` times.

    The join of one stage is the root of the next: ``1 + repeats*(width*length + 1)`` nodes.
    """
    if width < 1 or length < 1 or repeats < 1:
        raise UserError("fork_join: --width, --branch-length and --repeats must be >= 1")
    parents: list[list[int]] = [[]]
    root = 0
    for _ in range(repeats):
        tails = []
        for _b in range(width):
            prev = root
            for _s in range(length):
                parents.append([prev])
                prev = len(parents) - 1
            tails.append(prev)
        parents.append(sorted(tails))
        root = len(parents) - 1
    return Topology(parents, info={"width": width, "branch_length": length, "repeats": repeats})


def _load_json(path: Path, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise UserError(f"{path}: {what} file not found") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None


def codeflow_topologies(path: str | Path = CODEFLOW_FILE) -> list[Topology]:
    """Every CodeFlowBench-Repo problem as a topology (subproblems, dependencies by name).

    Read with the CodeFlow loader (:func:`codeflow.dataset.load_problems`), so
    a synthetic pool names a problem as a real CodeFlow pool does (including
    the suffix ``__2`` the loader gives the second of two problems sharing an id).
    """
    out = []
    for prob in load_codeflow_problems(path):
        parents = [sorted(prob.by_name[d].index for d in sub.dependencies) for sub in prob.subproblems]
        info = {"source": "codeflowbench_repo", "source_index": prob.source_index,
                "source_problem_id": prob.problem_id}  # fmt: skip
        out.append(Topology(parents, [sub.name for sub in prob.subproblems], info))
    return out


def proofflow_topologies(path: str | Path = PROOFFLOW_FILE) -> list[Topology]:
    """Every ProofFlowBench proof graph as a topology; self-loops are dropped with a warning.

    Read with the ProofFlow loader (:func:`ProofFlow.benchmark.load_benchmark`),
    so a synthetic pool names a problem as a real ProofFlow pool does (spaces
    in the benchmark's ids become ``_``).
    """
    out = []
    for i, prob in enumerate(load_proofflow_benchmark(path)):
        parents = [sorted(step.parents) for step in prob.steps]
        info: dict[str, Any] = {"source": "proofflowbench_0409", "source_index": i,
                                "source_problem_id": prob.problem_id}  # fmt: skip
        dropped = [step.name for step in prob.steps if step.self_loop_dropped]
        if dropped:
            info["dropped_self_loops"] = dropped
        out.append(Topology(parents, [step.name for step in prob.steps], info))
    return out


# ----------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------
# Assembling pool lines
# ----------------------------------------------------------------------------


def build_dag(
    topo: Topology,
    stats: ParametricStats | LibraryStats,
    rng: np.random.Generator,
    *,
    topology: str,
    index: int,
    n_rows: int,
    legacy: str,
    multi_model: bool,
    seed: int,
) -> dict[str, Any]:
    """One pool line from a topology and a statistics source."""
    n = topo.n
    layer = depths(topo.parents)
    children = children_of(dict(enumerate(topo.parents)))
    nodes = []
    for v in range(n):
        per_model = stats.node(rng, n_rows, legacy)
        node: dict[str, Any] = {"node_id": v}
        if topo.names is not None:
            node["name"] = topo.names[v]
        node.update({"parents": list(topo.parents[v]), "children": children[v], "layer": layer[v]})
        if multi_model:
            tpl, rows = per_model[legacy]
            node["template"] = tpl
            if rows is not None:
                node["empirical_samples"] = rows
            node["legacy_template_model"] = legacy
            node["model_templates"] = {m: t for m, (t, _) in per_model.items()}
            if n_rows > 0:
                node["empirical_samples_by_model"] = {m: r for m, (_, r) in per_model.items()}
        else:
            (tpl, rows), = per_model.values()
            node["template"] = tpl
            if rows is not None:
                node["empirical_samples"] = rows
            if legacy != "default":
                node["legacy_template_model"] = legacy
        nodes.append(node)
    info = dict(topo.info or {})
    source_pid = info.get("source_problem_id")
    pid = f"syn_{topology}_{index:04d}" + (f"_{source_pid}" if source_pid else "")
    dag: dict[str, Any] = {
        "problem_id": pid,
        "dag_kind": DAG_KINDS[topology],
        "synthetic": True,
        "n_nodes": n,
        "overall_depth": max(layer) + 1,
    }
    if multi_model:
        dag["model_ids"] = stats.model_ids
        dag["baseline_model"] = legacy
    elif legacy != "default":
        dag["baseline_model"] = legacy
    dag["synthetic_info"] = {"generator": "poolbuild.synthetic", "seed": seed, "index": index, **info}
    dag["nodes"] = nodes
    return dag


def _rng(seed: int, index: int, purpose: int) -> np.random.Generator:
    return np.random.default_rng([seed, index, purpose])


def parse_range(text: str | int, what: str) -> tuple[int, int]:
    """``"5-12"`` -> (5, 12); ``"7"`` -> (7, 7)."""
    s = str(text).strip()
    try:
        if "-" in s:
            a, b = s.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(s)
    except ValueError:
        raise UserError(f"{what}: expected an integer or a range like 5-12, got {text!r}") from None
    if lo > hi or lo < 1:
        raise UserError(f"{what}: bad range {text!r}")
    return lo, hi


def parse_topologies(text: str, n_dags: int | None) -> list[tuple[str, int | None]]:
    """``"codeflow:8,layered:10"`` -> [("codeflow", 8), ("layered", 10)]; a bare name takes --n-dags."""
    out: list[tuple[str, int | None]] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        name, _, count = part.partition(":")
        name = name.strip().replace("-", "_")
        if name not in TOPOLOGIES:
            raise UserError(f"unknown topology {name!r}; choose from {', '.join(TOPOLOGIES)}")
        if count:
            try:
                k = int(count)
            except ValueError:
                raise UserError(f"topology {part!r}: count must be an integer") from None
        else:
            k = n_dags
        if k is not None and k < 1:
            raise UserError(f"topology {part!r}: the number of DAGs must be >= 1")
        out.append((name, k))
    if not out:
        raise UserError("--topology is empty")
    return out


@dataclass
class ShapeConfig:
    """Shape parameters of the generated topologies (ranges are inclusive)."""

    n_nodes: tuple[int, int] = (5, 12)
    layers: tuple[int, int] | None = None  # default: about sqrt(n)..n/2 layers
    edge_prob: float = 0.5
    width: tuple[int, int] = (2, 3)
    branch_length: tuple[int, int] = (1, 2)
    repeats: tuple[int, int] = (1, 2)
    filter_nodes: tuple[int, int] | None = None  # benchmark topologies: keep sizes in range
    max_width: int | None = None  # most nodes per layer (layered; filter for benchmarks)


def _int_in(rng: np.random.Generator, r: tuple[int, int]) -> int:
    return int(rng.integers(r[0], r[1] + 1))


BENCHMARKS = ("codeflow", "proofflow")


def max_layer_width(topo: Topology) -> int:
    """Most nodes at one depth (a proxy for how many nodes can be ready at once)."""
    counts: dict[int, int] = {}
    for d in depths(topo.parents):
        counts[d] = counts.get(d, 0) + 1
    return max(counts.values())


def benchmark_topologies(
    topology: str,
    count: int | None,
    shape: ShapeConfig,
    rng: np.random.Generator,
    benchmark_file: str | Path | None = None,
) -> list[Topology]:
    """Benchmark problems of the size filter: all of them, or ``count`` picked at random.

    The picked problems keep their file order.
    """
    load = codeflow_topologies if topology == "codeflow" else proofflow_topologies
    default = CODEFLOW_FILE if topology == "codeflow" else PROOFFLOW_FILE
    topos = load(benchmark_file or default)
    if shape.filter_nodes is not None:
        lo, hi = shape.filter_nodes
        topos = [t for t in topos if lo <= t.n <= hi]
    if shape.max_width is not None:
        topos = [t for t in topos if max_layer_width(t) <= shape.max_width]
    if not topos:
        raise UserError(
            f"{topology}: no benchmark problem has {shape.filter_nodes or 'any number of'} nodes "
            f"and at most {shape.max_width or 'any number of'} nodes per layer "
            "(--benchmark-nodes, --max-width)"
        )
    if count is None:
        return topos
    if count > len(topos):
        raise UserError(
            f"{topology}: asked for {count} DAGs but only {len(topos)} benchmark problems "
            f"match (--benchmark-nodes {shape.filter_nodes or 'any'}, --max-width "
            f"{shape.max_width or 'any'})"
        )
    pick = rng.choice(len(topos), size=count, replace=False)
    return [topos[int(i)] for i in sorted(pick)]


def generated_topology(topology: str, shape: ShapeConfig, rng: np.random.Generator) -> Topology:
    """One ``layered``/``chain``/``fork_join`` topology drawn with ``rng``."""
    if topology == "chain":
        return chain(_int_in(rng, shape.n_nodes))
    if topology == "layered":
        n = _int_in(rng, shape.n_nodes)
        if shape.layers is not None:
            n_layers = _int_in(rng, shape.layers)
        else:
            lo = max(2, round(math.sqrt(n)))
            n_layers = int(rng.integers(min(lo, n), max(lo, n // 2) + 1))
        return layered(n, n_layers, shape.edge_prob, rng, shape.max_width)
    if topology == "fork_join":
        return fork_join(
            _int_in(rng, shape.width), _int_in(rng, shape.branch_length), _int_in(rng, shape.repeats)
        )
    raise UserError(f"unknown topology {topology!r}; choose from {', '.join(TOPOLOGIES)}")


def make_topologies(
    topology: str,
    count: int | None,
    shape: ShapeConfig,
    seed: int,
    start_index: int = 0,
    benchmark_file: str | Path | None = None,
) -> list[Topology]:
    """``count`` topologies of one kind (a convenience for callers outside :func:`generate`).

    Generated shapes are those DAGs ``start_index, start_index + 1, ...`` get
    in :func:`generate`; benchmark problems are picked with the key
    ``(seed, start_index, select)`` (in :func:`generate` the key holds the group number).
    """
    if topology in BENCHMARKS:
        rng = _rng(seed, start_index, _SELECT)
        return benchmark_topologies(topology, count, shape, rng, benchmark_file)
    if count is None:
        raise UserError(f"{topology}: give --n-dags (or {topology}:COUNT in --topology)")
    return [
        generated_topology(topology, shape, _rng(seed, start_index + i, _TOPO)) for i in range(count)
    ]


def interleave(counts: Sequence[int]) -> list[tuple[int, int]]:
    """Spread groups evenly: ``(group, j)`` ordered by ``(j + 0.5) / count``, ties by group.

    ``[2, 4]`` -> (1,0) (0,0) (1,1) (1,2) (0,1) (1,3): every prefix of the pool is a mix.
    """
    slots = [((j + 0.5) / c, g, j) for g, c in enumerate(counts) for j in range(c)]
    return [(g, j) for _, g, j in sorted(slots)]


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


def generate(
    topologies: Sequence[tuple[str, int | None]],
    *,
    stats: ParametricStats | LibraryStats,
    shape: ShapeConfig | None = None,
    n_rows: int = 0,
    seed: int = 0,
    legacy: str | None = None,
    benchmark_file: str | Path | None = None,
    order: str = "interleaved",
) -> list[dict[str, Any]]:
    """Pool lines for a list of ``(topology, count)`` groups.

    ``order="interleaved"`` spreads the groups evenly over the pool (any prefix,
    e.g. ``N_DAGS=8``, is a mix); ``"grouped"`` keeps them in the given order.
    Benchmark problems are picked with the generator ``(seed, group, select)``;
    DAG ``i`` draws its shape from ``(seed, i, topology)`` and its statistics
    from ``(seed, i, statistics)``.
    """
    shape = shape or ShapeConfig()
    model_ids = stats.model_ids
    legacy = legacy or model_ids[0]
    if legacy not in model_ids:
        raise UserError(f"legacy model {legacy!r} is not among the models {model_ids}")
    if order not in ("interleaved", "grouped"):
        raise UserError(f"order must be 'interleaved' or 'grouped', got {order!r}")
    multi = len(model_ids) > 1
    picked: list[list[Topology] | None] = []
    counts: list[int] = []
    for g, (topology, count) in enumerate(topologies):
        if topology in BENCHMARKS:
            rng = _rng(seed, g, _SELECT)
            picked.append(benchmark_topologies(topology, count, shape, rng, benchmark_file))
            counts.append(len(picked[-1]))
        else:
            if topology not in TOPOLOGIES:
                raise UserError(f"unknown topology {topology!r}; choose from {', '.join(TOPOLOGIES)}")
            if count is None:
                raise UserError(f"{topology}: give --n-dags (or {topology}:COUNT in --topology)")
            picked.append(None)
            counts.append(count)
    slots = (
        interleave(counts)
        if order == "interleaved"
        else [(g, j) for g, c in enumerate(counts) for j in range(c)]
    )
    dags: list[dict[str, Any]] = []
    for k, (g, j) in enumerate(slots):
        topology = topologies[g][0]
        group = picked[g]
        if group is not None:
            topo = group[j]
        else:
            topo = generated_topology(topology, shape, _rng(seed, k, _TOPO))
        dags.append(
            build_dag(
                topo,
                stats,
                _rng(seed, k, _STATS),
                topology=topology,
                index=k,
                n_rows=n_rows,
                legacy=legacy,
                multi_model=multi,
                seed=seed,
            )
        )
    return dags


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m poolbuild.synthetic",
        description=(
            "Write a SYNTHETIC DAG pool (JSONL): generated or benchmark topologies with "
            "per-node statistics from a parametric multi-LLM model or a template CSV. "
            "Every DAG is labelled synthetic (dag_kind synthetic_*, synthetic: true)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  python -m poolbuild.synthetic --topology layered --n-dags 20 --rows 16 --out p.jsonl\n"
            "  python -m poolbuild.synthetic --topology codeflow:8,layered:10,fork_join:6 \\\n"
            "      --benchmark-nodes 4-9 --max-width 2 --rows 16 --seed 2024 --out mix.jsonl\n"
            "  python -m poolbuild.synthetic --topology proofflow --models 30B_ins --out pf.jsonl\n"
            "  python -m poolbuild.synthetic --topology chain --n-dags 5 --template-csv lib.csv \\\n"
            "      --out c.jsonl\n"
            "details: docs/synthetic.md"
        ),
    )
    ap.add_argument(
        "--topology",
        default="layered",
        help="layered|chain|fork_join|codeflow|proofflow, or a mix like codeflow:8,layered:10 "
        "(default: layered)",
    )
    ap.add_argument(
        "--n-dags",
        type=int,
        default=None,
        help="DAGs per topology without a :COUNT (codeflow/proofflow: default all problems that "
        "pass --benchmark-nodes/--max-width)",
    )
    ap.add_argument("--n-nodes", default="5-12", help="nodes per generated DAG, N or LO-HI (default: 5-12)")
    ap.add_argument(
        "--benchmark-nodes",
        default=None,
        help="codeflow/proofflow: keep only problems with this many nodes, N or LO-HI",
    )
    ap.add_argument("--layers", default=None, help="layered: number of layers, N or LO-HI (default: round(sqrt(n)) to n/2)")
    ap.add_argument("--edge-prob", type=float, default=0.5, help="layered: edge probability (default: 0.5)")
    ap.add_argument(
        "--max-width",
        type=int,
        default=None,
        help="most nodes per layer (layered); codeflow/proofflow: keep only problems that narrow",
    )
    ap.add_argument("--width", default="2-3", help="fork_join: parallel branches, N or LO-HI (default: 2-3)")
    ap.add_argument("--branch-length", default="1-2", help="fork_join: nodes per branch (default: 1-2)")
    ap.add_argument("--repeats", default="1-2", help="fork_join: fork-join stages (default: 1-2)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument(
        "--models",
        default=None,
        help=f"parametric models: a count or a comma list of ids (default: {','.join(DEFAULT_MODELS)})",
    )
    src.add_argument("--model-spec", default=None, help="JSON file defining parametric models")
    src.add_argument(
        "--template-csv",
        default=None,
        help="template library CSV: success_prob,lat_mean,lat_std,cost_mean"
        "[,token_cost_mean,model_id]",
    )
    ap.add_argument(
        "--legacy-model",
        default=None,
        help="model whose stats fill the legacy template (default: the first model)",
    )
    ap.add_argument("--rows", type=int, default=0, help="empirical rows per (node, model); 0 = parametric templates only (default: 0)")
    ap.add_argument("--benchmark-file", default=None, help="override the bundled benchmark JSON")
    ap.add_argument(
        "--order",
        choices=("interleaved", "grouped"),
        default="interleaved",
        help="mixes: spread the topology groups evenly over the pool, or keep them in blocks "
        "(default: interleaved)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of every random draw (default: 0)")
    ap.add_argument("--out", required=True, help="output pool (JSONL, written atomically)")
    return ap


@cli_entry
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.rows < 0:
        raise UserError("--rows must be >= 0")
    if not 0.0 <= args.edge_prob <= 1.0:
        raise UserError("--edge-prob must be in [0, 1]")
    tops = parse_topologies(args.topology, args.n_dags)
    shape = ShapeConfig(
        n_nodes=parse_range(args.n_nodes, "--n-nodes"),
        layers=parse_range(args.layers, "--layers") if args.layers else None,
        edge_prob=args.edge_prob,
        max_width=args.max_width,
        width=parse_range(args.width, "--width"),
        branch_length=parse_range(args.branch_length, "--branch-length"),
        repeats=parse_range(args.repeats, "--repeats"),
    )
    if args.benchmark_nodes:
        shape.filter_nodes = parse_range(args.benchmark_nodes, "--benchmark-nodes")
    stats: ParametricStats | LibraryStats
    if args.template_csv:
        stats = LibraryStats(read_template_csv(args.template_csv))
    elif args.model_spec:
        stats = ParametricStats(load_model_spec(args.model_spec))
    else:
        stats = ParametricStats(resolve_models(args.models))
    dags = generate(
        tops,
        stats=stats,
        shape=shape,
        n_rows=args.rows,
        seed=args.seed,
        legacy=args.legacy_model,
        benchmark_file=args.benchmark_file,
        order=args.order,
    )
    n = write_pool(args.out, dags)
    n_nodes = sum(d["n_nodes"] for d in dags)
    print(f"wrote {n} synthetic DAGs ({n_nodes} nodes, models {stats.model_ids}) to {args.out}")
    return 0


__all__ = [
    "DEFAULT_MODELS",
    "LibraryStats",
    "ModelSpec",
    "ParamConfig",
    "ParametricStats",
    "ShapeConfig",
    "Topology",
    "build_dag",
    "chain",
    "codeflow_topologies",
    "fork_join",
    "generate",
    "layered",
    "main",
    "proofflow_topologies",
    "read_template_csv",
]

if __name__ == "__main__":
    sys.exit(main())
