"""Shards: what one job computes, its command line, and how its outputs are verified.

A shard is one budget group (a budget and all its deadlines) x a slice of
DAGs x all trials x all method labels. Baselines are simulated once per
(budget, DAG) with D = inf and scored for every deadline of the group; MCPP
runs per cell. Outputs are one file per (budget group, DAG)::

    <run>/outputs/<group>/dag_<row>.jsonl

so the shard layout (``DAGS_PER_SHARD``) never changes what is on disk, and a
restarted or re-laid-out run reuses every verified file.

A per-DAG file (a *part*) starts with one header line,
``{"mcpp_part": 1, "fingerprint": ..., "dag_idx": ..., "group": ...,
"n_records": ..., "records_bytes": ..., "records_sha256": ...}``: the
fingerprint of the settings that make the part
(:meth:`ShardSpec.part_fingerprint`) and its own counts. A part is
**verified** when the header names this DAG, group and fingerprint, the file
has exactly the announced size and records hash, and every record parses and is one of
the expected ones: one per (cell of the group, method label, trial), each
naming the right DAG. A truncated, partial, foreign or swapped file fails
verification and is redone. The quick check (:func:`quick_check_part`, used
by ``status`` and before a ``done`` shard is trusted) reads only the header
and the file's size. A part written before parts had a header is verified by
its records alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import loads_fast
from simulator.engine.registry import split_method_list

from .grid import AxisValue, Cell, cell_id
from .methods import method_labels

RUN_SHARD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run_shard.py")


def compress_ints(values: Sequence[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2,5,7-8' (order kept; runs only when ascending by 1)."""
    parts: list[str] = []
    i = 0
    vals = list(values)
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(parts)


def expand_ints(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        a, sep, b = part.partition("-")
        try:
            if sep:
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(a))
        except ValueError:
            raise ConfigError(f"bad DAG list {text!r}: use '0-9,12'") from None
    return out


MAX_DAGS_PER_SHARD = 10_000_000  # a typo like 0-1000000000 is refused, not expanded into memory


def parse_dag_list(text: str, name: str = "--dags") -> list[int]:
    """A job line's DAG list (``0-9,12``): non-empty, ascending ranges, each DAG once, every row >= 0.

    Stricter than :func:`expand_ints`: ``5-2`` (a descending range), ``""``
    (no DAG) and ``0,0`` (a DAG twice, computed and counted twice) are
    refused in one line naming ``name``, before any work.
    """
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        a, sep, b = part.partition("-")
        try:
            lo = int(a)
            hi = int(b) if sep else lo
        except ValueError:
            raise ConfigError(f"{name} {text!r}: {part!r} is not a row or a range of rows (write e.g. '0-9,12')") from None
        if lo < 0:
            raise ConfigError(f"{name} {text!r}: rows are integers >= 0, got {lo}")
        if hi < lo:
            raise ConfigError(f"{name} {text!r}: the range {part!r} is descending (write {hi}-{lo})")
        if hi - lo + len(out) >= MAX_DAGS_PER_SHARD:
            raise ConfigError(f"{name} {text!r}: more than {MAX_DAGS_PER_SHARD} DAGs in one shard")
        out.extend(range(lo, hi + 1))
    if not out:
        raise ConfigError(f"{name} {text!r}: no DAG given (write e.g. '0-9,12')")
    if len(set(out)) != len(out):
        seen: set[int] = set()
        twice = next(d for d in out if d in seen or seen.add(d))
        raise ConfigError(f"{name} {text!r}: DAG {twice} is listed twice")
    return out


def _axis_arg(text: str, name: str) -> AxisValue:
    try:
        return AxisValue.parse_token(text)
    except ConfigError as exc:
        raise ConfigError(f"{name} {text!r}: {exc}") from None


@dataclass
class ShardSpec:
    """Everything one shard needs; round-trips through its command line."""

    shard: int
    group: str
    budget: AxisValue
    deadlines: list[AxisValue]
    dags: list[int]
    pool: str
    pool_sha256: str
    out_dir: str
    n_trials: int
    seed: int
    cost_mode: str
    latency_dist: str
    methods: list[str]
    baseline_suite: list[str] = field(default_factory=list)
    prices: dict[str, float] | None = None
    default_price_model: str | None = None
    mcpp: dict[str, Any] = field(default_factory=dict)
    planning: dict[str, Any] = field(default_factory=dict)
    further: dict[str, Any] = field(default_factory=dict)
    execution_rules: str = "published"
    progress_file: str | None = None
    #: the run's pool index (``harness.pool_index``): the shard reads only its rows; None = read the whole pool
    pool_index: str | None = None

    @property
    def shard_id(self) -> str:
        return f"s{self.shard:05d}"

    def cells(self) -> list[Cell]:
        return [Cell(self.group, self.budget, d) for d in self.deadlines]

    def labels(self):
        return method_labels(self.methods, self.baseline_suite)

    def relative_to(self, run_dir: str) -> ShardSpec:
        """This spec with its run-internal paths (outputs, progress file) resolved against ``run_dir``.

        Absolute paths (a run prepared before paths became relative) are kept.
        """
        return dataclasses.replace(
            self,
            out_dir=os.path.join(run_dir, self.out_dir),
            progress_file=os.path.join(run_dir, self.progress_file) if self.progress_file else None,
            pool_index=os.path.join(run_dir, self.pool_index) if self.pool_index else None,
        )

    def dag_output(self, dag: int, out_dir: str | None = None) -> str:
        return dag_output_path(out_dir or self.out_dir, self.group, dag)

    def part(self, dag: int, out_dir: str | None = None) -> str:
        """The file of one DAG's records (the name a surface shard's part has too)."""
        return self.dag_output(dag, out_dir)

    def verify(self, out_dir: str | None = None, quick: bool = False) -> dict[int, FileCheck]:
        """Every DAG file of the shard checked (``quick``: header and size only; ``out_dir`` overrides the
        recorded one); a surface shard has the same method (:class:`harness.surface.job.SurfaceShard`)."""
        check = self.part_checker()
        return {d: check(self.dag_output(d, out_dir), d, quick=quick) for d in self.dags}

    def expected_keys(self, dag: int | None = None) -> set[tuple[str, str, int]]:
        """(cell id, method label, trial) of every record of one DAG's file."""
        return {
            (c.cell_id, lab.label, t)
            for c in self.cells()
            for lab in self.labels()
            for t in range(self.n_trials)
        }

    def units_per_dag(self) -> int:
        return len(self.deadlines) * len(self.labels()) * self.n_trials

    def part_fingerprint(self) -> str:
        """Hash of every setting that makes this shard's parts (not the DAG slice, paths or shard number).

        Every shard of one budget group of a run has the same one; a part of
        another run, group, seed, pool, trial count or method list has another.
        """
        from .config import settings_fingerprint

        d = self.to_json()
        for k in ("shard", "dags", "pool", "out_dir", "progress_file", "pool_index"):
            d.pop(k, None)
        return settings_fingerprint(d)

    def part_checker(self):
        """``check(path, dag, quick=False) -> FileCheck`` for this shard's parts."""
        expected = self.expected_keys()
        fp = self.part_fingerprint()
        group = self.group

        def check(path: str, dag: int, quick: bool = False) -> FileCheck:
            return check_dag_output(path, dag, expected, fingerprint=fp, group=group, quick=quick)

        return check

    def to_argv(self) -> list[str]:
        argv = [
            "--shard", str(self.shard),
            "--pool", self.pool,
            "--pool-sha256", self.pool_sha256,
            "--out-dir", self.out_dir,
            "--budget-group", self.group,
            "--budget", self.budget.token(),
            "--deadlines", ",".join(d.token() for d in self.deadlines),
            "--dags", compress_ints(self.dags),
            "--trials", str(self.n_trials),
            "--seed", str(self.seed),
            "--cost-mode", self.cost_mode,
            "--latency-dist", self.latency_dist,
            "--methods", ",".join(self.methods),
        ]  # fmt: skip
        if self.baseline_suite:
            argv += ["--baseline-suite", ",".join(self.baseline_suite)]
        if self.prices is not None:
            argv += ["--prices", json.dumps(self.prices, sort_keys=True, separators=(",", ":"))]
        if self.default_price_model:
            argv += ["--default-price-model", self.default_price_model]
        if self.mcpp:
            argv += ["--mcpp-params", json.dumps(self.mcpp, sort_keys=True, separators=(",", ":"))]
        if self.planning:
            argv += ["--planning", json.dumps(self.planning, sort_keys=True, separators=(",", ":"))]
        if self.execution_rules != "published":
            argv += ["--execution-rules", self.execution_rules]
        if self.further:
            argv += ["--further-params", json.dumps(self.further, sort_keys=True, separators=(",", ":"))]
        if self.progress_file:
            argv += ["--progress-file", self.progress_file]
        if self.pool_index:
            argv += ["--pool-index", self.pool_index]
        return argv

    def command(self, python: str) -> str:
        """The self-contained job line (``jobs_list.txt``)."""
        return " ".join(shlex.quote(a) for a in [python, RUN_SHARD, *self.to_argv()])

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["budget"] = self.budget.token()
        d["deadlines"] = [x.token() for x in self.deadlines]
        return d

    @staticmethod
    def from_json(obj: dict) -> ShardSpec:
        d = dict(obj)
        d["budget"] = AxisValue.parse_token(d["budget"])
        d["deadlines"] = [AxisValue.parse_token(x) for x in d["deadlines"]]
        return ShardSpec(**d)


def add_shard_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``run_shard.py`` (the job line)."""
    p.add_argument("--shard", type=int, default=0, help="shard number (for messages and progress)")
    p.add_argument("--pool", type=cliargs.input_path(), required=True, help="execution pool (JSONL)")
    p.add_argument("--pool-sha256", default="", help="refuse to run if the pool file changed since prepare")
    p.add_argument("--out-dir", type=cliargs.output_path("dir"), required=True, help="outputs root: <out-dir>/<group>/dag_<row>.jsonl")
    p.add_argument("--budget-group", required=True, help="budget group key (e.g. b00)")
    p.add_argument("--budget", required=True, help="ratio:X (x nominal budget) or absolute:X")
    p.add_argument("--deadlines", required=True, help="comma list of ratio:X / absolute:X (inf allowed)")
    p.add_argument("--dags", required=True, help="pool rows, e.g. 0-9,12")
    p.add_argument("--trials", type=int, required=True, help="trials 0..N-1")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--cost-mode", required=True)
    p.add_argument("--latency-dist", required=True)
    p.add_argument("--methods", required=True, help="comma list of simulator methods")
    p.add_argument("--baseline-suite", default="", help="models to re-run the baselines with (comma list)")
    p.add_argument("--prices", default=None, help="JSON {model: $ per 1M output tokens} (money mode)")
    p.add_argument("--default-price-model", default=None)
    p.add_argument("--mcpp-params", default=None, help="JSON of the resolved MCPP parameters")
    p.add_argument("--planning", default=None, help="JSON of RunSettings.planning (robustness)")
    p.add_argument("--further-params", default=None, help="JSON of the resolved LOADER / Chernoff parameters")
    p.add_argument("--execution-rules", default="published", choices=("published", "atomic", "per_attempt", "live"))
    p.add_argument("--progress-file", type=cliargs.output_path(), default=None, help="JSON progress for the orchestrator (not a result)")
    p.add_argument("--pool-index", type=cliargs.input_path(), default=None, help="the run's pool index (prepare): read only this shard's rows")


def _json_arg(text: str | None, what: str):
    """A JSON object flag (the one strict reader: no NaN, no repeated key); anything but an object refused."""
    from simulator.base.jsonread import loads_checked

    if text in (None, ""):
        return None
    obj = loads_checked(text, f"{what} (flag)")
    if not isinstance(obj, dict):
        raise ConfigError(f"{what} (flag): expected a JSON object, got {text[:60]!r}")
    return obj


def spec_from_args(a: argparse.Namespace) -> ShardSpec:
    """The shard of a job line; every flag checked here, before any work (one line naming the flag)."""
    from simulator.base.outputs import check_output_name, check_output_path
    from simulator.base.validation import check_choice, check_distinct, check_int
    from simulator.costs.arrays import LATENCY_DISTS
    from simulator.costs.charges import check_price_table, normalize_cost_mode
    from simulator.methods import method_spec

    check_int(a.shard, "--shard", "flag", lo=0)
    check_int(a.trials, "--trials", "flag", lo=1)
    check_int(a.seed, "--seed", "flag", lo=0)
    check_output_name(a.budget_group, flag="--budget-group")
    out_dir = os.path.abspath(a.out_dir)
    check_output_path(dag_output_path(out_dir, a.budget_group, 0), inputs=(a.pool,), inside=out_dir,
                      flag="--budget-group")  # fmt: skip
    deadlines = [_axis_arg(x, "--deadlines") for x in a.deadlines.split(",") if x.strip()]
    if not deadlines:
        raise ConfigError(f"--deadlines {a.deadlines!r}: no deadline given (write e.g. 'ratio:1,absolute:inf')")
    check_distinct([d.token() for d in deadlines], "--deadlines", "flag")  # decided now, not after every episode
    methods = split_method_list(a.methods)  # a variant NAME[a=1,b=2] holds commas
    if not methods:
        raise ConfigError(f"--methods {a.methods!r}: no method given")
    for m in methods:
        method_spec(m, "--methods (flag)")
    try:
        normalize_cost_mode(a.cost_mode)
    except ConfigError as exc:
        raise ConfigError(f"--cost-mode (flag): {exc}") from None
    check_choice(a.latency_dist, "--latency-dist", LATENCY_DISTS, "flag")
    return ShardSpec(
        shard=a.shard,
        group=a.budget_group,
        budget=_axis_arg(a.budget, "--budget"),
        deadlines=deadlines,
        dags=parse_dag_list(a.dags, "--dags"),
        pool=os.path.abspath(a.pool),
        pool_sha256=a.pool_sha256,
        out_dir=out_dir,
        n_trials=a.trials,
        seed=a.seed,
        cost_mode=a.cost_mode,
        latency_dist=a.latency_dist,
        methods=methods,
        baseline_suite=[m for m in a.baseline_suite.split(",") if m],
        prices=check_price_table(_json_arg(a.prices, "--prices"), "--prices (flag)"),
        default_price_model=a.default_price_model,
        mcpp=_json_arg(a.mcpp_params, "--mcpp-params") or {},
        planning=_json_arg(a.planning, "--planning") or {},
        further=_json_arg(a.further_params, "--further-params") or {},
        execution_rules=a.execution_rules,
        progress_file=os.path.abspath(a.progress_file) if a.progress_file else None,  # errors name it whole
        pool_index=os.path.abspath(a.pool_index) if a.pool_index else None,
    )


def dag_output_path(out_dir: str, group: str, dag: int) -> str:
    return os.path.join(out_dir, group, f"dag_{dag:06d}.jsonl")


# ----------------------------------------------------------------------------
# Verification
# ----------------------------------------------------------------------------


@dataclass
class FileCheck:
    """Result of checking one per-DAG output file."""

    ok: bool
    problem: str = ""  # "missing", "unreadable", "truncated", "incomplete", "unexpected records"
    present: set = field(default_factory=set)
    n_lines: int = 0


#: ``json.loads`` of one record line, faster (the values are the same)
loads_record = loads_fast


def read_records(path: str) -> Iterable[tuple[int, str, dict | None]]:
    """(line number, raw line, parsed record or None if it is not valid JSON)."""
    with open(path, "rb") as fh:
        for no, raw in enumerate(fh, 1):
            text = raw.decode("utf-8", errors="replace")
            if not text.endswith("\n"):
                yield no, text, None  # a last line without newline: truncated write
                continue
            try:
                yield no, text, loads_record(text)
            except json.JSONDecodeError:
                yield no, text, None


PART_KEY = "mcpp_part"
PART_FORMAT = 1


def part_header(dag: int, group: str, fingerprint: str, records_text: str) -> str:
    """The header line of a part holding ``records_text`` (its records, one JSON line each)."""
    data = records_text.encode("utf-8")
    head = {PART_KEY: PART_FORMAT, "fingerprint": fingerprint, "dag_idx": dag, "group": group,
            "n_records": records_text.count("\n"), "records_bytes": len(data),
            "records_sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    return json.dumps(head, separators=(",", ":")) + "\n"


def is_part_header(rec: object) -> bool:
    return isinstance(rec, dict) and PART_KEY in rec


def _read_header(path: str) -> tuple[dict | None, int, int]:
    """(header or None, its length in bytes, file size); raises OSError."""
    with open(path, "rb") as fh:
        first = fh.readline(1 << 16)
        size = os.fstat(fh.fileno()).st_size
    try:
        rec = json.loads(first) if first.endswith(b"\n") else None
    except ValueError:
        rec = None
    return (rec if is_part_header(rec) else None), len(first), size


def has_part_header(path: str) -> bool:
    """Whether the file starts with a part header (parts written before headers existed do not)."""
    try:
        return _read_header(path)[0] is not None
    except OSError:
        return False


def _records_sha256(path: str, skip: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(skip)
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _header_problem(head: dict, head_len: int, size: int, dag: int, expected: set, fingerprint: str | None,
                    group: str | None) -> str:  # fmt: skip
    if head.get(PART_KEY) != PART_FORMAT:
        return "unexpected records"
    if head.get("dag_idx") != dag or (group is not None and head.get("group") != group):
        return "unexpected records"
    if fingerprint is not None and head.get("fingerprint") != fingerprint:
        return "another run's part (fingerprint differs)"
    if head.get("n_records") != len(expected):
        return "unexpected records"
    nbytes = head.get("records_bytes")
    if not isinstance(nbytes, int) or head_len + nbytes != size:
        return "truncated" if isinstance(nbytes, int) and head_len + nbytes > size else "unexpected records"
    return ""


def part_records(path: str) -> list[dict]:
    """The records of a per-DAG part (its header line left out)."""
    with open(path, encoding="utf-8") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    return recs[1:] if recs and is_part_header(recs[0]) else recs


def check_dag_output(path: str, dag: int, expected: set[tuple[str, str, int]], fingerprint: str | None = None,
                     group: str | None = None, quick: bool = False) -> FileCheck:  # fmt: skip
    """Verify one per-DAG file against the expected (cell, method, trial) keys (and its header, if any).

    ``quick``: trust a part whose header and size agree (no record is read);
    a part without a header is always read in full.
    """
    if not os.path.exists(path):
        return FileCheck(False, "missing")
    try:
        head, head_len, size = _read_header(path)
    except OSError as exc:
        return FileCheck(False, f"unreadable ({exc.strerror or exc})")
    if head is not None:
        problem = _header_problem(head, head_len, size, dag, expected, fingerprint, group)
        if problem:
            return FileCheck(False, problem)
        if quick:
            return FileCheck(True, "", n_lines=len(expected))
        if _records_sha256(path, head_len) != head.get("records_sha256"):
            return FileCheck(False, "edited (its records differ from the header's sha256)")
    present: set = set()
    bad = False
    n = 0
    try:
        for no, _, rec in read_records(path):
            if no == 1 and head is not None:
                continue
            n += 1
            if rec is None or not isinstance(rec, dict):
                bad = True
                continue
            key = (rec.get("cell"), rec.get("method"), rec.get("exec_trial"))
            if rec.get("dag_idx") != dag or key not in expected or key in present:
                return FileCheck(False, "unexpected records", present, n)
            present.add(key)
    except OSError as exc:
        return FileCheck(False, f"unreadable ({exc})")
    if bad:
        return FileCheck(False, "truncated", present, n)
    if present != expected:
        return FileCheck(False, "incomplete", present, n)
    return FileCheck(True, "", present, n)


def verify_shard(spec, out_dir: str | None = None) -> dict[int, FileCheck]:
    """Check every DAG file of a shard (``out_dir`` overrides the recorded one)."""
    return spec.verify(out_dir)  # a grid or a surface shard: each type checks its own parts


def quick_verify_shard(spec) -> dict[int, FileCheck]:
    """Each part of a shard by its header and size only (``status``; a ``done`` shard before it is trusted)."""
    return spec.verify(None, quick=True)


def layout_shards(cfg, out_dir: str, state_dir: str, pool_index: str | None = None) -> list[ShardSpec]:
    """Cut the run into shards: budget group x DAG slice (``cfg.dags_per_shard`` DAGs).

    ``prepare`` passes ``out_dir``, ``state_dir`` and ``pool_index`` (the
    run's pool index, ``harness.pool_index``) relative to the run directory
    (job lines run there), so a moved or copied run works on itself.
    """
    shards: list[ShardSpec] = []
    k = cfg.dags_per_shard
    for g in cfg.grid.groups:
        for s in range(0, len(cfg.dags), k):
            n = len(shards)
            shards.append(
                ShardSpec(
                    shard=n,
                    group=g.key,
                    budget=g.budget,
                    deadlines=list(g.deadlines),
                    dags=list(cfg.dags[s : s + k]),
                    pool=cfg.pool_path,
                    pool_sha256=cfg.pool_sha256,
                    out_dir=out_dir,
                    n_trials=cfg.n_trials,
                    seed=cfg.seed,
                    cost_mode=cfg.cost_mode,
                    latency_dist=cfg.latency_dist,
                    methods=list(cfg.methods),
                    baseline_suite=list(cfg.baseline_suite),
                    prices=cfg.prices,
                    default_price_model=cfg.default_price_model,
                    mcpp=dict(cfg.mcpp),
                    planning=dict(cfg.planning),
                    further=dict(cfg.further),
                    execution_rules=cfg.execution_rules,
                    progress_file=os.path.join(state_dir, f"s{n:05d}.progress"),
                    pool_index=pool_index,
                )
            )
    return shards


__all__ = ["ShardSpec", "cell_id", "layout_shards", "verify_shard", "quick_verify_shard", "check_dag_output"]
