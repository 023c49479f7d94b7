"""Every door by construction: a command's paths and numbers are declared where its options are.

A command builds its options with :class:`ArgumentParser` (argparse's, plus
one step) and gives each path option an argparse ``type`` saying what the
path is to the command:

* :func:`input_path` -- a file (or folder) the command reads;
* :func:`output_path` -- a file (or folder) the command writes;

and each number option a ``type`` made by :func:`number` or :func:`integer`
(bounds, and whether ``inf`` is meant). After argparse has parsed the
command line, the parser runs **one check over all of the command's inputs
and outputs together**, before the command does any work:

* an output is never an input (the same file through symlinks, ``..`` or a
  hard link), nor another output;
* an output never lies inside an input folder the command reads, and an
  output folder never holds an input (the command would write over it);
* an output file is not an existing folder, an output folder not a file, and
  neither lies under a file;

and it turns every number option into its value, refusing NaN, infinity
(unless the option says it means something), values out of bounds and
integers beyond 64 bits. A refusal is one line naming the flag
(:class:`~simulator.base.errors.ConfigError`, exit 2 under ``cli_entry``).

Why argparse types: ``tests/test_doors.py`` finds every command line of the
project from the code, builds its parser and fails when a path-like or float
option is not declared this way, so a new command cannot forget the rule.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import IN_CLI_ENTRY, ConfigError
from .validation import INT64_MAX, check_int, check_number, where

SOURCE = "flag"


class ArgSpec:
    """An argparse ``type`` whose real parsing runs after argparse (one line per refusal, naming the flag).

    argparse turns a ``ValueError`` raised by a ``type`` into its usage text
    plus a line; the project's rule is one ``error:`` line, so ``__call__``
    keeps the text and :meth:`convert` parses it once every option is known.
    """

    __name__ = "value"

    def __call__(self, text: str) -> str:
        return text

    def convert(self, value: Any, flag: str) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class PathArg(ArgSpec):
    """A path option: ``role`` ``"in"`` (read) or ``"out"`` (written); ``kind`` ``"file"``, ``"dir"`` or
    ``"any"`` (a file or a folder of files, both read); ``keyed``: the value is ``NAME=PATH``; ``dash``: ``-``
    means stdin/stdout (no path); ``as_path``: the value is handed on as a :class:`pathlib.Path`."""

    role: str
    kind: str = "file"
    keyed: bool = False
    dash: bool = False
    as_path: bool = False

    __name__ = "path"

    def path_of(self, value: Any) -> str | None:
        text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        if self.keyed:
            text = text.partition("=")[2] if "=" in text else text
        if self.dash and text == "-":
            return None
        return text

    def convert(self, value: Any, flag: str) -> Any:
        text = self.path_of(value)
        if text is not None:
            if not text:
                raise ConfigError(f"{where(flag, SOURCE)}: an empty path")
            if "\0" in text:
                raise ConfigError(f"{where(flag, SOURCE)}: a path holding a NUL byte, got {text!r}")
        return Path(value) if self.as_path and not isinstance(value, Path) else value


def input_path(kind: str = "file", *, keyed: bool = False, dash: bool = False, as_path: bool = False) -> PathArg:
    """``type=`` of an option naming what the command reads (``kind``: ``file``, ``dir`` or ``any``)."""
    return PathArg("in", kind, keyed, dash, as_path)


def output_path(kind: str = "file", *, dash: bool = False, as_path: bool = False) -> PathArg:
    """``type=`` of an option naming what the command writes (``kind``: ``file`` or ``dir``)."""
    return PathArg("out", kind, False, dash, as_path)


@dataclass(frozen=True, eq=False)
class NumberArg(ArgSpec):
    """A float option: finite unless ``allow_inf`` (then its help must say what ``inf`` means); NaN never."""

    lo: float | None = None
    hi: float | None = None
    lo_inclusive: bool = True
    hi_inclusive: bool = True
    allow_inf: bool = False

    __name__ = "number"

    def convert(self, value: Any, flag: str) -> float:
        return check_number(value, flag, SOURCE, lo=self.lo, hi=self.hi, lo_inclusive=self.lo_inclusive,
                            hi_inclusive=self.hi_inclusive, allow_inf=self.allow_inf)  # fmt: skip


def number(lo: float | None = None, hi: float | None = None, *, lo_inclusive: bool = True,
           hi_inclusive: bool = True, allow_inf: bool = False) -> NumberArg:  # fmt: skip
    """``type=`` of a float option (``number(0, lo_inclusive=False)``: a finite number > 0)."""
    return NumberArg(lo, hi, lo_inclusive, hi_inclusive, allow_inf)


@dataclass(frozen=True, eq=False)
class IntegerArg(ArgSpec):
    """An integer option within bounds (64 bits at most)."""

    lo: int | None = None
    hi: int | None = INT64_MAX

    __name__ = "integer"

    def convert(self, value: Any, flag: str) -> int:
        return check_int(value, flag, SOURCE, lo=self.lo, hi=self.hi)


def integer(lo: int | None = None, hi: int | None = INT64_MAX) -> IntegerArg:
    """``type=`` of an integer option (``integer(1)``: >= 1)."""
    return IntegerArg(lo, hi)


# ----------------------------------------------------------------------------- the one check


def _resolved(text: str) -> Path:
    return Path(os.path.abspath(os.path.expanduser(text))).resolve()


def _same(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _under(child: Path, folder: Path) -> bool:
    return child != folder and folder in child.parents


@dataclass(frozen=True)
class _Door:
    flag: str
    spec: PathArg
    text: str
    res: Path

    @property
    def named(self) -> str:
        """``--pool 'x.jsonl'`` (a positional argument: its path alone)."""
        positional = not (self.flag.startswith("-") or self.flag.isupper() or "/" in self.flag)
        return repr(self.text) if positional else f"{self.flag} {self.text!r}"


def _values(value: Any) -> list[Any]:
    if value is None or value is argparse.SUPPRESS:
        return []
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _values(v)]
    return [value]


def _flag(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def check_doors(doors: Sequence[tuple[str, PathArg, str]]) -> None:
    """The rule over all of a command's paths together: ``doors`` = (flag, spec, path text) for each path.

    Raises :class:`ConfigError` (one line naming both flags) on the first
    output that is an input or another output, lies inside a folder read, or
    is a folder holding an input; on an output file that is a folder, an
    output folder that is a file, or an output under a file.
    """
    items = [_Door(f, s, t, _resolved(t)) for f, s, t in doors]
    ins = [d for d in items if d.spec.role == "in"]
    outs = [d for d in items if d.spec.role == "out"]
    for i, o in enumerate(outs):
        shown = o.named
        for d in ins:
            if _same(o.res, d.res):
                raise ConfigError(f"{shown}: is the input {d.named}; write the output elsewhere "
                                  "(an output never replaces an input)")  # fmt: skip
            if d.spec.kind != "file" and d.res.is_dir() and _under(o.res, d.res):
                raise ConfigError(f"{shown}: lies inside the input folder {d.named}, which the "
                                  "command reads; write the output elsewhere")  # fmt: skip
            if o.spec.kind == "dir" and _under(d.res, o.res):
                raise ConfigError(f"{shown}: is the folder of the input {d.named}; the command "
                                  "writes into it (an output never replaces an input): choose another folder")
        for p in outs[:i]:
            if _same(o.res, p.res):
                raise ConfigError(f"{shown}: is also {p.flag}; give each output its own path")
        if o.res.is_dir() and o.spec.kind == "file":
            raise ConfigError(f"{shown}: is a directory, expected a file path")
        if o.res.exists() and not o.res.is_dir() and o.spec.kind == "dir":
            raise ConfigError(f"{shown}: is a file, expected a directory")
        parent = o.res.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise ConfigError(f"{shown}: {str(parent)!r} is not a directory")


def path_doors(parser: argparse.ArgumentParser, ns: argparse.Namespace) -> list[tuple[str, PathArg, str]]:
    """(flag, spec, path) of every path option of ``parser`` given a value in ``ns``."""
    out = []
    for action in parser._actions:
        if isinstance(action.type, PathArg):
            for v in _values(getattr(ns, action.dest, None)):
                text = action.type.path_of(v)
                if text:
                    out.append((_flag(action), action.type, text))
    return out


def check_namespace(parser: argparse.ArgumentParser, ns: argparse.Namespace, *,
                    extra: Iterable[tuple[str, PathArg, str]] = ()) -> argparse.Namespace:  # fmt: skip
    """Convert every :class:`ArgSpec` option of ``parser`` in ``ns`` (one line per refusal), then
    :func:`check_doors` over its paths and ``extra`` (paths a command derives, e.g. a default beside
    ``--out``)."""
    for action in parser._actions:
        if isinstance(action.type, ArgSpec) and action.dest is not argparse.SUPPRESS:
            value = getattr(ns, action.dest, None)
            if value is None or value is argparse.SUPPRESS:
                continue
            flag = _flag(action)
            if isinstance(value, list):
                value = [[action.type.convert(x, flag) for x in v] if isinstance(v, list)
                         else action.type.convert(v, flag) for v in value]  # fmt: skip
            else:
                value = action.type.convert(value, flag)
            setattr(ns, action.dest, value)
    check_doors([*path_doors(parser, ns), *extra])
    return ns


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, plus :func:`check_namespace` once the options are parsed (before any work).

    Sub-command parsers made by ``add_subparsers`` are of this class too, so
    each checks its own options.
    """

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, rest = super().parse_known_args(args, namespace)
        try:
            return check_namespace(self, ns), rest
        except ConfigError as exc:
            if IN_CLI_ENTRY.get():
                raise  # cli_entry prints it (one line, exit 2)
            print(f"error: {exc}", file=sys.stderr)  # a command that parses before cli_entry: the same line
            raise SystemExit(2) from None


__all__ = ["ArgSpec", "ArgumentParser", "IntegerArg", "NumberArg", "PathArg", "check_doors", "check_namespace",
           "input_path", "integer", "number", "output_path", "path_doors"]  # fmt: skip
