"""The loop closes: a run adds its trace to a learned pool (``run --learn L``), and a run or a trace says when a
(node, model) has drifted from the pool it planned with (``docs/workflows.md``).

The learning itself is :mod:`poolbuild.from_traces` (a learned pool records
the traces it holds, so a trace is never counted twice); the drift test is
:mod:`poolbuild.drift`. This module connects them to ``run`` and ``summary``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from poolbuild.drift import drift
from poolbuild.from_traces import Collected, learn_into, observe, read_learned
from simulator.base.errors import ConfigError
from simulator.pools.pool import load_pool


def check_learn_target(path: str, workflow_hash: str) -> None:
    """``--learn L``: a learned pool of this very workflow (refused in one line before any request)."""
    if not Path(path).is_file():
        raise ConfigError(f"--learn {path}: no such learned pool (build the first one with python -m "
                          f"poolbuild.from_traces TRACES --workflow W --out {path})")
    line = read_learned(path)
    h = line["learned"].get("workflow_hash")
    if h != workflow_hash:
        raise ConfigError(f"--learn {path}: line 1: learned: workflow_hash {h!r} is not this run's {workflow_hash!r} "
                          f"(a pool of another workflow)")


def learn_after_run(path: str, trace: str) -> str:
    """Add the run's trace to the learned pool at ``path`` (atomically); one line saying what it holds now."""
    notes: list[str] = []
    line = learn_into(path, [trace], notes.append)
    n_live = sum(m["live_rows"] for n in line["nodes"] for m in n["model_node_metadata"].values())
    extra = f" ({'; '.join(notes)})" if notes else ""
    return f"learned: {path} holds {len(line['learned']['traces'])} traces, {n_live} live rows{extra}"


def recent_of(events: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, float, int]]:
    """(node, model, latency, success) of a trace's complete attempts (censored ones left out)."""
    c = Collected()
    observe(list(events), events[0], "recent", c)
    return [(o.node, o.model, float(o.lat), int(o.success)) for o in c.obs
            if o.lat_observed and o.tok_observed and o.success is not None]


def drift_lines(events: Sequence[Mapping[str, Any]], pool: str | None = None, dag: int | None = None) -> list[str]:
    """Drift of a trace's pairs from a pool line (default: the line its run planned with, ``run.source``)."""
    run = events[0]
    if pool is None:
        src = str(run.get("source") or "")
        path, _, row = src.rpartition(":")
        if not path or not row.isdigit() or not Path(path).is_file():
            return []
        pool, dag = path, int(row)
    p = load_pool(pool)
    d = int(dag or 0)
    if not (0 <= d < len(p)):
        raise ConfigError(f"{pool}: --dag {d} does not exist (the pool has {len(p)} DAGs)")
    return drift(p.raw(d), recent_of(events))
