"""What several benchmarks share: an old revision's files, their marked section of benchmarks/README.md, and a run's record."""

from __future__ import annotations

import io
import os
import platform
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from simulator.base.io_utils import atomic_write_json, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "benchmarks" / "README.md"


def export_revision(rev: str, dest: Path) -> None:
    """Write the files of git revision ``rev`` to ``dest`` (no checkout, no worktree)."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as tf:
        tf.extractall(dest, filter="data")


def write_readme_section(start: str, end: str, section: str, path: Path = README) -> None:
    """Replace the text between the markers ``start`` and ``end`` (appended if absent), atomically."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        a, b = text.index(start), text.index(end) + len(end)
        text = text[:a] + section + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    atomic_write_text(str(path), text)


def log(msg: str) -> None:
    """Print one progress line at once (a benchmark runs for minutes)."""
    print(msg, flush=True)


def run_record(args, **extra) -> dict:
    """The start of a run's JSON record: its arguments, host, start time and 1-minute load average, then ``extra``."""
    return {"args": vars(args), "host": platform.node(), "when": time.strftime("%Y-%m-%d %H:%M"),
            "load_before": os.getloadavg()[0], **extra}  # fmt: skip


def measured_line(res: dict) -> str:
    """The README sections' closing line up to the load averages ("Measured <when> on `<host>` ..."); callers end it."""
    return (f"Measured {res['when']} on `{res['host']}` ({os.cpu_count()} cores, Python {platform.python_version()}); "
            f"1-minute load average before/after: {res['load_before']:.1f} / {res['load_after']:.1f}")  # fmt: skip


def finish_run(args, res: dict, section: Callable[[dict], str], start: str, end: str, t0: float | None = None) -> None:
    """Close a run: the load after (and the seconds since ``t0``), ``res`` to ``args.out``, with --write-readme the
    README section ``section(res)`` between the markers ``start`` and ``end``."""
    res["load_after"] = os.getloadavg()[0]
    if t0 is not None:
        res["seconds"] = time.perf_counter() - t0
    atomic_write_json(args.out, res)
    log(f"wrote {args.out}" + (f" ({res['seconds']:.0f} s)" if t0 is not None else ""))
    if args.write_readme:
        write_readme_section(start, end, section(res))
