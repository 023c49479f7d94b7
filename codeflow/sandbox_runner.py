"""Child side of the sandbox: load untrusted code, run its tests, stream verdicts.

This file is executed as the program of a fresh ``python -I -c`` process (see
``sandbox.py``); it must not import anything from the project. It reads one
JSON job from standard input, points the user's stdin/stdout/stderr at
/dev/null (so printing cannot corrupt the verdict channel, which is a
duplicate of the original stdout), optionally installs in-process guards, runs
the program's segments in one module and then each test from ``start``,
emitting one JSON line per event::

    {"ev": "loaded", "ok": true}
    {"ev": "loaded", "ok": false, "reason": "syntax_error", "detail": "..."}
    {"ev": "start", "i": 3}
    {"ev": "result", "i": 3, "status": "pass|wrong_answer|runtime_error|memory|blocked|bad_test",
     "detail": "...", "got": "<repr, truncated>"}
    {"ev": "done"}

A test passes when the return value's repr equals the expected string, or
(when the expected string is a Python expression) when the value equals the
evaluated expectation with a float tolerance, or (when it is not an
expression, e.g. a rendered table) when ``str(value)`` equals it.
"""

import errno
import json
import math
import os
import re
import signal
import sys
import types

MAX_TEXT = 600
BLOCKED_ERRNOS = {errno.ENETUNREACH, errno.EROFS, errno.EACCES, errno.EPERM, errno.EAFNOSUPPORT,
                  errno.EHOSTUNREACH}
REL_TOL = 1e-9
ABS_TOL = 1e-12


class SandboxViolation(PermissionError):
    """Raised by the in-process guards (process-isolation mode only)."""


def _short(text, limit=MAX_TEXT):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "...[truncated]"


def _describe(exc):
    try:
        return _short(f"{type(exc).__name__}: {exc}")
    except BaseException:
        return type(exc).__name__


def _classify(exc):
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, SandboxViolation):
        return "blocked"
    try:
        import socket

        if isinstance(exc, socket.gaierror):
            return "blocked"
    except BaseException:
        pass
    if isinstance(exc, OSError) and exc.errno in BLOCKED_ERRNOS:
        return "blocked"
    return "runtime_error"


def _install_guards(workdir):
    """Best-effort guards when no OS isolation is available: no sockets, no
    process creation, no writes outside the working directory. Audit hooks are
    not a security boundary (ctypes can bypass them); the namespace mode is."""
    workdir = os.path.realpath(workdir)
    allowed_write = (workdir + os.sep, "/dev/null")
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def outside(path):
        if isinstance(path, int):
            return False
        try:
            p = os.path.realpath(os.fsdecode(path))
        except BaseException:
            return True
        return not (p == workdir or p.startswith(allowed_write[0]) or p == allowed_write[1])

    path_events = {"os.remove", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.chmod", "os.chown",
                   "os.truncate", "os.utime", "os.chflags"}
    two_path_events = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move"}
    blocked_events = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                      "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                      "socket.gethostbyname_ex", "subprocess.Popen", "os.system", "os.exec",
                      "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
                      "os.killpg", "pty.spawn"}

    def hook(event, args):
        if event in blocked_events:
            raise SandboxViolation(f"sandbox: {event} is not allowed")
        if event == "socket.__new__" and len(args) > 1 and args[1] not in (1,):  # AF_UNIX=1
            raise SandboxViolation("sandbox: network sockets are not allowed")
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags)
            if writing and outside(path):
                raise SandboxViolation(f"sandbox: writing {path!r} outside the work directory")
        elif event in path_events and args and outside(args[0]):
            raise SandboxViolation(f"sandbox: {event} outside the work directory")
        elif event in two_path_events and len(args) >= 2 and (outside(args[0])
                                                               or outside(args[1])):
            raise SandboxViolation(f"sandbox: {event} outside the work directory")

    sys.addaudithook(hook)


def _repr_namespace(texts):
    """Names needed to evaluate the reprs found in test inputs and outputs."""
    import collections
    import datetime
    import decimal
    import fractions
    import ipaddress
    import pathlib
    import uuid

    ns = {
        "datetime": datetime, "Decimal": decimal.Decimal, "Fraction": fractions.Fraction,
        "OrderedDict": collections.OrderedDict, "deque": collections.deque,
        "Counter": collections.Counter, "PosixPath": pathlib.PosixPath,
        "PurePosixPath": pathlib.PurePosixPath, "Path": pathlib.Path,
        "IPv4Address": ipaddress.IPv4Address, "IPv6Address": ipaddress.IPv6Address,
        "IPv4Network": ipaddress.IPv4Network, "IPv6Network": ipaddress.IPv6Network,
        "IPv4Interface": ipaddress.IPv4Interface, "IPv6Interface": ipaddress.IPv6Interface,
        "UUID": uuid.UUID, "inf": math.inf, "nan": math.nan,
    }
    joined = "\n".join(texts)
    if re.search(r"\b(np|numpy|array|dtype|float(16|32|64)|u?int(8|16|32|64))\b", joined):
        try:
            import numpy as np

            ns.update(np=np, numpy=np, array=np.array, dtype=np.dtype)
            for name in ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
                         "uint8", "uint16", "uint32", "uint64"):
                ns[name] = getattr(np, name)
        except BaseException:
            pass
    if re.search(r"\b(mpz|mpq|mpfr|xmpz)\(", joined):
        try:
            import gmpy2

            ns.update(mpz=gmpy2.mpz, mpq=gmpy2.mpq, mpfr=gmpy2.mpfr, xmpz=gmpy2.xmpz)
        except BaseException:
            pass
    if "tensor(" in joined:
        try:
            import torch

            ns["tensor"] = torch.tensor
        except BaseException:
            pass
    if "Figure(" in joined:
        try:
            from plotly.graph_objects import Figure

            ns["Figure"] = Figure
        except BaseException:
            pass
    return ns


def _is_bool(x):
    return type(x).__name__ in ("bool", "bool_")


def _equal(a, b, depth=0):
    """Python equality, except floats compare with a tolerance and bools only to bools."""
    if depth > 200:
        return False
    if _is_bool(a) or _is_bool(b):
        return _is_bool(a) and _is_bool(b) and bool(a) == bool(b)
    import numbers

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
        except BaseException:
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if isinstance(a, list) != isinstance(b, list) or len(a) != len(b):
            return False
        return all(_equal(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a.keys()) != set(b.keys()):
            return False
        return all(_equal(a[k], b[k], depth + 1) for k in a)
    if type(a).__name__ == "ndarray" or type(b).__name__ == "ndarray":
        try:
            import numpy as np

            a2, b2 = np.asarray(a), np.asarray(b)
            if a2.shape != b2.shape:
                return False
            if a2.dtype.kind in "fc" or b2.dtype.kind in "fc":
                return bool(np.allclose(a2, b2, rtol=REL_TOL, atol=ABS_TOL, equal_nan=True))
            return bool(np.array_equal(a2, b2))
        except BaseException:
            return False
    try:
        res = a == b
        if isinstance(res, bool):
            return res
        return bool(res)
    except BaseException:
        return False


def _matches(result, expected, env, workdir):
    try:
        got = repr(result)
    except BaseException as exc:
        got = None
        got_note = _describe(exc)
    else:
        got_note = got
    if got is not None:
        if "<LOCAL_TEST_FILES>" in expected:
            # The dataset anonymised its test-file directory (``<cwd>/files``).
            got = got.replace(os.path.join(workdir, "files"), "<LOCAL_TEST_FILES>")
            got_note = got
        if got == expected:
            return True, got_note
    try:
        expected_obj = eval(expected, env)  # noqa: S307 - dataset text, inside the sandbox
    except BaseException:
        try:
            return str(result) == expected, got_note
        except BaseException:
            return False, got_note
    return _equal(result, expected_obj), got_note


def main():
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")

    def emit(obj):
        channel.write(json.dumps(obj, ensure_ascii=True) + "\n")
        channel.flush()

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversize writes fail with EFBIG
    except (AttributeError, ValueError):
        pass
    workdir = os.getcwd()
    tests = job["tests"]
    texts = [t["input"] for t in tests] + [t["output"] for t in tests]
    repr_ns = _repr_namespace(texts)
    if job.get("guard"):
        _install_guards(workdir)

    module = types.ModuleType("solution")
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["solution"] = module
    for seg in job["segments"]:
        kind = seg.get("kind", "solution")
        try:
            import __future__

            flags = 0
            for feature in seg.get("future") or ():
                flags |= getattr(__future__, feature).compiler_flag
            code = compile(seg["code"], "<string>", "exec", flags=flags, dont_inherit=True)
        except BaseException as exc:
            reason = "syntax_error" if kind == "solution" else "dependency_error"
            emit({"ev": "loaded", "ok": False, "reason": reason,
                  "detail": f"{seg.get('name')}: {_describe(exc)}"})
            return
        try:
            exec(code, module.__dict__)  # noqa: S102 - this is the sandbox
        except BaseException as exc:
            if kind == "solution":
                reason = _classify(exc)
                reason = "load_error" if reason == "runtime_error" else reason
            else:
                reason = "dependency_error"
            emit({"ev": "loaded", "ok": False, "reason": reason,
                  "detail": f"{seg.get('name')}: {_describe(exc)}"})
            return
    fn = module.__dict__.get(job["func_name"])
    if not callable(fn):
        emit({"ev": "loaded", "ok": False, "reason": "missing_function",
              "detail": f"no callable named {job['func_name']!r} after loading the code"})
        return
    emit({"ev": "loaded", "ok": True})

    for i in range(int(job.get("start", 0)), len(tests)):
        emit({"ev": "start", "i": i})
        test = tests[i]
        env = dict(module.__dict__)
        env.update(repr_ns)
        try:
            call = eval(test["input"], env)  # noqa: S307
            args, kwargs = call
            args, kwargs = tuple(args), dict(kwargs)
        except BaseException as exc:
            emit({"ev": "result", "i": i, "status": "bad_test",
                  "detail": "test input cannot be evaluated: " + _describe(exc)})
            continue
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            emit({"ev": "result", "i": i, "status": _classify(exc), "detail": _describe(exc)})
            continue
        try:
            ok, got = _matches(result, test["output"], env, workdir)
        except BaseException as exc:
            ok, got = False, "comparison failed: " + _describe(exc)
        emit({"ev": "result", "i": i, "status": "pass" if ok else "wrong_answer",
              "detail": None if ok else "expected " + _short(test["output"], 200),
              "got": _short(got)})
    emit({"ev": "done"})


if __name__ == "__main__":
    try:
        main()
    finally:
        # Do not wait for threads the user code may have left running.
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(0)
