"""What several benchmarks share: an old revision's files, and their marked section of benchmarks/README.md."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from simulator.base.io_utils import atomic_write_text

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
