"""Reading rollout records (``docs/rollout_format.md``) from files and directories.

Accepted inputs: one record per JSON file (``<out_dir>/<model>/<problem_id>.json``),
a JSON file holding a list of records, a JSONL file with one record per line,
or a directory searched recursively for ``*.json`` / ``*.jsonl`` (hidden and
temporary files are skipped: an interrupted generator leaves ``.*.tmp`` files).
Every record is checked for the fields the builders rely on, with errors naming
the file, the problem and the node.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.base.errors import UserError
from simulator.base.jsonread import JsonRefused, loads_strict


@dataclass
class Record:
    """One (problem, model) rollout record and where it came from."""

    data: dict[str, Any]
    source: str  # file (and line for JSONL) it was read from

    @property
    def problem_id(self) -> str:
        return str(self.data["problem_id"])

    @property
    def model(self) -> str:
        return str(self.data["model"])


def record_files(path: str | os.PathLike) -> list[Path]:
    """The record files under ``path`` (itself when a file), sorted for a stable order."""
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise UserError(f"rollout input {p} does not exist")
    out = []
    for f in sorted(p.rglob("*")):
        rel = f.relative_to(p)
        if any(part.startswith(".") for part in rel.parts) or f.name.endswith(".tmp"):
            continue
        if f.is_file() and f.suffix in (".json", ".jsonl"):
            out.append(f)
    return out


def _check_record(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise UserError(f"{where}: a rollout record must be a JSON object")
    for key in ("problem_id", "model", "nodes"):
        if key not in obj:
            raise UserError(f"{where}: rollout record has no {key!r}")
    pid = obj["problem_id"]
    if not isinstance(obj["nodes"], list) or not obj["nodes"]:
        raise UserError(f"{where}: problem {pid!r}: 'nodes' must be a non-empty list")
    for k, nd in enumerate(obj["nodes"]):
        if not isinstance(nd, dict):
            raise UserError(f"{where}: problem {pid!r}: node #{k} must be an object")
        nid = nd.get("node_id")
        if isinstance(nid, bool) or not isinstance(nid, int):
            raise UserError(f"{where}: problem {pid!r}: node #{k} needs an integer node_id")
        if not isinstance(nd.get("parents", []), list):
            raise UserError(f"{where}: problem {pid!r} node {nid}: 'parents' must be a list")
        att = nd.get("attempts")
        if att is not None and not isinstance(att, list):
            raise UserError(f"{where}: problem {pid!r} node {nid}: 'attempts' must be a list")
    return obj


def read_record_file(path: Path) -> list[Record]:
    """All records in one file (a record, a list of records, or JSONL)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if path.suffix == ".jsonl":
        out = []
        for ln, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = loads_strict(line)
            except JsonRefused as exc:
                raise UserError(f"{path} line {ln}: {exc.msg}") from None
            out.append(Record(_check_record(obj, f"{path} line {ln}"), f"{path}:{ln}"))
        return out
    try:
        obj = loads_strict(text)
    except JsonRefused as exc:
        raise UserError(f"{path}: {exc.msg}") from None
    objs = obj if isinstance(obj, list) else [obj]
    return [Record(_check_record(o, f"{path}"), str(path)) for o in objs]


def load_records(paths: list[str | os.PathLike]) -> tuple[list[Record], int]:
    """Records from files/directories (in order) and the number of files scanned.

    A (problem, model) pair that appears twice is an error: silently keeping
    one of two different rollout sets would bias the pool.
    """
    records: list[Record] = []
    n_files = 0
    seen: dict[tuple[str, str], str] = {}
    for p in paths:
        for f in record_files(p):
            n_files += 1
            for rec in read_record_file(f):
                key = (rec.problem_id, rec.model)
                if key in seen:
                    raise UserError(
                        f"problem {key[0]!r} model {key[1]!r} appears twice: {seen[key]} and "
                        f"{rec.source}"
                    )
                seen[key] = rec.source
                records.append(rec)
    return records, n_files
