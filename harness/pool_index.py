"""The run's pool index: where each of its DAG rows is in the pool file, so a shard reads only its own.

``prepare`` validates the whole pool (one place) and writes
``<run>/pool_index.json``: for the execution pool (and the planning pool, if
any) its path, its SHA-256, and for every DAG of the run the row's byte
offset, length, line number and SHA-256. A shard seeks to its rows, checks
each row's digest, and parses and validates only those rows
(:func:`simulator.pools.pool.load_pool_rows`); the same DAG statistics as
loading the whole file, without reading, hashing and validating rows it does
not use. A row whose bytes differ from the indexed ones (the file changed
since ``prepare``) is refused in one line, naming the file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_text
from simulator.base.jsonread import JsonRefused, loads_strict
from simulator.pools.pool import LineEntry, Pool, index_pool_lines, load_pool_rows

INDEX_FORMAT = "mcpp-pool-index/1"
#: the index's file name in the run directory (job lines name it relative to the run directory)
POOL_INDEX = "pool_index.json"


def index_section(path: str, dags: Sequence[int]) -> dict:
    """One pool's part of the index: its path, SHA-256 and the rows of ``dags``."""
    sha, entries = index_pool_lines(path)
    rows = {}
    for d in dags:
        if not (0 <= d < len(entries)):  # prepare checked the rows exist; a file replaced meanwhile is refused here
            raise ConfigError(f"{path}: DAG row {d} does not exist (the file has {len(entries)} DAGs)")
        rows[str(d)] = entries[d].to_json()
    return {"path": path, "sha256": sha, "rows": rows}


def write_pool_index(dest: str, sections: dict[str, dict]) -> None:
    """Write the index atomically: ``sections`` maps a role (``pool``, ``planning_pool``) to :func:`index_section`."""
    atomic_write_text(dest, json.dumps({"format": INDEX_FORMAT, **sections}, separators=(",", ":")) + "\n")


def read_pool_index(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            data = loads_strict(fh.read())
    except FileNotFoundError:
        raise ConfigError(f"{path}: the run's pool index is missing; run `bash run_experiment.sh prepare` again") from None
    except (OSError, JsonRefused) as exc:
        raise ConfigError(f"{path}: the run's pool index is unreadable ({exc}); run `prepare` again") from None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise ConfigError(f"{path}: not a pool index of this version (format {INDEX_FORMAT}); run `prepare` again")
    return data


def load_indexed_rows(index: dict, index_path: str, role: str, pool_path: str, dags: Sequence[int],
                      sha256: str | None = None) -> Pool:  # fmt: skip
    """The rows ``dags`` of the pool ``pool_path`` through the index's ``role`` section (each row's digest checked).

    ``sha256``: the pool checksum the job line names; the index must be the one made for that file.
    """
    sec = index.get(role)
    if not isinstance(sec, dict) or os.path.abspath(sec.get("path", "")) != os.path.abspath(pool_path):
        raise ConfigError(f"{index_path}: no index of {pool_path} ({role}); run `bash run_experiment.sh prepare` again")
    if sha256 and sec.get("sha256") != sha256:
        raise ConfigError(
            f"{index_path}: indexes another version of {pool_path} (sha256 {str(sec.get('sha256'))[:12]}..., the job "
            f"line names {sha256[:12]}...); run `bash run_experiment.sh prepare` again"
        )
    rows = sec.get("rows", {})
    missing = [d for d in dags if str(d) not in rows]
    if missing:
        raise ConfigError(f"{index_path}: DAG(s) {missing[:10]} of {pool_path} are not indexed; run `prepare` again")
    return load_pool_rows(pool_path, [LineEntry.from_json(d, rows[str(d)]) for d in dags])
