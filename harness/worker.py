"""Running shards: one claimed shard, the ``auto`` worker loop, and ``local`` (a process pool).

Every path runs the same thing: line N of ``jobs_list.txt`` as a child
process, under a claim with a heartbeat, and marks the shard done only after
its outputs verify. ``local`` is just N_WORKERS ``auto`` loops in threads of
one process (the simulation work happens in the child processes), plus tqdm
progress bars fed by the shards' progress files.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from simulator.base.errors import EXIT_RESOURCE, EXIT_USER_ERROR
from simulator.base.io_utils import naming

from .hosts import (  # noqa: F401 - re-exported: the workers' hosts live in the light module
    ShardHost,
    _set_pdeathsig,
    _spare_hosts,
    prestart_hosts,
    release_spare_hosts,
    shard_env,
    take_spare_host,
    threads_per_worker,
)
from .rundir import RunDir
from .shards import quick_verify_shard, verify_shard
from .state import ShardState, new_worker_id


@dataclass
class WorkerOptions:
    max_failures: int = 3
    heartbeat_seconds: float = 10.0
    threads_per_shard: int | None = None  # NUMBA_NUM_THREADS of the shard process


def default_threads(environ: dict | None = None) -> int:
    """Threads of a lone worker (``auto``, ``shard``, ``task``): ``NUMBA_NUM_THREADS`` if set, else the cores
    this process may use (its CPU affinity: what SLURM or ``taskset`` granted, not every core of the node)."""
    from .variables import cores

    env = os.environ if environ is None else environ
    text = (env.get("NUMBA_NUM_THREADS") or "").strip()
    if text.isdigit() and int(text) >= 1:
        return int(text)
    return cores()


def record_parallelism(rd: RunDir, info: dict) -> None:
    """Write how the run's workers share the cores into ``run.json`` (key ``parallelism``; results never change)."""
    from simulator.base.io_utils import atomic_write_json

    run = dict(rd.run)
    run["parallelism"] = {**info, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    atomic_write_json(rd.run_json, run)
    rd.__dict__.pop("run", None)


def _error_line(log_path: str) -> str | None:
    """The last one-line refusal (``error: ...``) of a shard's log: the cause a user can act on."""
    lines = [ln for ln in _tail(log_path, 40).splitlines() if ln.startswith("error:")]
    return lines[-1] if lines else None


def _tail(path: str, n: int = 8) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 4000))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
        return "\n".join(lines[-n:])
    except OSError:
        return ""


def hosted_command(line: str) -> tuple[str, str, list[str]] | None:
    """(python, run_shard.py path, flags) when a job line is exactly ``python .../run_shard.py FLAGS``.

    Only such lines (as :meth:`harness.shards.ShardSpec.command` writes them)
    may run in a :class:`ShardHost`; anything else (an edited line, shell
    syntax) runs as its own process.
    """
    try:
        parts = shlex.split(line)
    except ValueError:
        return None
    if len(parts) < 2 or os.path.basename(parts[1]) != "run_shard.py" or not os.path.isabs(parts[1]):
        return None
    if " ".join(shlex.quote(a) for a in parts) != line.strip():
        return None
    return parts[0], parts[1], parts[2:]


class ShardRunner:
    """Runs shards of one run directory under claims (thread-safe per instance use).

    With ``reuse_process`` (set by :func:`auto_loop`) the shards run one
    after another in a :class:`ShardHost` instead of a process each; a host
    that ends without answering is not used again and that shard is run as its
    own process at once (same claim), so a problem of the host never costs a
    shard attempt.
    """

    def __init__(
        self,
        rd: RunDir,
        opts: WorkerOptions,
        stop: threading.Event | None = None,
        worker_id: str | None = None,
        log: Callable[[str], None] = print,
        trusted: set[str] | None = None,
    ) -> None:
        rd.require_prepared()
        self.rd = rd
        self.opts = opts
        self.stop = stop or threading.Event()
        self.worker = worker_id or new_worker_id()
        self.state = ShardState(rd.state)
        self.log = log
        self.lines = rd.job_lines()
        self.reuse_process = False
        #: (exit code, the shard's error line) of a shard that failed with exit 2 (bad input, the pool changed)
        #: or 3 (disk full): a retry would fail alike, so this runner stops and its command ends with that code
        self.fatal: tuple[int, str] | None = None
        self._host: ShardHost | None = None
        self._host_broken = False
        self._trusted: set[str] = set() if trusted is None else trusted  # done shards whose parts were checked
        #: called with n after this runner claims shard n (``local``: the last shard claimed frees a core soon)
        self.on_claimed: Callable[[int], None] | None = None

    def done_and_verified(self, sid: str, spec) -> bool:
        """Whether shard ``sid`` is done and its parts still verify (size, fingerprint, counts, content hash).

        A done shard with a missing, truncated, edited, foreign or swapped
        part is made pending again, with a line naming the parts, so it is
        recomputed (only its bad parts: the good ones verify and are kept).
        Each done shard is read once per runner (or per ``local``, whose
        runners share ``trusted``), as the merge would read it.
        """
        if not self.state.is_done(sid):
            return False
        if sid in self._trusted:
            return True
        bad = bad_parts(spec)
        if bad:
            self.log(f"{sid}: marked done but {describe_bad_parts(bad)}; recomputing")
            self.state.unmark_done(sid)
            return False
        self._trusted.add(sid)
        return True

    def close(self) -> None:
        """End the shard host, if one was started."""
        if self._host is not None:
            self._host.close()
            self._host = None

    def run(self, n: int, foreground: bool = False) -> str:
        """Claim and run shard n. Returns done / skip / busy / error / failed / interrupted."""
        spec = self.rd.shard(n)
        sid = spec.shard_id
        st = self.state
        if self.done_and_verified(sid, spec) or (st.is_failed(sid) and not foreground):
            return "skip"
        attempt = len(st.failures(sid)) + 1
        if not st.claim(sid, self.worker, {"attempt": attempt}):
            return "busy"
        if self.on_claimed is not None:
            self.on_claimed(n)
        try:
            if self.stop.is_set():
                # Another runner's fatal failure (disk full, bad input) stopped the runners after this runner
                # last looked: it may have released this very shard, which a retry would fail alike. It sets
                # ``stop`` before it releases its claim, so a claim taken after that release sees it here.
                return "busy"
            if self.done_and_verified(sid, spec):
                return "skip"
            return self._run_claimed(n, sid, spec, attempt, foreground)
        finally:
            st.release(sid, self.worker)

    def _run_claimed(self, n: int, sid: str, spec, attempt: int, foreground: bool) -> str:
        st = self.state
        total = spec.units_per_dag() * len(spec.dags)
        st.heartbeat(sid, self.worker, {"done": 0, "total": total, "attempt": attempt})
        os.makedirs(self.rd.logs, exist_ok=True)
        log_path = os.path.join(self.rd.logs, f"{sid}.log")
        threads = self.opts.threads_per_shard or default_threads(os.environ)
        env = shard_env(threads)
        t0 = time.time()
        with open(log_path, "ab") as logf:
            with naming(log_path):  # disk full: one line naming the log (exit 3)
                logf.write(
                    f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {sid} attempt {attempt} worker {self.worker}\n".encode()
                )
                logf.flush()
            out = None if foreground else logf
            hosted = None if foreground or not self.reuse_process or self._host_broken else hosted_command(self.lines[n])
            rc = interrupted = None
            if hosted is not None:
                rc, interrupted = self._run_hosted(hosted, env, log_path, sid, total, attempt)
            if rc is None and not interrupted:
                proc = subprocess.Popen(
                    ["bash", "-c", self.lines[n]],
                    stdout=out,
                    stderr=subprocess.STDOUT if out is not None else None,
                    env=env,
                    cwd=self.rd.path,  # the job line's paths are relative to the run directory
                    preexec_fn=_set_pdeathsig,
                )
                interrupted = self._wait(proc, sid, total, attempt)
                rc = proc.returncode
        checks = verify_shard(spec, self.rd.outputs)
        bad = {d: c.problem for d, c in checks.items() if not c.ok}
        if rc == 0 and not bad:
            self._trusted.add(sid)
            st.mark_done(sid, {"worker": self.worker, "attempt": attempt, "units": total, "wall_s": time.time() - t0,
                               "numba_threads": threads})  # fmt: skip
            if foreground:
                st.clear_failed(sid)
            return "done"
        if interrupted:
            return "interrupted"
        problem = f"exit code {rc}" if rc != 0 else f"outputs incomplete: {dict(list(bad.items())[:5])}"
        if rc in (EXIT_USER_ERROR, EXIT_RESOURCE):  # not retried: bad input, a changed pool or a full disk
            cause = _error_line(log_path) or f"shard {n} ended with exit code {rc} (log: {log_path})"
            self.fatal = (rc, cause)
            self.stop.set()
            problem += f": {cause}"
        failed = st.add_failure(
            sid,
            {"worker": self.worker, "attempt": attempt, "exit_code": rc, "problem": problem,
             "log": log_path, "log_tail": _tail(log_path)},
            self.opts.max_failures,
        )  # fmt: skip
        verdict = "failed" if failed else "error"
        if self.fatal and not failed:  # said once by the command, as its last line (run_local, act_auto)
            return verdict
        self.log(
            f"{sid}: attempt {attempt} failed ({problem})"
            + (f"; marked FAILED after {self.opts.max_failures} tries" if failed
               else "; not retried now (a retry would fail alike): fix the cause and run the command again"
               if self.fatal else "; released for a retry")
            + f"; log: {log_path}"
        )  # fmt: skip
        return verdict

    def _run_hosted(self, hosted, env: dict, log_path: str, sid: str, total: int, attempt: int):
        """Run the shard in the shard host: (exit code, interrupted); (None, False) if the host failed."""
        python, script, argv = hosted
        key = (python, script, env.get("NUMBA_NUM_THREADS"))
        if self._host is not None and self._host.key != key:
            self.close()
        if self._host is None:
            self._host = take_spare_host(key) or ShardHost(python, script, env)
        host = self._host
        req = {"script": script, "argv": argv, "cwd": self.rd.path, "log": log_path}
        if host.send(req):
            last = 0.0
            prog_path = self.state.f(sid, "progress")
            while True:
                ans = host.answer(0.25)
                if isinstance(ans, int):
                    return ans, False
                if ans == "dead":
                    break
                if self.stop.is_set():
                    host.kill()
                    self._host = None
                    return None, True
                last = self._heartbeat_if_due(sid, total, attempt, last, prog_path)
        host.kill()
        self._host = None
        self._host_broken = True  # run this shard, and the next ones, as processes of their own
        return None, False

    def _heartbeat_if_due(self, sid: str, total: int, attempt: int, last: float, prog_path: str) -> float:
        """Heartbeat the shard's claim (with its progress) if ``heartbeat_seconds`` passed since ``last``.

        Returns the time of the last heartbeat.
        """
        now = time.time()
        if now - last < self.opts.heartbeat_seconds:
            return last
        prog = _read_json(prog_path) or {}
        self.state.heartbeat(sid, self.worker, {"done": prog.get("done", 0), "total": total, "attempt": attempt})
        return now

    def _wait(self, proc: subprocess.Popen, sid: str, total: int, attempt: int) -> bool:
        """Wait for the shard process, heartbeating; True if stopped by ``self.stop``."""
        last = 0.0
        prog_path = self.state.f(sid, "progress")
        while True:
            try:
                proc.wait(timeout=0.25)
                return False
            except subprocess.TimeoutExpired:
                pass
            if self.stop.is_set():
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                return True
            last = self._heartbeat_if_due(sid, total, attempt, last, prog_path)


def bad_parts(spec, quick: bool = False) -> dict[str, str]:
    """{part path: problem} of the parts of ``spec`` that fail verification (``quick``: header and size only)."""
    out = {}
    for d, c in (quick_verify_shard(spec) if quick else verify_shard(spec)).items():
        if not c.ok:
            path = spec.part(d)
            out[path] = c.problem
    return out


def describe_bad_parts(bad: dict[str, str], limit: int = 3) -> str:
    """``part outputs/b00/dag_000001.jsonl is truncated, ...`` (the first ``limit`` of them)."""
    items = [f"{path} ({problem})" for path, problem in list(bad.items())[:limit]]
    more = f" and {len(bad) - limit} more" if len(bad) > limit else ""
    return f"{'part' if len(bad) == 1 else 'parts'} {', '.join(items)}{more} bad"


def _read_json(path: str) -> dict | None:

    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def auto_loop(runner: ShardRunner, on_outcome: Callable[[int, str], None] | None = None) -> dict[str, int]:
    """Claim and run shards until none is left to claim; returns outcome counts.

    Shards that failed (and were released) are retried in later passes until
    they succeed or reach the failure limit.
    """
    counts: dict[str, int] = {}
    n_shards = len(runner.rd.shards)
    runner.reuse_process = True  # one shard host for all the shards of this loop
    try:
        while not runner.stop.is_set():
            ran = False
            for n in range(n_shards):
                if runner.stop.is_set():
                    break
                outcome = runner.run(n)
                if outcome in ("skip", "busy"):
                    continue
                counts[outcome] = counts.get(outcome, 0) + 1
                if on_outcome:
                    on_outcome(n, outcome)
                ran = True
            if not ran:
                break
    finally:
        runner.close()
    return counts


class _Progress:
    """tqdm bars over shards and DAG-trials, fed from the state directory."""

    def __init__(self, rd: RunDir, enabled: bool = True) -> None:
        from tqdm import tqdm

        self.rd = rd
        self.state = ShardState(rd.state)
        self.units = [s.units_per_dag() * len(s.dags) for s in rd.shards]
        tty = sys.stderr.isatty()
        kw = {"file": sys.stderr, "disable": not enabled, "mininterval": 0.5 if tty else 30.0, "dynamic_ncols": True}
        self.bar_shards = tqdm(total=len(self.units), desc="shards", unit="shard", position=0, **kw)
        self.bar_units = tqdm(total=sum(self.units), desc="DAG-trials", unit="rec", position=1, **kw)
        self.done: set[int] = set()

    def poll(self) -> None:
        units = 0
        for n, u in enumerate(self.units):
            sid = f"s{n:05d}"
            if n in self.done or self.state.is_done(sid):
                self.done.add(n)
                units += u
            elif self.state.exists(sid, "claim"):
                prog = _read_json(self.state.f(sid, "progress")) or {}
                units += min(int(prog.get("done", 0)), u)
        # update() (not n = ...; refresh()) keeps tqdm's mininterval: few lines in a CI log.
        if len(self.done) > self.bar_shards.n:
            self.bar_shards.update(len(self.done) - self.bar_shards.n)
        if units > self.bar_units.n:
            self.bar_units.update(units - self.bar_units.n)

    def close(self) -> None:
        self.poll()
        self.bar_shards.refresh()
        self.bar_units.refresh()
        self.bar_shards.close()
        self.bar_units.close()


def run_local(rd: RunDir, n_workers: int, opts: WorkerOptions, progress: bool = True,
              on_idle: Callable[[], None] | None = None) -> dict[str, int]:  # fmt: skip
    """Run every pending shard on this machine with ``n_workers`` parallel shard processes.

    ``on_idle`` is called once, from a worker thread, when a worker claims the last shard or finds no shard
    left to claim, whichever comes first: a core is (about to be) free from then on, and ``local`` starts the
    analysis's process there, whose imports fill the gap between the first worker's end and the last's.
    """
    from .variables import cores

    n_workers = max(1, n_workers)
    n_cores = cores()
    if opts.threads_per_shard is None:
        opts.threads_per_shard = threads_per_worker(n_cores, n_workers)
    record_parallelism(rd, {"action": "local", "cores": n_cores, "workers": n_workers,
                            "numba_threads_per_worker": opts.threads_per_shard})  # fmt: skip
    if n_workers * opts.threads_per_shard > n_cores:
        print(f"local: {n_workers} workers on {n_cores} core(s): the machine is oversubscribed "
              f"(N_WORKERS=all uses one worker per core)", file=sys.stderr)  # fmt: skip
    from .warmup import warm_up

    lines = rd.job_lines()
    hosted = hosted_command(lines[0]) if lines else None
    warm_up(rd, min(n_workers, n_cores), shard_env(opts.threads_per_shard), lambda m: print(m, file=sys.stderr),
            hosted[:2] if hosted else None)  # fmt: skip
    stop = threading.Event()
    counts: dict[str, int] = {}
    lock = threading.Lock()
    messages: list[str] = []

    def log(msg: str) -> None:
        with lock:
            messages.append(msg)

    trusted: set[str] = set()  # shared by the workers: each done shard's parts are read once
    fatal: list[tuple[int, str]] = []  # (exit code, cause) of shards that failed with exit 2 or 3
    idle_called: list[bool] = []

    def idle() -> None:
        with lock:
            first_idle = on_idle is not None and not idle_called and not stop.is_set()
            idle_called.append(True)
        if first_idle:
            on_idle()

    last = len(rd.shards) - 1

    def work() -> None:
        try:
            runner = ShardRunner(rd, opts, stop, log=log, trusted=trusted)
            runner.on_claimed = lambda n: idle() if n == last else None
            for k, v in auto_loop(runner).items():
                with lock:
                    counts[k] = counts.get(k, 0) + v
            if runner.fatal is not None:
                with lock:
                    fatal.append(runner.fatal)
            idle()
        except Exception as exc:  # a raw thread traceback would land before the final status
            from simulator.base.errors import (
                describe_access_error,
                describe_resource_error,
                is_access_error,
                is_resource_error,
            )

            what = (describe_resource_error(exc) if is_resource_error(exc) else describe_access_error(exc)
                    if is_access_error(exc) else f"{type(exc).__name__}: {exc}")  # fmt: skip
            with lock:
                counts["worker_error"] = counts.get("worker_error", 0) + 1
                if is_resource_error(exc) or is_access_error(exc):  # the other workers would meet it too
                    fatal.append((3 if is_resource_error(exc) else 2, f"error: {what}"))
                    stop.set()
                    return
            log(f"a worker stopped: {what} (the status below shows what is left)")

    said: set[str] = set()
    bars = _Progress(rd, enabled=progress)
    threads = [threading.Thread(target=work, name=f"worker-{i}", daemon=True) for i in range(n_workers)]
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):  # pragma: no cover - signal path
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
            bars.poll()
            with lock:
                while messages:
                    m = messages.pop(0)
                    if m not in said:
                        said.add(m)
                        bars.bar_units.write(m, file=sys.stderr)
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join()
        raise
    finally:
        bars.close()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, old_term)
    release_spare_hosts()
    for m in dict.fromkeys(messages):  # workers failing alike (disk full) say it once
        if m not in said:
            print(m, file=sys.stderr)
    if fatal:  # the cause, last and alone on its line; the command ends with its code (see fatal_exit)
        counts["fatal_exit"] = fatal[0][0]
        print(fatal[0][1] if fatal[0][1].startswith("error:") else f"error: {fatal[0][1]}", file=sys.stderr)
    return counts
