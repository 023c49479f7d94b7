"""A pool learned from live traces: ``python -m poolbuild.from_traces TRACES_OR_DIRS... --workflow W [--prior P] --out L``.

Reads executor traces (files, or folders of ``*.jsonl`` traces), keeps the
requests of the workflow ``W`` (its content hash, which every trace's ``run``
event names), and writes **one pool line** (``docs/pool_format.md``) with
empirical rows per (node, model): one row per attempt the traces saw, its
latency the settled try's own ``answered_at - sent_at`` (not the request's
span, which holds queueing, back-off and failed tries), its cost the output
tokens, its success the verdict. ``docs/workflows.md`` has the whole path.

* **Censoring** (:mod:`poolbuild.censored`): a request cancelled on the wire
  (deadline, sibling, run end) is a latency right-censored at the time it
  ran; an answer cut at ``max_tokens`` a token count censored at the cap. Each
  is replaced by a whole observed row drawn from the Kaplan-Meier risk set
  above its censored value (keyed draws); ``censored`` counts them per pair.
* **Prior** (``--prior P``, row ``--prior-dag``): a pair the traces observed
  gets ``--prior-strength s`` (default 8) of the prior's rows beside its live
  rows, so the prior counts as s observations (success rate (s p0 + S) / (s + n),
  the rule of the executor's ``--update posterior``); a pair the traces did not
  observe keeps the prior's statistics unchanged. Without a prior, an
  unobserved pair is left out of the pool with one line saying so: it is
  *unobserved*, never marked unavailable.
* **Counts** per (node, model) in ``model_node_metadata``: ``live_rows``,
  ``prior_rows``, ``censored`` (imputed), ``dropped_censored`` (beyond every
  observed value), ``faults`` (tries that ended without an answer),
  ``other_model`` (answers a different model gave: a gateway's fallback is
  never mixed in).
* **Identity**: the line's ``learned`` object records the workflow hash, the
  traces it holds (by trace id), the prior and its strength, and the
  observations themselves, so ``executor run --learn L`` (:func:`learn_into`)
  adds a new trace without counting any twice.

One line each, and the build goes on: a torn last line (ignored, counted), a
trace given twice (counted once). Refused before anything is written, one
line naming the file and the item, exit 2: a trace of another workflow (hash
mismatch), a file that is not a trace, a prior whose graph is not the
workflow's, an output path that is an input, a node with neither an
observation nor a prior.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from poolbuild.censored import donor, km_jumps
from poolbuild.workflow_file import check_topology, read_workflow_doc
from simulator.base import cliargs
from simulator.base.errors import ConfigError, cli_entry
from simulator.base.jsonl_log import read_json_lines
from simulator.base.outputs import check_output_path
from simulator.pools.pool import load_pool, write_pool

ESTIMATOR = "kaplan-meier-hot-deck/1"
DEFAULT_STRENGTH = 8.0
#: statuses of a request that answered (a row, possibly censored on tokens)
ANSWERED = ("ok", "truncated")
#: statuses that are not attempts at all (never sent)
NOT_SENT = ("refused",)


@dataclass
class Obs:
    """One attempt of (node, model) as the traces saw it; ``None`` where unknown."""

    node: int
    model: str
    lat: float | None
    lat_observed: bool  # False: censored at ``lat`` (cancelled on the wire)
    tokens: float | None
    tok_observed: bool  # False: censored at ``tokens`` (cut at max_tokens)
    success: int | None
    key: str  # trace id : node : model : attempt (the keyed draws' identity)
    token_source: str = "usage"

    def pack(self) -> list:
        return [self.node, self.model, self.lat, self.lat_observed, self.tokens, self.tok_observed, self.success,
                self.key, self.token_source]

    @classmethod
    def unpack(cls, x: Sequence) -> Obs:
        return cls(int(x[0]), str(x[1]), x[2], bool(x[3]), x[4], bool(x[5]), x[6], str(x[7]), str(x[8]))


@dataclass
class Collected:
    """What the traces gave: observations, per-pair fault counts, the traces' identities, the lines to print."""

    obs: list[Obs] = field(default_factory=list)
    faults: dict[tuple[int, str], int] = field(default_factory=dict)
    other_model: dict[tuple[int, str], int] = field(default_factory=dict)
    traces: list[dict[str, Any]] = field(default_factory=list)
    torn: int = 0
    duplicates: int = 0
    models: list[str] = field(default_factory=list)  # the models the runs could use (their endpoints), in order


def trace_files(paths: Iterable[str]) -> list[Path]:
    """Each path a trace file, or a folder whose ``*.jsonl`` files (recursively, sorted) are traces."""
    out: list[Path] = []
    for p in paths:
        q = Path(p)
        if q.is_dir():
            out += sorted(x for x in q.rglob("*.jsonl") if x.is_file())
        elif q.is_file():
            out.append(q)
        else:
            raise ConfigError(f"{p}: no such trace file or folder")
    return out


def collect(files: Sequence[Path], wf_hash: str, say: Callable[[str], None], known: Iterable[str] = (),
            ) -> Collected:
    """The observations of ``files`` (traces of the workflow ``wf_hash``); ``known``: trace ids already held."""
    c = Collected()
    seen = {k: "the pool" for k in known}
    for path in files:
        events, torn = read_json_lines(path, "trace")
        if not events or events[0].get("event") != "run":
            raise ConfigError(f"{path}: not an executor trace (no 'run' event first)")
        run = events[0]
        h = run.get("workflow_hash")
        if h != wf_hash:
            raise ConfigError(f"{path}: run event: workflow_hash {h!r} is not the workflow's {wf_hash!r} "
                              f"(a trace of another workflow)")
        tid = run.get("trace_id") or "sha256:" + hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()
        if tid in seen:
            say(f"{path}: the same run as {seen[tid]} (trace id {tid}): counted once")
            c.duplicates += 1
            continue
        seen[tid] = str(path)
        if torn:
            say(f"{path}: torn last line (cut mid-write): ignored")
            c.torn += 1
        for m in run.get("models") or {}:
            if m not in c.models:
                c.models.append(str(m))
        c.traces.append({"trace_id": tid, "path": str(path), "started_utc": run.get("started_utc"),
                         "torn": bool(torn)})
        observe(events, run, tid, c)
    return c


def observe(events: list[dict[str, Any]], run: Mapping[str, Any], tid: str, c: Collected) -> None:
    verdicts = {(e.get("node"), e.get("model"), e.get("attempt")): e for e in events if e.get("event") == "verdict"}
    served_as = {m: str(v.get("model", m)) for m, v in (run.get("models") or {}).items()}
    for r in events:
        if r.get("event") != "request" or r.get("node") is None or r.get("status") in NOT_SENT:
            continue
        node, model, attempt = int(r["node"]), str(r["model"]), r.get("attempt")
        pair = (node, model)
        status = r.get("status")
        key = f"{tid}:{node}:{model}:{attempt}"
        served = r.get("served_model")
        if status in ANSWERED and served and not served.startswith(served_as.get(model, model)):
            c.other_model[pair] = c.other_model.get(pair, 0) + 1
            continue
        if status in ANSWERED:
            lat = r.get("latency")
            if lat is None:  # a trace from before per-try times: the request's span
                lat = float(r.get("end", 0.0)) - float(r.get("start", 0.0))
            v = verdicts.get((node, model, attempt))
            tok = r.get("output_tokens")
            src = "estimated" if r.get("usage") == "local" else "usage"
            if status == "truncated":  # longer than its cap: tokens censored, success unknown
                c.obs.append(Obs(node, model, float(lat), True, float(r.get("max_tokens") or tok or 0), False, None,
                                 key, src))
            elif v is not None and tok is not None:
                c.obs.append(Obs(node, model, float(lat), True, float(tok), True, int(bool(v.get("passed"))), key,
                                 src))
            continue
        if status == "cancelled" and r.get("censored") == "latency" and r.get("censored_at") is not None:
            c.obs.append(Obs(node, model, float(r["censored_at"]), False, None, False, None, key))
            continue
        if status != "cancelled":
            c.faults[pair] = c.faults.get(pair, 0) + 1


# -- rows ------------------------------------------------------------------------------------


def _uniform(seed: int, key: str) -> float:
    """A keyed uniform in [0, 1) (the observation's identity, not its order, decides its imputation)."""
    d = hashlib.sha256(f"{seed}|{key}".encode()).digest()
    return int.from_bytes(d[:8], "big") / 2.0 ** 64


def live_rows(obs: Sequence[Obs], seed: int) -> tuple[list[dict[str, Any]], int, int]:
    """(rows, imputed, dropped) of one (node, model): complete attempts as they are, each censored one replaced
    by a donor row from the Kaplan-Meier risk set above its censored value (:mod:`poolbuild.censored`)."""
    full = [o for o in obs if o.lat_observed and o.tok_observed and o.success is not None]
    rows = [{"latency": max(o.lat, 1e-3), "success": int(o.success), "cost": o.tokens, "token_cost": o.tokens,
             "latency_source": "request_try", "token_source": o.token_source, "rollout_id": o.key} for o in full]
    imputed = dropped = 0
    lat_cens = [o for o in obs if not o.lat_observed]
    tok_cens = [o for o in obs if o.lat_observed and not o.tok_observed]
    for cens, attr, strict in ((lat_cens, "lat", True), (tok_cens, "tokens", False)):
        if not cens:
            continue
        values = np.array([getattr(o, attr) for o in full] + [getattr(o, attr) for o in cens], dtype=float)
        observed = np.array([True] * len(full) + [False] * len(cens))
        weights = km_jumps(values, observed)
        cand = np.arange(len(full))
        for o in cens:
            d = donor(values, weights, cand, float(getattr(o, attr)), strict, _uniform(seed, o.key))
            if d < 0:
                dropped += 1
                continue
            row = dict(rows[d])
            row.update(latency_source="imputed_km", rollout_id=o.key, donor=full[d].key)
            rows.append(row)
            imputed += 1
    return rows, imputed, dropped


def _prior_models(raw_node: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """A prior node's available models: {model: (template, rows)} (unavailable ones, Infinity, left out)."""
    out = {}
    tmpls = raw_node.get("model_templates") or {}
    if tmpls:
        legacy = raw_node.get("legacy_template_model") or "default"
        by_model = raw_node.get("empirical_samples_by_model") or {}
        for m, t in tmpls.items():
            if not all(math.isfinite(float(t.get(k, 0.0))) for k in ("lat_mean", "cost_mean", "token_cost_mean")
                       if k in t):
                continue
            rows = by_model.get(m) or (raw_node.get("empirical_samples") or [] if m == legacy else [])
            out[m] = (dict(t), list(rows))
    elif raw_node.get("template") is not None or raw_node.get("empirical_samples"):
        out["default"] = (dict(raw_node.get("template") or {}), list(raw_node.get("empirical_samples") or []))
    return out


def prior_share(template: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], strength: float, seed: int,
                pair_key: str) -> list[dict[str, Any]]:
    """``strength`` rows standing for the prior beside live rows: a keyed choice of its rows (cycled when it has
    fewer), or, for a template without rows, rows with its success rate, mean and spread."""
    s = int(round(strength))
    if s <= 0:
        return []
    if rows:
        order = sorted(range(len(rows)), key=lambda i: _uniform(seed, f"{pair_key}:prior:{i}"))
        return [dict(rows[order[i % len(rows)]], prior=True) for i in range(s)]
    p = float(template.get("success_prob", 0.0))
    mu, sd = float(template.get("lat_mean", 1.0)), float(template.get("lat_std", 0.0) or 0.0)
    tok = float(template.get("token_cost_mean", template.get("cost_mean", 0.0)))
    wins = int(round(s * p))
    return [{"latency": max(mu + (sd if i % 2 else -sd), 1e-3), "success": int(i < wins), "cost": tok,
             "token_cost": tok, "prior": True} for i in range(s)]


def template_of(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The template of rows: success rate, latency mean and spread, mean charge (what the rows draw)."""
    lat = np.array([float(r["latency"]) for r in rows])
    tok = np.array([float(r.get("token_cost", r.get("cost", 0.0))) for r in rows])
    return {"success_prob": float(np.mean([int(r["success"]) for r in rows])), "lat_mean": float(lat.mean()),
            "lat_std": float(lat.std()), "cost_mean": float(tok.mean()), "token_cost_mean": float(tok.mean())}


@dataclass
class Graph:
    """The workflow's graph and identity as the learned line carries them."""

    name: str
    hash: str
    node_ids: list[int]
    names: dict[int, str]
    parents: dict[int, list[int]]


def build_line(g: Graph, obs: Sequence[Obs], *, prior_line: Mapping[str, Any] | None, prior_meta: Any,
               strength: float, seed: int, faults: Mapping[tuple[int, str], int],
               other_model: Mapping[tuple[int, str], int], traces: list[dict[str, Any]],
               say: Callable[[str], None], offered: Sequence[str] = ()) -> dict[str, Any]:
    """The learned pool line (module docstring)."""
    by_pair: dict[tuple[int, str], list[Obs]] = {}
    for o in obs:
        if o.node in g.names:
            by_pair.setdefault((o.node, o.model), []).append(o)
    prior_nodes = {int(n["node_id"]): n for n in (prior_line or {}).get("nodes", [])}
    models: list[str] = list((prior_line or {}).get("model_ids") or [])
    for n in prior_nodes.values():
        for m in _prior_models(n):
            if m not in models:
                models.append(m)
    for m in [*offered, *(m for _, m in sorted(by_pair, key=lambda p: (p[1], p[0])))]:
        if m not in models:
            models.append(m)
    children: dict[int, list[int]] = {v: [] for v in g.node_ids}
    for v in g.node_ids:
        for p in g.parents[v]:
            children[p].append(v)
    nodes = []
    for v in g.node_ids:
        prior = _prior_models(prior_nodes[v]) if v in prior_nodes else {}
        tmpls, samples, meta = {}, {}, {}
        for m in models:
            live = by_pair.get((v, m), [])
            rows, imputed, dropped = live_rows(live, seed) if live else ([], 0, 0)
            counts = {"live_rows": len(rows), "prior_rows": 0, "censored": imputed, "dropped_censored": dropped,
                      "faults": int(faults.get((v, m), 0)), "other_model": int(other_model.get((v, m), 0))}
            if rows:
                if m in prior:
                    share = prior_share(*prior[m], strength, seed, f"{v}:{m}")
                    rows = rows + share
                    counts["prior_rows"] = len(share)
                tmpls[m], samples[m] = template_of(rows), rows
                counts["source"] = "live+prior" if counts["prior_rows"] else "live"
            elif m in prior:
                t, prow = prior[m]
                tmpls[m] = t
                if prow:
                    samples[m] = prow
                counts.update(prior_rows=len(prow), source="prior")
            else:
                if live or (v, m) in faults or (v, m) in other_model:
                    say(f"node {v} ({g.names[v]}) model {m}: no usable observation and no prior: left out "
                        f"(unobserved, not unavailable)")
                else:
                    say(f"node {v} ({g.names[v]}) model {m}: unobserved and no prior: left out "
                        f"(unobserved, not unavailable)")
                continue
            meta[m] = counts
        if not tmpls:
            raise ConfigError(f"node {v} ({g.names[v]}): no observation of any model and no prior: explore it "
                              f"first (python -m executor explore), or give --prior")
        legacy = prior_nodes.get(v, {}).get("legacy_template_model")
        if legacy not in tmpls:  # the first model of the endpoints' order: stable whatever the counts
            legacy = next(m for m in models if m in tmpls)
        nodes.append({"node_id": v, "name": g.names[v], "parents": list(g.parents[v]), "children": children[v],
                      "model_templates": tmpls, "empirical_samples_by_model": samples,
                      "legacy_template_model": legacy, "model_node_metadata": meta})
    used = [m for m in models if any(m in n["model_templates"] for n in nodes)]
    return {"problem_id": g.name, "dag_kind": "learned", "benchmark": "live", "model_ids": used, "nodes": nodes,
            "learned": {"workflow_hash": g.hash, "estimator": ESTIMATOR, "seed": seed, "prior_strength": strength,
                        "prior": prior_meta, "prior_line": prior_line, "traces": traces,
                        "obs": [o.pack() for o in obs], "offered": list(offered),
                        "faults": [[v, m, k] for (v, m), k in sorted(faults.items())],
                        "other_model": [[v, m, k] for (v, m), k in sorted(other_model.items())]}}


def graph_of_line(line: Mapping[str, Any]) -> Graph:
    """The graph and identity of a learned line (what :func:`learn_into` rebuilds with)."""
    nodes = line["nodes"]
    return Graph(str(line["problem_id"]), str(line["learned"]["workflow_hash"]), [int(n["node_id"]) for n in nodes],
                 {int(n["node_id"]): str(n.get("name", f"node_{n['node_id']}")) for n in nodes},
                 {int(n["node_id"]): [int(p) for p in n["parents"]] for n in nodes})


def read_learned(path: str | Path) -> dict[str, Any]:
    """A learned pool's one line (refused in one line when it is not one)."""
    pool = load_pool(path)  # a valid pool first
    if len(pool) != 1:
        raise ConfigError(f"{path}: a learned pool has one line, this one has {len(pool)}")
    line = pool.raw(0)
    if not isinstance(line.get("learned"), dict) or "obs" not in line["learned"]:
        raise ConfigError(f"{path}: line 1: not a learned pool (no 'learned' object; build one with "
                          f"python -m poolbuild.from_traces)")
    return line


def learn_into(pool_path: str | Path, traces: Sequence[str | Path], say: Callable[[str], None]) -> dict[str, Any]:
    """Add the observations of ``traces`` to the learned pool at ``pool_path`` (atomically; a trace it already
    holds is counted once). Returns the new line."""
    line = read_learned(pool_path)
    learned = line["learned"]
    g = graph_of_line(line)
    c = collect([Path(t) for t in traces], g.hash, say, known=[t["trace_id"] for t in learned["traces"]])
    obs = [Obs.unpack(x) for x in learned["obs"]] + c.obs
    faults = {(int(v), str(m)): int(k) for v, m, k in learned.get("faults", [])}
    other = {(int(v), str(m)): int(k) for v, m, k in learned.get("other_model", [])}
    for src, dst in ((c.faults, faults), (c.other_model, other)):
        for k, n in src.items():
            dst[k] = dst.get(k, 0) + n
    offered = list(learned.get("offered") or [])
    offered += [m for m in c.models if m not in offered]
    new = build_line(g, obs, prior_line=learned.get("prior_line"), prior_meta=learned.get("prior"),
                     strength=float(learned["prior_strength"]), seed=int(learned["seed"]), faults=faults,
                     other_model=other, traces=learned["traces"] + c.traces, say=lambda _m: None, offered=offered)
    write_pool(pool_path, [new])
    return new


def _sha256(path: str | Path) -> str:
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


def summary_lines(line: Mapping[str, Any]) -> list[str]:
    """Per (node, model): live rows, prior rows, censored (imputed), source."""
    out = [f"{'node':>4s} {'name':16s} {'model':12s} {'live':>5s} {'prior':>5s} {'cens':>5s} {'p':>6s} "
           f"{'lat':>8s} {'tokens':>8s} source"]
    for n in line["nodes"]:
        for m, meta in n["model_node_metadata"].items():
            t = n["model_templates"][m]
            out.append(f"{n['node_id']:>4d} {str(n.get('name', ''))[:16]:16s} {m[:12]:12s} {meta['live_rows']:>5d} "
                       f"{meta['prior_rows']:>5d} {meta['censored']:>5d} {t['success_prob']:6.3f} "
                       f"{t['lat_mean']:8.3f} {t.get('token_cost_mean', t.get('cost_mean', 0.0)):8.1f} "
                       f"{meta['source']}")
    return out


@cli_entry
def main(argv: Sequence[str] | None = None) -> int:
    ap = cliargs.ArgumentParser(prog="python -m poolbuild.from_traces",
                                 description="Learn a pool line of a workflow from executor traces.")
    ap.add_argument("traces", type=cliargs.input_path("any"), nargs="+", metavar="TRACES_OR_DIRS", help="trace files or folders of *.jsonl traces")
    ap.add_argument("--workflow", type=cliargs.input_path(), required=True, metavar="W", help="the workflow file the traces ran")
    ap.add_argument("--prior", type=cliargs.input_path(), default=None, metavar="P", help="a pool whose line --prior-dag is the prior")
    ap.add_argument("--prior-dag", type=int, default=0, help="row of the prior's DAG (0-based)")
    ap.add_argument("--prior-strength", type=cliargs.number(0), default=DEFAULT_STRENGTH,
                    help="observations the prior counts as, per observed (node, model) (default 8)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the keyed imputation draws")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, metavar="L", help="the learned pool (JSONL, one line)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    ap.add_argument("--quiet", action="store_true", help="no table")
    args = ap.parse_args(argv)
    if not (math.isfinite(args.prior_strength) and args.prior_strength >= 0):
        raise ConfigError(f"--prior-strength must be a finite number >= 0, got {args.prior_strength}")
    wf = read_workflow_doc(args.workflow)
    files = trace_files(args.traces)
    if not files:
        raise ConfigError(f"{' '.join(args.traces)}: no trace (*.jsonl) found")
    check_output_path(args.out, inputs=[args.workflow, args.prior, *files], overwrite=args.overwrite)
    prior_line, prior_meta = None, None
    if args.prior:
        pool = load_pool(args.prior)
        if not (0 <= args.prior_dag < len(pool)):
            raise ConfigError(f"{args.prior}: --prior-dag {args.prior_dag} does not exist (the pool has {len(pool)} "
                              f"DAGs)")
        prior_line = pool.raw(args.prior_dag)
        parents = {int(n["node_id"]): [int(p) for p in n["parents"]] for n in prior_line["nodes"]}
        check_topology(wf, list(parents), parents, f"{args.prior} line {args.prior_dag + 1}", "the prior")
        prior_meta = {"path": str(args.prior), "dag": args.prior_dag, "sha256": _sha256(args.prior)}

    def say(msg: str) -> None:
        print(msg, file=sys.stderr)

    c = collect(files, wf.hash, say)
    g = Graph(wf.name, wf.hash, list(wf.node_ids), dict(wf.names), {v: list(p) for v, p in wf.parents.items()})
    line = build_line(g, c.obs, prior_line=prior_line, prior_meta=prior_meta, strength=args.prior_strength,
                      seed=args.seed, faults=c.faults, other_model=c.other_model, traces=c.traces, say=say,
                      offered=c.models)
    write_pool(args.out, [line])
    n_cens = sum(meta["censored"] for n in line["nodes"] for meta in n["model_node_metadata"].values())
    print(f"{args.out}: {len(c.traces)} traces ({c.torn} torn, {c.duplicates} duplicates), {len(c.obs)} "
          f"observations ({n_cens} censored, imputed), workflow {wf.hash}")
    if not args.quiet:
        print("\n".join(summary_lines(line)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
