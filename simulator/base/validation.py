"""One validation layer for every entry point (CLI flags, environment variables, files).

Modelled on scikit-learn's ``utils/validation.py``: each check takes the raw
value, the name the user knows it by and where it came from, and either
returns the parsed, typed value or raises :class:`~simulator.base.errors.ConfigError`
with one line that names the offending value, what was expected and its
source, e.g. ``--budget (flag): expected a finite number > 0, got 'inf'`` or
``MC_PORTFOLIO_M (environment): expected an integer >= 1, got 'abc'``.

Every entry point (the ``simulator`` CLI, ``run_experiment.sh`` and its Python
scripts, the pool builders and converters) parses a setting once, here, where
it enters; the code below them receives typed values and does not re-check.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from simulator.base.errors import ConfigError


def where(name: str, source: str | None = None) -> str:
    """``name (source)``: how a setting is shown in messages (source e.g. 'flag', 'environment')."""
    return f"{name} ({source})" if source else name


def _fail(name: str, source: str | None, expected: str, got: Any) -> ConfigError:
    return ConfigError(f"{where(name, source)}: expected {expected}, got {got!r}")


def check_number(
    value: Any,
    name: str,
    source: str | None = None,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_inclusive: bool = True,
    hi_inclusive: bool = True,
    allow_inf: bool = False,
) -> float:
    """A float (from a number or a string); NaN is always refused, infinity only with ``allow_inf``."""
    bounds = []
    if lo is not None:
        bounds.append(f"{'>=' if lo_inclusive else '>'} {lo:g}")
    if hi is not None:
        bounds.append(f"{'<=' if hi_inclusive else '<'} {hi:g}")
    expected = ("a number" if allow_inf else "a finite number") + (" " + " and ".join(bounds) if bounds else "")
    if isinstance(value, bool):
        raise _fail(name, source, expected, value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise _fail(name, source, expected, value) from None
    except OverflowError:  # an integer of hundreds of digits
        shown = value if len(str(value)) <= 30 else f"{str(value)[:20]}... ({len(str(value))} digits)"
        raise _fail(name, source, expected + " (this one is beyond the float range)", shown) from None
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise _fail(name, source, expected, value)
    if lo is not None and (x < lo or (x == lo and not lo_inclusive)):
        raise _fail(name, source, expected, value)
    if hi is not None and (x > hi or (x == hi and not hi_inclusive)):
        raise _fail(name, source, expected, value)
    return x


def check_int(
    value: Any,
    name: str,
    source: str | None = None,
    *,
    lo: int | None = None,
    hi: int | None = None,
) -> int:
    """An integer (``'8'``, ``8`` or ``8.0``; not ``8.5``, ``True`` or ``'abc'``) within bounds."""
    bounds = []
    if lo is not None:
        bounds.append(f">= {lo}")
    if hi is not None:
        bounds.append(f"<= {hi}")
    expected = "an integer" + (" " + " and ".join(bounds) if bounds else "")
    if isinstance(value, bool):
        raise _fail(name, source, expected, value)
    try:
        if isinstance(value, str):
            x = int(value.strip())
        else:
            f = float(value)
            if not f.is_integer():
                raise ValueError
            x = int(f)
    except (TypeError, ValueError, OverflowError):
        raise _fail(name, source, expected, value) from None
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise _fail(name, source, expected, value)
    return x


INT64_MAX = 2**63 - 1

_JSON_TYPE = {str: "a string", bool: "a boolean", type(None): "null", list: "a list", dict: "an object",
              float: "a number with a fraction"}  # fmt: skip


def json_type(value: Any) -> str:
    """How a JSON value's type is named in messages (``a string``, ``null``, ...)."""
    return _JSON_TYPE.get(type(value), type(value).__name__)


def check_int_field(
    value: Any,
    name: str,
    *,
    lo: int | None = None,
    hi: int | None = INT64_MAX,
    integral_floats: bool = False,
) -> int:
    """The one parser of integer fields of files (JSON): names the field, the type and the bounds.

    Unlike :func:`check_int` (flags and environment variables, which are
    text), a string is refused: ``"n_nodes": "5"`` is ``'n_nodes' must be an
    integer, got a string '5'``. Booleans are refused, floats too unless
    ``integral_floats`` (then ``3.0`` is 3). Values beyond ``hi`` (default:
    the largest 64-bit integer, what the arrays hold) are refused rather
    than overflowing later. Raises :class:`ConfigError` with the message
    only; callers add where (file, line, problem, node).
    """
    shown = [f">= {lo}"] if lo is not None else []
    if hi is not None and hi != INT64_MAX:
        shown.append(f"<= {hi}")
    expected = f"{name!r} must be an integer" + (" " + " and ".join(shown) if shown else "")
    x: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        x = value
    elif integral_floats and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        x = int(value)
    if x is None:
        raise ConfigError(f"{expected}, got {json_type(value)} {value!r}")
    if not -INT64_MAX - 1 <= x <= INT64_MAX:
        raise ConfigError(f"{name!r} must be an integer of 64 bits (|x| < 2**63), got {x}")
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        raise ConfigError(f"{expected}, got {x}")
    return x


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The closest valid spelling of ``name`` among ``choices`` (for "did you mean" hints), never ``name`` itself.

    Strict (difflib's ratio >= 0.6, no subsequence fallback): callers also use
    it to tell a misspelt setting from a foreign variable with the same prefix.
    """
    found = suggestions(name, choices, n=1, loose=False)
    return found[0] if found else None


def _subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(ch in it for ch in short)


def suggestions(name: str, choices: Iterable[str], n: int = 3, loose: bool = True) -> list[str]:
    """At most ``n`` spellings among ``choices`` close to ``name``, best first, never ``name`` itself.

    Case is ignored. Close means difflib's ratio >= 0.6; when nothing is that
    close and ``loose``, the choices that contain the letters of ``name`` in order
    (``seq4`` -> ``sequential_4``). Only near-ties of the best one are kept, so a
    clear typo gets one answer, not three.
    """
    key = name.strip().lower()
    pool = [c for c in dict.fromkeys(choices) if c != name.strip()]
    if not key or not pool:
        return []
    ratio = {c: difflib.SequenceMatcher(None, key, c.lower()).ratio() for c in pool}
    close = [c for c in pool if ratio[c] >= 0.6] or [
        c for c in pool if loose and len(key) >= 2 and _subsequence(key, c.lower())]
    close.sort(key=lambda c: -ratio[c])
    if not close:
        return []
    best = ratio[close[0]]
    return [c for c in close if ratio[c] >= best - 0.05][:n]


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """`` (did you mean 'a', 'b' or 'c'?)`` for the :func:`suggestions` of ``name``, else ``""``."""
    found = [repr(c) for c in suggestions(name, choices, n)]
    if not found:
        return ""
    return " (did you mean " + (found[0] if len(found) == 1 else ", ".join(found[:-1]) + " or " + found[-1]) + "?)"


def check_choice(value: Any, name: str, choices: Sequence[str], source: str | None = None) -> str:
    """One of ``choices``; the message lists them and suggests the closest one."""
    s = str(value).strip()
    if s in choices:
        return s
    hint = closest(s, choices)
    msg = f"{where(name, source)}: unknown value {s!r}; expected one of {', '.join(choices)}"
    if hint:
        msg += f" (did you mean {hint!r}?)"
    raise ConfigError(msg)


def check_unknown_names(
    names: Iterable[str], known: Iterable[str], what: str, source: str | None = None
) -> None:
    """Refuse names (e.g. environment variables with a known prefix) that are not known settings."""
    known = list(known)
    bad = sorted(set(names) - set(known))
    if not bad:
        return
    parts = []
    for b in bad:
        hint = closest(b, known)
        parts.append(f"{b!r}" + (f" (did you mean {hint!r}?)" if hint else ""))
    src = f" ({source})" if source else ""
    raise ConfigError(f"unknown {what}{src}: {', '.join(parts)}")


def check_input_file(path: Any, name: str, source: str | None = None) -> Path:
    """An existing, readable regular file (a directory or a missing path is refused)."""
    p = Path(os.fspath(path))
    if not p.exists():
        raise ConfigError(f"{where(name, source)}: file {str(p)!r} does not exist")
    if p.is_dir():
        raise ConfigError(f"{where(name, source)}: {str(p)!r} is a directory, expected a file")
    if not os.access(p, os.R_OK):
        raise ConfigError(f"{where(name, source)}: file {str(p)!r} is not readable")
    return p


def check_output_file(path: Any, name: str, source: str | None = None, *, overwrite: bool = False) -> Path:
    """A path a command may write to: not a directory, its parent exists or can be made,
    and (unless ``overwrite``) not an existing file."""
    p = Path(os.fspath(path))
    if p.is_dir():
        raise ConfigError(f"{where(name, source)}: {str(p)!r} is a directory, expected a file path")
    if p.exists() and not overwrite:
        raise ConfigError(f"{where(name, source)}: {str(p)!r} already exists (remove it or choose another path)")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{where(name, source)}: {str(parent)!r} is not a directory")
    return p


def check_output_dir(path: Any, name: str, source: str | None = None, *, files: Sequence[str] = ()) -> Path:
    """A directory a command will write ``files`` into, checked before the work starts.

    It may exist (as a directory) or not yet (it is created when written);
    the nearest existing ancestor must be a writable directory, and none of
    ``files`` may be a directory. Nothing is created here, so a command that
    fails later leaves no stray directory.
    """
    p = Path(os.fspath(path))
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{where(name, source)}: {str(p)!r} is a file, expected a directory")
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{where(name, source)}: {str(probe)!r} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{where(name, source)}: directory {str(probe)!r} is not writable")
    for f in files:
        if (p / f).is_dir():
            raise ConfigError(f"{where(name, source)}: {str(p / f)!r} is a directory, expected a file path")
    return p


def check_distinct(values: Sequence[Any], name: str, source: str | None = None) -> None:
    """Refuse repeated values (e.g. a grid axis listing the same budget twice)."""
    seen: set = set()
    dup = [v for v in values if v in seen or seen.add(v)]
    if dup:
        raise ConfigError(f"{where(name, source)}: repeated value(s) {', '.join(map(repr, dup))}")
