"""Decide a test's verdict in the parent, from what the sandboxed program returned.

The child that runs generated code never sees the expected outputs and never
decides whether a test passed: it only reports what the function returned,
as a JSON-tagged value tree (``sandbox_runner._encode``), plus its ``repr``
and ``str`` (each size-bounded). This module turns the tree back into plain
Python values of a fixed set of safe types (no code of the program runs in
the parent), reads the expected output with a restricted evaluator (only
literals and a whitelist of constructors such as ``datetime.date`` or
``np.array``: dataset text is data, not code), and applies the comparison
rules of ``docs/codeflow.md``:

1. the result's ``repr`` equals the expected text; or
2. the expected text evaluates and the decoded result equals it (floats at
   relative tolerance 1e-9, bools only equal to bools, lists never equal to
   tuples); or
3. the expected text does not evaluate (rendered text, or a name this
   evaluator does not know) and ``str(result)`` equals it.

Whatever the child writes, it can at most report a value; a forged line is
either a value that is compared like any other or a protocol error.
"""

from __future__ import annotations

import ast
import base64
import collections
import datetime
import decimal
import fractions
import ipaddress
import math
import numbers
import pathlib
import uuid
from typing import Any

REL_TOL = 1e-9
ABS_TOL = 1e-12
MAX_DEPTH = 200
LOCAL_FILES = "<LOCAL_TEST_FILES>"


class BadValue(ValueError):
    """A value tree from the child that does not follow the format."""


class Opaque:
    """A result of a type the child could not describe structurally: equal to nothing."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return hash((self.type_name, self.text))

    def __repr__(self) -> str:
        return self.text


class NamedTupleValue(tuple):
    """A decoded namedtuple: a tuple that remembers its type and field names."""

    type_name: str = ""
    fields: tuple[str, ...] = ()


class NamedCall:
    """An expected ``Name(...)`` whose constructor the parent does not have (e.g. a
    namedtuple defined by the program): compared field by field with a namedtuple."""

    def __init__(self, name: str, args: list, kwargs: dict) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs


# ---------------------------------------------------------------- value trees
_PATHS = {c.__name__: c for c in (pathlib.PosixPath, pathlib.PurePosixPath,
                                   pathlib.PureWindowsPath, pathlib.Path)}
_IPS = {c.__name__: c for c in (ipaddress.IPv4Address, ipaddress.IPv6Address,
                                 ipaddress.IPv4Network, ipaddress.IPv6Network,
                                 ipaddress.IPv4Interface, ipaddress.IPv6Interface)}


def _hex_int(s: Any) -> int:
    if not isinstance(s, str) or len(s) > 100_000:
        raise BadValue("bad integer")
    return int(s, 16)


def _hex_float(s: Any) -> float:
    if not isinstance(s, str) or len(s) > 64:
        raise BadValue("bad float")
    return float.fromhex(s)


def _text(s: Any) -> str:
    if not isinstance(s, str):
        raise BadValue("expected a string")
    return s


def decode(tree: Any, depth: int = 0) -> Any:
    """Rebuild a value from the child's tagged tree; only safe types are created."""
    if depth > MAX_DEPTH:
        raise BadValue("value nested too deeply")
    if not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        raise BadValue("not a tagged value")
    tag, rest = tree[0], tree[1:]

    def items(seq: Any) -> list:
        if not isinstance(seq, list):
            raise BadValue("expected a list of values")
        return [decode(x, depth + 1) for x in seq]

    if tag == "none":
        return None
    if tag == "bool":
        return bool(rest[0] is True)
    if tag == "int":
        return _hex_int(rest[0])
    if tag == "float":
        return _hex_float(rest[0])
    if tag == "complex":
        return complex(_hex_float(rest[0]), _hex_float(rest[1]))
    if tag == "decimal":
        return decimal.Decimal(_text(rest[0]))
    if tag == "fraction":
        return fractions.Fraction(_hex_int(rest[0]), _hex_int(rest[1]))
    if tag == "str":
        return _text(rest[0])
    if tag in ("bytes", "bytearray"):
        raw = base64.b64decode(_text(rest[0]), validate=True)
        return raw if tag == "bytes" else bytearray(raw)
    if tag == "list":
        return items(rest[0])
    if tag == "tuple":
        values = items(rest[0])
        if len(rest) >= 3 and isinstance(rest[1], str) and isinstance(rest[2], list):
            nt = NamedTupleValue(values)
            nt.type_name, nt.fields = rest[1], tuple(str(f) for f in rest[2])
            return nt
        return tuple(values)
    if tag == "dict":
        if not isinstance(rest[0], list):
            raise BadValue("bad dict")
        out = {}
        for pair in rest[0]:
            if not isinstance(pair, list) or len(pair) != 2:
                raise BadValue("bad dict item")
            out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
        return out
    if tag == "set":
        return set(items(rest[0]))
    if tag == "frozenset":
        return frozenset(items(rest[0]))
    if tag == "deque":
        return collections.deque(items(rest[0]))
    if tag == "datetime":
        return datetime.datetime.fromisoformat(_text(rest[0]))
    if tag == "date":
        return datetime.date.fromisoformat(_text(rest[0]))
    if tag == "time":
        return datetime.time.fromisoformat(_text(rest[0]))
    if tag == "timedelta":
        return datetime.timedelta(days=_hex_int(rest[0]), seconds=_hex_int(rest[1]),
                                  microseconds=_hex_int(rest[2]))
    if tag == "path":
        cls = _PATHS.get(_text(rest[0]), pathlib.PurePosixPath)
        return cls(_text(rest[1]))
    if tag == "uuid":
        return uuid.UUID(_text(rest[0]))
    if tag == "ip":
        cls = _IPS.get(_text(rest[0]))
        if cls is None:
            raise BadValue("unknown address type")
        return cls(_text(rest[1]))
    if tag == "ndarray":
        import numpy as np

        dtype = np.dtype(_text(rest[0]))
        if dtype.kind not in "biufcUSO":
            raise BadValue("unsupported array dtype")
        shape = tuple(int(n) for n in rest[1])
        values = items(rest[2])
        if math.prod(shape) != len(values):
            raise BadValue("array shape does not match its values")
        if dtype.kind == "O":
            arr = np.empty(len(values), dtype=object)
            for k, v in enumerate(values):
                arr[k] = v
        else:
            arr = np.array(values, dtype=dtype)
        return arr.reshape(shape)
    if tag == "opaque":
        return Opaque(_text(rest[0]), _text(rest[1]))
    raise BadValue(f"unknown value tag {tag!r}")


# ------------------------------------------------------- expected outputs
def _expected_namespace() -> dict[str, Any]:
    """Names a repr in a test's expected output may use (constructors, constants)."""
    ns: dict[str, Any] = {
        "datetime": datetime, "Decimal": decimal.Decimal, "Fraction": fractions.Fraction,
        "OrderedDict": collections.OrderedDict, "deque": collections.deque,
        "Counter": collections.Counter, "defaultdict": None, "UUID": uuid.UUID,
        "inf": math.inf, "nan": math.nan, "set": set, "frozenset": frozenset,
        "bytes": bytes, "bytearray": bytearray, "complex": complex, "float": float,
        "range": range,
    }
    ns.update(_PATHS)
    ns.update(_IPS)
    try:
        import numpy as np

        ns.update(np=np, numpy=np, array=np.array, dtype=np.dtype)
        for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                     "uint8", "uint16", "uint32", "uint64"):
            ns[name] = getattr(np, name)
    except ImportError:  # pragma: no cover - numpy is a project requirement
        pass
    return {k: v for k, v in ns.items() if v is not None}


_NS = _expected_namespace()
_MODULES = tuple(v for v in _NS.values() if type(v) is type(math))


def _callables() -> set[int]:
    ok = {id(v) for k, v in _NS.items() if callable(v) and not isinstance(v, type(math))}
    ok |= {id(getattr(datetime, n)) for n in ("date", "datetime", "time", "timedelta",
                                               "timezone")}
    np = _NS.get("np")
    if np is not None:
        for name in ("array", "dtype", "float16", "float32", "float64", "int8", "int16",
                     "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_",
                     "str_", "bytes_", "complex64", "complex128", "datetime64",
                     "timedelta64"):
            if hasattr(np, name):
                ok.add(id(getattr(np, name)))
    return ok


_CALLABLE_IDS = _callables()
_SMALL_INT_CALLS = {id(bytes), id(bytearray), id(range)}


class NotLiteral(ValueError):
    """The expected text is not an expression this evaluator accepts."""


def _eval_node(node: ast.AST, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise NotLiteral("nested too deeply")
    ev = lambda n: _eval_node(n, depth + 1)  # noqa: E731
    if isinstance(node, ast.Expression):
        return ev(node.body)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [ev(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(ev(e) for e in node.elts)
    if isinstance(node, ast.Set):
        return {ev(e) for e in node.elts}
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise NotLiteral("dict unpacking")
        return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = ev(node.operand)
        if not isinstance(v, numbers.Number) or isinstance(v, bool):
            raise NotLiteral("sign of a non-number")
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        a, b = ev(node.left), ev(node.right)
        if not (isinstance(a, (int, float, complex)) and isinstance(b, (int, float, complex))):
            raise NotLiteral("arithmetic on non-numbers")
        if not (isinstance(a, complex) or isinstance(b, complex)):
            raise NotLiteral("only complex literals may use + or -")
        return a + b if isinstance(node.op, ast.Add) else a - b
    if isinstance(node, ast.Name):
        if node.id in _NS:
            return _NS[node.id]
        raise NotLiteral(f"unknown name {node.id}")
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise NotLiteral("private attribute")
        base = ev(node.value)
        if not (base in _MODULES or id(base) in _CALLABLE_IDS):
            raise NotLiteral("attribute of a value")
        try:
            return getattr(base, node.attr)
        except AttributeError as exc:
            raise NotLiteral(str(exc)) from None
    if isinstance(node, ast.Call):
        args = [ev(a) for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) != len(node.args) or any(k.arg is None for k in node.keywords):
            raise NotLiteral("star arguments")
        kwargs = {k.arg: ev(k.value) for k in node.keywords}
        if isinstance(node.func, ast.Name) and node.func.id not in _NS:
            return NamedCall(node.func.id, args, kwargs)
        func = ev(node.func)
        if id(func) not in _CALLABLE_IDS:
            raise NotLiteral("call of a function that is not a known constructor")
        if id(func) in _SMALL_INT_CALLS and any(
                isinstance(a, int) and abs(a) > 10**6 for a in [*args, *kwargs.values()]):
            raise NotLiteral("size argument too large")
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # a constructor refusing its arguments
            raise NotLiteral(f"{type(exc).__name__}: {exc}") from None
    raise NotLiteral(f"{type(node).__name__} is not allowed in an expected output")


def eval_expected(text: str) -> Any:
    """The value an expected output denotes; raises :class:`NotLiteral` for rendered text."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise NotLiteral(str(exc)) from None
    try:
        return _eval_node(tree)
    except RecursionError:
        raise NotLiteral("nested too deeply") from None


# ---------------------------------------------------------------- equality
def _is_bool(x: Any) -> bool:
    return type(x).__name__ in ("bool", "bool_")


def equal(a: Any, b: Any, depth: int = 0) -> bool:
    """Python equality, except floats compare with a tolerance and bools only to bools."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(b, NamedCall) or isinstance(a, NamedCall):
        if isinstance(a, NamedCall):
            a, b = b, a
        if not isinstance(a, NamedTupleValue) or a.type_name != b.name:
            return False
        want = list(b.args) + [b.kwargs[f] for f in a.fields[len(b.args):] if f in b.kwargs]
        if len(want) != len(a) or len(b.args) + len(b.kwargs) != len(a):
            return False
        return all(equal(x, y, depth + 1) for x, y in zip(a, want))
    if _is_bool(a) or _is_bool(b):
        return _is_bool(a) and _is_bool(b) and bool(a) == bool(b)
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        try:
            if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
                return int(a) == int(b)
            ca, cb = complex(a), complex(b)
            if any(math.isnan(v) for v in (ca.real, ca.imag, cb.real, cb.imag)):
                return all(math.isnan(x) == math.isnan(y)
                           for x, y in ((ca.real, cb.real), (ca.imag, cb.imag)))
            return math.isclose(ca.real, cb.real, rel_tol=REL_TOL, abs_tol=ABS_TOL) and \
                math.isclose(ca.imag, cb.imag, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if isinstance(a, list) != isinstance(b, list) or len(a) != len(b):
            return False
        return all(equal(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a.keys()) != set(b.keys()):
            return False
        return all(equal(a[k], b[k], depth + 1) for k in a)
    if type(a).__name__ == "ndarray" or type(b).__name__ == "ndarray":
        try:
            import numpy as np

            a2, b2 = np.asarray(a), np.asarray(b)
            if a2.shape != b2.shape:
                return False
            if a2.dtype.kind in "fc" or b2.dtype.kind in "fc":
                return bool(np.allclose(a2, b2, rtol=REL_TOL, atol=ABS_TOL, equal_nan=True))
            return bool(np.array_equal(a2, b2))
        except (TypeError, ValueError):
            return False
    try:
        return bool(a == b)
    except Exception:
        return False


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "...[truncated]"


def judge(event: dict, expected: str, workdir: str, cache: dict[str, Any] | None = None
          ) -> tuple[str, str | None, str | None]:
    """(status, detail, got) of one test from the child's ``returned`` event."""
    got_repr = event.get("repr")
    got_repr = got_repr if isinstance(got_repr, str) else None
    truncated = bool(event.get("repr_truncated"))
    if got_repr is not None and LOCAL_FILES in expected:
        # The dataset anonymised its test-file directory (``<cwd>/files``).
        got_repr = got_repr.replace(workdir.rstrip("/") + "/files", LOCAL_FILES)
    note = _short(got_repr, 600) if got_repr is not None else _short(
        str(event.get("repr_error") or "repr() failed"), 600)
    wrong = ("wrong_answer", "expected " + _short(expected, 200), note)
    if got_repr is not None and not truncated and got_repr == expected:
        return "pass", None, note
    cache = {} if cache is None else cache
    if expected not in cache:
        try:
            cache[expected] = (True, eval_expected(expected))
        except NotLiteral:
            cache[expected] = (False, None)
    evaluates, expected_obj = cache[expected]
    if not evaluates:
        if "str" in event:  # sent only when str(result) differs from repr(result)
            got_str, cut = event.get("str"), event.get("str_truncated")
        else:
            got_str, cut = event.get("repr"), truncated
        ok = isinstance(got_str, str) and not cut and got_str == expected
        return ("pass", None, note) if ok else wrong
    try:
        value = decode(event.get("value"))
    except (BadValue, ValueError, TypeError, IndexError, OverflowError, RecursionError):
        return wrong
    return ("pass", None, note) if equal(value, expected_obj) else wrong

