"""Shard state on a shared filesystem: claims, heartbeats, done and failed markers.

Files under ``<run>/state`` (``sid`` = ``s00042``):

* ``sid.claim``  written whole, then hard-linked into place (fails if it exists,
  like O_EXCL): exactly one worker wins a claim, and a claim is never empty;
  holds the worker id, host, pid (and the process start time, so a reused
  pid is not mistaken for the owner), time and, in a SLURM task, the task id.
  A claim whose owner is certainly gone — its process no longer exists on
  this host, or its SLURM task is no longer queued or running — is stale at
  once (:func:`claim_gone`), whatever its heartbeat age.
* ``sid.heartbeat``  rewritten every HEARTBEAT_SECONDS by the claiming worker
  (time and progress); ``resume`` releases claims whose heartbeat is older
  than STALE_SECONDS (the heartbeat, not the outputs: an MCPP DAG can take
  longer than any reasonable output age).
* ``sid.progress``  written by the shard process itself (units done / total).
* ``sid.done``  written only after every per-DAG output was verified.
* ``sid.failures``  one JSON line per failed attempt; after MAX_SHARD_FAILURES
  lines, ``sid.failed`` is written and no worker takes the shard any more
  (``resume --retry-failed`` clears it).

All writes are atomic renames or hard links, so workers on several
machines sharing the directory never corrupt each other.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

from simulator.base.io_utils import atomic_write_json, naming


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def process_start(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot, Linux ``/proc``), or None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def process_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` exists on this host (and, if ``start`` is known, is the same process)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    if start is not None:
        now = process_start(pid)
        if now is not None and now != start:
            return False  # the pid was reused by another process
    return True


def slurm_task_id(env: dict | None = None) -> str | None:
    """``<array job>_<task>`` (or the job id) when running inside a SLURM job, else None."""
    env = os.environ if env is None else env
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID") or None


def claim_gone(rec: dict, slurm_alive: bool | None = None) -> str | None:
    """Why the owner of a claim is certainly gone, or None when it may be alive.

    Two certain signs: the claim was made on this host and its process no
    longer exists; or it was made in a SLURM task and squeue no longer lists
    that task (``slurm_alive`` False; None = unknown, e.g. squeue missing).
    A claim from another host without SLURM is judged by its heartbeat only.
    """
    task = rec.get("slurm_job")
    if task and slurm_alive is False:
        return f"its SLURM task {task} is gone (not queued or running in squeue)"
    pid = rec.get("pid")
    if rec.get("host") == socket.gethostname() and isinstance(pid, int):
        if not process_alive(pid, rec.get("pid_start")):
            return f"its worker process {pid} on this host is gone"
    return None


class ShardState:
    """State files of the shards of one run."""

    def __init__(self, state_dir: str) -> None:
        self.dir = state_dir
        os.makedirs(state_dir, exist_ok=True)

    def f(self, sid: str, kind: str) -> str:
        return os.path.join(self.dir, f"{sid}.{kind}")

    # --- reading ---------------------------------------------------------------

    def read(self, sid: str, kind: str) -> dict | None:
        try:
            with open(self.f(sid, kind), encoding="utf-8") as fh:
                text = fh.read()
        except (FileNotFoundError, IsADirectoryError):
            return None
        try:
            return json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            return {}

    def exists(self, sid: str, kind: str) -> bool:
        return os.path.exists(self.f(sid, kind))

    def is_done(self, sid: str) -> bool:
        return self.exists(sid, "done")

    def is_failed(self, sid: str) -> bool:
        return self.exists(sid, "failed")

    def failures(self, sid: str) -> list[dict]:
        try:
            with open(self.f(sid, "failures"), encoding="utf-8") as fh:
                out = []
                for line in fh:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        out.append({})
                return out
        except FileNotFoundError:
            return []

    def heartbeat_age(self, sid: str, now: float | None = None) -> float | None:
        """Seconds since the last heartbeat (or since the claim, if none yet)."""
        now = time.time() if now is None else now
        for kind in ("heartbeat", "claim"):
            rec = self.read(sid, kind)
            if rec and "time" in rec:
                if kind == "heartbeat":
                    claim = self.read(sid, "claim") or {}
                    if claim.get("worker") not in (None, rec.get("worker")):
                        continue  # heartbeat of an earlier claim
                return now - float(rec["time"])
        try:
            return now - os.path.getmtime(self.f(sid, "claim"))
        except FileNotFoundError:
            return None

    # --- claims -------------------------------------------------------------------

    def claim(self, sid: str, worker: str, extra: dict | None = None) -> bool:
        """Atomically claim a shard; False if someone else holds it.

        The claim is written whole into a private file first and then
        hard-linked to ``sid.claim`` (``link`` fails if the claim exists, like
        ``O_EXCL``, also over NFS), so a claim is never seen empty: a worker
        killed at any moment leaves either no claim or one naming its pid.
        """
        rec = {"worker": worker, "host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
        start = process_start(os.getpid())
        if start is not None:
            rec["pid_start"] = start
        task = slurm_task_id()
        if task:
            rec["slurm_job"] = task
        rec.update(extra or {})
        target = self.f(sid, "claim")
        tmp = f"{target}.new-{uuid.uuid4().hex[:8]}"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(rec, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.link(tmp, target)
        except FileExistsError:
            return False
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        return True

    def owner(self, sid: str) -> str | None:
        rec = self.read(sid, "claim")
        return None if rec is None else rec.get("worker", "")

    def release(self, sid: str, worker: str | None = None) -> bool:
        """Remove the claim (only if ``worker`` holds it, when given)."""
        if worker is not None and self.owner(sid) not in (worker, ""):
            return False
        try:
            os.unlink(self.f(sid, "claim"))
            return True
        except FileNotFoundError:
            return False

    def break_claim(self, sid: str, worker: str) -> bool:
        """Remove the claim only if ``worker`` (a dead owner) still holds it.

        Safe against a concurrent worker that releases the same dead claim and
        claims the shard anew: the claim is first renamed aside atomically; if
        it turns out to be someone else's, it is put back (``os.link`` fails if
        a third worker claimed meanwhile — then two workers run the shard, which
        is harmless: outputs are deterministic and replaced atomically).
        """
        src = self.f(sid, "claim")
        aside = f"{src}.break-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(src, aside)
        except FileNotFoundError:
            return False
        try:
            with open(aside, encoding="utf-8") as fh:
                rec = json.loads(fh.read() or "{}")
        except (OSError, json.JSONDecodeError):
            rec = {}
        if rec.get("worker", "") in (worker, ""):
            os.unlink(aside)
            return True
        try:
            os.link(aside, src)
        except FileExistsError:
            pass
        os.unlink(aside)
        return False

    def heartbeat(self, sid: str, worker: str, progress: dict | None = None) -> None:
        if self.owner(sid) not in (worker, ""):
            return  # our claim was released (stale) and taken by someone else
        rec = {"worker": worker, "time": time.time()}
        rec.update(progress or {})
        atomic_write_json(self.f(sid, "heartbeat"), rec, indent=None, fsync=False)  # rewritten every few seconds

    # --- outcomes -------------------------------------------------------------------

    def mark_done(self, sid: str, info: dict) -> None:
        atomic_write_json(self.f(sid, "done"), {"time": time.time(), **info}, indent=None)

    def unmark_done(self, sid: str) -> bool:
        """Make a done shard pending again (its parts turned out bad); False if it was not done."""
        try:
            os.unlink(self.f(sid, "done"))
            return True
        except FileNotFoundError:
            return False

    def add_failure(self, sid: str, info: dict, max_failures: int) -> bool:
        """Record a failed attempt; returns True when the shard is now marked failed."""
        line = json.dumps({"time": time.time(), **info}) + "\n"
        fd = os.open(self.f(sid, "failures"), os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o644)
        try:
            with naming(self.f(sid, "failures")):  # disk full: one line naming the file (exit 3)
                os.write(fd, line.encode())
        finally:
            os.close(fd)
        n = len(self.failures(sid))
        if n >= max_failures:
            atomic_write_json(self.f(sid, "failed"), {"time": time.time(), "failures": n, **info}, indent=None)
            return True
        return False

    def clear_failed(self, sid: str) -> None:
        for kind in ("failed", "failures"):
            try:
                os.unlink(self.f(sid, kind))
            except FileNotFoundError:
                pass

    def reset(self, sid: str) -> None:
        """Forget everything about a shard (prepare with a new layout)."""
        for kind in ("claim", "heartbeat", "progress", "done", "failures", "failed"):
            try:
                os.unlink(self.f(sid, kind))
            except FileNotFoundError:
                pass
