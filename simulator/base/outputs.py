"""The one rule for a command's output paths: never an input, never outside its folder, written atomically.

Every command that writes a file it was given on the command line checks
the path with :func:`check_output_path` **before any work**, and writes it
with :func:`write_output_text` / :func:`write_output_bytes` (a temporary file
in the same folder, fsync, then rename): so ``--out`` naming the dataset it
reads, or ``--prefix ../x`` escaping ``--out-dir``, is refused in one line
(exit 2) and nothing is changed; and a kill while writing leaves the old
file or the complete new one, never half of one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .errors import ConfigError
from .io_utils import atomic_write_bytes

PathLike = str | os.PathLike


def _resolved(p: PathLike) -> Path:
    return Path(os.path.abspath(os.fspath(p))).resolve()  # symlinks and '..' resolved; need not exist


def _same_file(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)  # hard links, bind mounts
    except OSError:
        return False


def check_output_path(
    out: PathLike,
    *,
    inputs: Iterable[PathLike | None] = (),
    inside: PathLike | None = None,
    flag: str = "--out",
    overwrite: bool = True,
) -> Path:
    """``out`` resolved, after refusing what must never be written (raises :class:`ConfigError`, one line).

    Refused: a path that resolves (through symlinks, ``..`` and hard links)
    to one of ``inputs`` (``None`` entries are ignored); with ``inside``, a
    path that does not lie inside that folder; an existing directory; a path
    whose nearest existing parent is not a directory; with ``overwrite``
    False, an existing file. Nothing is created or written here, so a command
    that refuses leaves everything as it was. ``flag`` names the option in
    the message (``--out``, ``--indices-out``, ``--prefix``).
    """
    text = os.fspath(out)
    if not text:
        raise ConfigError(f"{flag}: an empty path")
    res = _resolved(text)
    for inp in inputs:
        if inp is None or os.fspath(inp) == "":
            continue
        if _same_file(res, _resolved(inp)):
            raise ConfigError(f"{flag} {text!r}: is the input {os.fspath(inp)!r}; write the output elsewhere "
                              "(an output never replaces an input)")  # fmt: skip
    if inside is not None:
        root = _resolved(inside)
        if res != root and root not in res.parents:
            raise ConfigError(f"{flag} {text!r}: lies outside the output folder {os.fspath(inside)!r}")
    if res.is_dir():
        raise ConfigError(f"{flag} {text!r}: is a directory, expected a file path")
    if res.exists() and not overwrite:
        raise ConfigError(f"{flag} {text!r}: already exists (remove it or choose another path)")
    parent = res.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {text!r}: {str(parent)!r} is not a directory")
    return res


def check_output_name(name: str, *, flag: str) -> str:
    """A file-name part (a prefix, a group key): no path separator, not ``.``/``..``, not empty."""
    if not name or name in (".", "..") or "/" in name or os.sep in name or "\0" in name:
        raise ConfigError(f"{flag} {name!r}: must be a plain name (no '/', not '.' or '..'), "
                          "so that the files stay inside the output folder")  # fmt: skip
    return name


def write_output_bytes(out: PathLike, data: bytes, **check) -> Path:
    """Check ``out`` (:func:`check_output_path`, same keywords), then write ``data`` to it atomically."""
    path = check_output_path(out, **check)
    atomic_write_bytes(path, data)
    return path


def write_output_text(out: PathLike, text: str, **check) -> Path:
    """Check ``out`` (:func:`check_output_path`, same keywords), then write UTF-8 ``text`` atomically."""
    return write_output_bytes(out, text.encode("utf-8"), **check)


__all__ = ["check_output_path", "check_output_name", "write_output_bytes", "write_output_text"]
