"""A long-lived shard process: runs job lines of ``run_shard.py`` one after another in one interpreter.

Why: a shard process spends about a second starting (Python, numpy and numba
imports, numba's registries, loading the compiled-code cache) before its first
simulation; with cheap DAGs (a 1-model pool: a few tenths of a second per
shard) that start-up was most of a run's time. A worker (``harness.worker``)
starts one host per worker and sends it the shards it claims; claims,
heartbeats, verification of the outputs and failure accounting stay in the
worker, exactly as with one process per shard. The records cannot differ: a
shard reads every setting from its own command line, and running several DAGs
in one process is what a shard of several DAGs does anyway.

Protocol (one JSON object per line): the worker writes
``{"script": ..., "argv": [...], "cwd": ..., "log": ...}`` on the host's
stdin; the host runs ``main(argv)`` of that ``run_shard.py`` in ``cwd`` with
its stdout and stderr appended to ``log`` and answers ``{"rc": exit code}``
on its own stdout. The host ends at end of input. Started as
``python -m harness.shard_host`` (:data:`COMMAND`) in ROOT, the directory of
the job lines' ``run_shard.py``: ``-m`` puts that directory first on the
module path, so the host imports the code of the tree the job lines name, as
the job line itself would. With ``--preload SCRIPT`` it imports that
``run_shard.py`` (the simulator, numba, the compiled-code cache's
registries) before it reads its first request, so a host started early
(``local`` starts its hosts while ``prepare`` runs) has its imports done when
the first shard arrives.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

#: the host's arguments after the interpreter, run with cwd = ROOT (the directory of the job lines' run_shard.py)
COMMAND = ("-m", "harness.shard_host")


def _load_main(script: str, cache: dict):
    """``main`` of the ``run_shard.py`` at ``script`` (loaded once)."""
    if script not in cache:
        spec = importlib.util.spec_from_file_location("_hosted_run_shard", script)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cache[script] = mod.main
    return cache[script]


def _exit_code(exc: SystemExit) -> int:
    """The exit status a process ending with ``exc`` would have (as the interpreter computes it)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_request(req: dict, cache: dict) -> int:
    """Run one shard request with stdout/stderr appended to its log; its exit code."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        os.chdir(req["cwd"])
        try:
            rc = int(_load_main(req["script"], cache)(list(req["argv"])) or 0)
        except SystemExit as exc:
            rc = _exit_code(exc)
        except BaseException:  # a bug in the shard: its traceback in the log, exit 1 as a process would
            traceback.print_exc()
            rc = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    return rc


def serve(preload: str | None = None) -> None:
    """Answer requests from stdin until it closes (the worker's side: ``harness.worker.ShardHost``)."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing but answers on the answer channel
    os.close(devnull)
    cache: dict = {}
    if preload:
        try:
            _load_main(preload, cache)
        except BaseException:  # pragma: no cover - the first request loads it again and logs the error
            cache.clear()
    for line in sys.stdin:
        if not line.strip():
            continue
        rc = run_request(json.loads(line), cache)
        answers.write(json.dumps({"rc": rc}) + "\n")


if __name__ == "__main__":
    serve(sys.argv[2] if sys.argv[1:2] == ["--preload"] else None)
    from .cli_util import exit_now

    exit_now(0)  # the worker waits for the host to end: skip the interpreter's teardown of numba's heap
