"""``status`` (per shard: pending / running / done / failed, totals, ETA) and ``resume``."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from .rundir import RunDir
from .shards import quick_verify_shard
from .state import ShardState, claim_gone


@dataclass
class ShardStatus:
    n: int
    sid: str
    state: str  # pending, running, stale, done, failed
    units: int
    done_units: int
    heartbeat_age: float | None = None
    worker: str = ""
    failures: int = 0
    note: str = ""
    wall_s: float | None = None


def _slurm_liveness(st: ShardState, specs) -> dict[str, bool | None]:
    tasks = set()
    for spec in specs:
        rec = st.read(spec.shard_id, "claim")
        if rec and rec.get("slurm_job"):
            tasks.add(str(rec["slurm_job"]))
    if not tasks:
        return {}
    from .slurm import tasks_alive

    return tasks_alive(tasks)


def collect(rd: RunDir, stale_seconds: float) -> list[ShardStatus]:
    """Every shard's state. A claim is ``stale`` when its heartbeat is older than ``stale_seconds``, or at
    once when its owner is certainly gone (:func:`harness.state.claim_gone`; ``note`` says why)."""
    specs = rd.shards  # first: a readable error (and no directory created) when the run is not prepared
    st = ShardState(rd.state)
    now = time.time()
    slurm_alive = _slurm_liveness(st, specs)
    out = []
    for spec in specs:
        sid = spec.shard_id
        units = spec.units_per_dag() * len(spec.dags)
        fails = st.failures(sid)
        if st.is_done(sid):
            checks = quick_verify_shard(spec)  # only verified parts count (header, size, fingerprint, counts)
            bad = {d: c.problem for d, c in checks.items() if not c.ok}
            if not bad:
                info = st.read(sid, "done") or {}
                out.append(ShardStatus(spec.shard, sid, "done", units, units, failures=len(fails),
                                       wall_s=info.get("wall_s")))  # fmt: skip
                continue
            good = units * (len(checks) - len(bad)) // max(1, len(checks))
            note = ", ".join(f"DAG {d}: {p}" for d, p in list(bad.items())[:3]) + (" ..." if len(bad) > 3 else "")
            out.append(ShardStatus(spec.shard, sid, "pending", units, good, failures=len(fails),
                                   note=f"marked done but part(s) bad ({note}): the next run recomputes them"))
            continue
        if st.is_failed(sid):
            last = fails[-1] if fails else {}
            out.append(ShardStatus(spec.shard, sid, "failed", units, 0, failures=len(fails),
                                   note=str(last.get("problem", "")), worker=str(last.get("log", ""))))  # fmt: skip
            continue
        claim = st.read(sid, "claim")
        if claim is not None:
            age = st.heartbeat_age(sid, now)
            hb = st.read(sid, "heartbeat") or {}
            prog = st.read(sid, "progress") or {}
            done = int(max(prog.get("done", 0), hb.get("done", 0)) if prog or hb else 0)
            gone = claim_gone(claim, slurm_alive.get(str(claim.get("slurm_job", ""))))
            state = "stale" if gone or (age is not None and age > stale_seconds) else "running"
            note = gone or (f"heartbeat older than {stale_seconds:g}s" if state == "stale" else "")
            out.append(ShardStatus(spec.shard, sid, state, units, min(done, units), age,
                                   str(claim.get("worker", "")), len(fails), note=note))  # fmt: skip
            continue
        out.append(ShardStatus(spec.shard, sid, "pending", units, 0, failures=len(fails)))
    return out


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"


def eta_seconds(shards: list[ShardStatus], first_claim: float | None) -> float | None:
    """Remaining units / observed rate (units per second of shard wall time x parallelism)."""
    done = [s for s in shards if s.state == "done" and s.wall_s]
    remaining = sum(s.units - s.done_units for s in shards if s.state in ("pending", "running", "stale"))
    if remaining == 0:
        return 0.0
    running = max(1, sum(s.state == "running" for s in shards))
    if done:
        rate = sum(s.units for s in done) / sum(s.wall_s for s in done)  # per shard process
        return remaining / (rate * running)
    progressed = sum(s.done_units for s in shards if s.state == "running")
    if progressed and first_claim:
        elapsed = time.time() - first_claim
        return remaining * elapsed / progressed if elapsed > 0 else None
    return None


def _next_step(rd: RunDir) -> str:
    """What is left once every shard is done: merge and analyze, analyze, or nothing (``local`` does both)."""
    merged = os.path.join(rd.merged, "merge_report.json")
    report = os.path.join(rd.analysis, "report.md")
    try:
        with open(merged, encoding="utf-8") as fh:
            complete = bool(json.load(fh).get("complete"))
        merged_at = os.path.getmtime(merged)
    except (OSError, ValueError):
        return "all shards done: `run_experiment.sh merge` then `analyze`"
    if not complete:
        return "all shards done, but the last merge was incomplete: `run_experiment.sh merge` then `analyze`"
    if os.path.exists(report) and os.path.getmtime(report) >= merged_at:
        return f"all shards done, merged and analysed: {report} (`run_experiment.sh report` prints it)"
    return "all shards done and merged: `run_experiment.sh analyze`"


def render_status(rd: RunDir, stale_seconds: float, verbose: bool = False, slurm_lines: list[str] | None = None) -> str:
    shards = collect(rd, stale_seconds)
    st = ShardState(rd.state)
    claims = [st.read(s.sid, "claim") or {} for s in shards if s.state in ("running", "stale")]
    first = min((c.get("time", time.time()) for c in claims), default=None)
    lines = [f"run {rd.run.get('run_name')} ({rd.path}), fingerprint {rd.run.get('fingerprint')}"]
    show_all = verbose or len(shards) <= 40
    for s in shards:
        if not show_all and s.state in ("done", "pending"):
            continue
        pct = 100.0 * s.done_units / s.units if s.units else 100.0
        extra = ""
        if s.state in ("running", "stale"):
            extra = f" heartbeat {_fmt_s(s.heartbeat_age)} ago, {pct:5.1f}% ({s.done_units}/{s.units}), {s.worker}"
            if s.state == "stale":
                extra += f"  <- stale ({s.note}): `run_experiment.sh resume` releases it"
        elif s.state == "failed":
            extra = f" after {s.failures} tries: {s.note}  (log: {s.worker})"
        elif s.state == "done" and s.wall_s:
            extra = f" in {_fmt_s(s.wall_s)}"
        elif s.note:
            extra = f" {pct:5.1f}% ({s.done_units}/{s.units}): {s.note}"
        elif s.failures:
            extra = f" ({s.failures} failed attempt(s))"
        lines.append(f"  {s.sid} {s.state.upper():8s}{extra}")
    counts = {k: sum(s.state == k for s in shards) for k in ("pending", "running", "stale", "done", "failed")}
    units = sum(s.units for s in shards)
    done_units = sum(s.done_units for s in shards)
    lines.append(
        "totals: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + f" of {len(shards)} shards; "
        f"{done_units}/{units} records ({100.0 * done_units / max(units, 1):.1f}%)"
    )
    eta = eta_seconds(shards, first)
    if counts["failed"]:
        lines.append(
            f"FAILED shards: {[s.sid for s in shards if s.state == 'failed']} — see their logs; "
            "`run_experiment.sh resume --retry-failed` makes them pending again"
        )
    if counts["done"] == len(shards):
        lines.append(_next_step(rd))
    elif counts["pending"] + counts["running"] + counts["stale"] == 0:
        lines.append("ETA: nothing left to run (only failed shards remain)")
    else:
        lines.append(f"ETA: {_fmt_s(eta) if eta is not None else 'unknown (no shard finished yet)'}")
    if slurm_lines:
        lines.extend(slurm_lines)
    return "\n".join(lines)


def resume(rd: RunDir, stale_seconds: float, retry_failed: bool = False, out=print) -> int:
    """Release stale claims (old heartbeat, or an owner that is certainly gone); optionally un-fail shards."""
    st = ShardState(rd.state)
    released = []
    for s in collect(rd, stale_seconds):
        if s.state == "stale" and st.break_claim(s.sid, s.worker):
            released.append(s.sid)
        if retry_failed and s.state == "failed":
            st.clear_failed(s.sid)
            out(f"{s.sid}: failed marker cleared (pending again)")
    if released:
        out(f"released {len(released)} stale claim(s) (owner gone, or heartbeat older than {stale_seconds:g}s): "
            f"{released}")  # fmt: skip
    else:
        out(f"no stale claims (no owner gone, no heartbeat older than {stale_seconds:g}s)")
    return len(released)


def release_dead_claims(rd: RunDir, out=print) -> list[str]:
    """Release the claims whose owner is certainly gone (never judged by heartbeat age).

    ``local``, ``auto`` and ``slurm`` call this before they start, so a run
    whose workers were SIGKILLed or ``scancel``-ed continues without
    ``resume``; claims of live workers elsewhere are left alone.
    """
    st = ShardState(rd.state)
    released = []
    for s in collect(rd, float("inf")):
        if s.state == "stale" and st.break_claim(s.sid, s.worker):
            released.append(s.sid)
            out(f"{s.sid}: released the claim of {s.worker}: {s.note}")
    return released


def unfinished_message(rd: RunDir, stale_seconds: float) -> str:
    """Why a ``local`` run ended with shards not done: failed ones, or ones other workers hold."""
    shards = collect(rd, stale_seconds)
    failed = [s.sid for s in shards if s.state == "failed"]
    held = [s for s in shards if s.state in ("running", "stale")]
    pending = [s.sid for s in shards if s.state == "pending"]
    parts = []
    if failed:
        parts.append(f"shards {failed} FAILED: fix the failures above (their logs), then "
                     "`run_experiment.sh resume --retry-failed` and `local` again")  # fmt: skip
    if held:
        ids = [s.sid for s in held]
        parts.append(f"shards {ids} are claimed by other workers ({', '.join(sorted({s.worker for s in held}))}): "
                     "wait for them (`status`), or `resume` if they are stale")  # fmt: skip
    if pending:
        parts.append(f"shards {pending} are still pending: run `local` again")
    return "local: not every shard finished; " + "; ".join(parts or ["see `status`"])
