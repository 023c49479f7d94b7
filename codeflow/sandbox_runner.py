"""Child side of the sandbox: load untrusted code, run its tests, report what it returned.

This file is executed as the program of a fresh ``python -I -c`` process (see
``sandbox.py``); it must not import anything from the project. It reads one
JSON job from standard input (the program's segments, the function name and
the tests' *inputs* only: the expected outputs never enter this process),
points the user's stdin/stdout/stderr at /dev/null (so printing cannot
corrupt the event channel, which is a duplicate of the original stdout),
optionally installs in-process guards, runs the program's segments in one
module and then each test from ``start``, emitting one JSON line per event::

    {"ev": "loaded", "ok": true}
    {"ev": "loaded", "ok": false, "reason": "syntax_error", "detail": "..."}
    {"ev": "start", "i": 3}
    {"ev": "result", "i": 3, "status": "returned", "value": [...tagged tree...],
     "repr": "...", "str": "..."}                      # str only when it differs from repr
    {"ev": "result", "i": 3, "status": "runtime_error|memory|blocked|bad_test", "detail": "..."}
    {"ev": "done"}

With ``"capture": true`` (the CodeFlow-Comp judging, ``codeflow/comp/judge.py``)
the program's standard output is what is reported instead of the return value:
loading runs with ``sys.stdout`` pointed at a bounded in-memory buffer (and
``sys.stdin`` reading the job's ``stdin`` text, also on file descriptor 0),
each test starts from the text printed while loading, the function is
called, its result is printed when ``print_result`` is set (``print(f(...))``),
``sys.exit(0)`` inside the call ends it normally, and the ``returned`` event
carries the printed text as a string (plus ``stdout_overflow`` and the
SHA-256 of the stripped text, for texts longer than the reported part).

There is no verdict here: the parent compares the returned value with the
expected output (``codeflow/compare.py``). Code running in this process can
rewrite anything in it, so nothing it says is trusted beyond "this is what
the program produced".
"""

import errno
import hashlib
import io
import json
import math
import os
import re
import signal
import sys
import types

MAX_TEXT = 600
MAX_CAPTURE = 8 * 1024 * 1024  # bytes of standard output kept per test in capture mode
BLOCKED_ERRNOS = {errno.ENETUNREACH, errno.EROFS, errno.EACCES, errno.EPERM, errno.EAFNOSUPPORT,
                  errno.EHOSTUNREACH}


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


class _TooBig(Exception):
    """The return value is too large or too deeply nested to describe."""


def _type_name(x):
    t = type(x)
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', t.__name__)}"


def _encode(x, budget, depth=0):
    """Describe a value as a JSON tree of tagged nodes (see ``codeflow/compare.py``).

    Only data leaves the sandbox: numbers as hex text, strings, containers,
    a few standard types by their canonical text, anything else as
    ``["opaque", type, repr]`` (never equal to an expected value). The
    parent decides what the value means and whether it is right."""
    import base64
    import collections
    import datetime
    import decimal
    import fractions
    import ipaddress
    import numbers
    import pathlib
    import uuid

    budget[0] -= 1
    if budget[0] < 0 or depth > 200:
        raise _TooBig()
    sub = lambda v: _encode(v, budget, depth + 1)  # noqa: E731
    if x is None:
        return ["none"]
    if type(x).__name__ in ("bool", "bool_"):
        return ["bool", bool(x)]
    if isinstance(x, numbers.Integral):
        return ["int", hex(int(x))]
    if isinstance(x, fractions.Fraction):
        return ["fraction", hex(x.numerator), hex(x.denominator)]
    if isinstance(x, decimal.Decimal):
        return ["decimal", str(x)]
    if isinstance(x, numbers.Real):
        return ["float", float(x).hex()]
    if isinstance(x, numbers.Complex):
        c = complex(x)
        return ["complex", c.real.hex(), c.imag.hex()]
    if isinstance(x, str):
        return ["str", str.__str__(x)]
    if isinstance(x, (bytes, bytearray)):
        budget[0] -= len(x) // 64
        return ["bytearray" if isinstance(x, bytearray) else "bytes",
                base64.b64encode(bytes(x)).decode("ascii")]
    if isinstance(x, list):
        return ["list", [sub(v) for v in x]]
    if isinstance(x, tuple):
        fields = getattr(type(x), "_fields", None)
        if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):
            return ["tuple", [sub(v) for v in x], type(x).__name__, list(fields)]
        return ["tuple", [sub(v) for v in x]]
    if isinstance(x, dict):
        return ["dict", [[sub(k), sub(v)] for k, v in x.items()]]
    if isinstance(x, (set, frozenset)):
        return ["frozenset" if isinstance(x, frozenset) else "set", [sub(v) for v in x]]
    if isinstance(x, collections.deque):
        return ["deque", [sub(v) for v in x]]
    if isinstance(x, datetime.datetime):
        return ["datetime", x.isoformat()]
    if isinstance(x, datetime.date):
        return ["date", x.isoformat()]
    if isinstance(x, datetime.time):
        return ["time", x.isoformat()]
    if isinstance(x, datetime.timedelta):
        return ["timedelta", hex(x.days), hex(x.seconds), hex(x.microseconds)]
    if isinstance(x, pathlib.PurePath):
        return ["path", type(x).__name__, str(x)]
    if isinstance(x, uuid.UUID):
        return ["uuid", str(x)]
    if isinstance(x, (ipaddress._BaseAddress, ipaddress._BaseNetwork)):
        return ["ip", type(x).__name__, str(x)]
    if type(x).__name__ == "ndarray" and type(x).__module__ == "numpy":
        if x.dtype.kind in "biufcUSO" and x.dtype.names is None:
            budget[0] -= int(x.size)
            if budget[0] < 0:
                raise _TooBig()
            flat = x.ravel().tolist()
            return ["ndarray", x.dtype.str, list(x.shape), [sub(v) for v in flat]]
    try:
        text = repr(x)
    except BaseException as exc:
        text = "<repr failed: " + _describe(exc) + ">"
    return ["opaque", _type_name(x), _short(text)]


MAX_REPR = 64 * 1024


def _describe_result(result):
    """The ``returned`` event of one test: value tree, repr, str (each bounded)."""
    ev = {}
    try:
        text = repr(result)
        if not isinstance(text, str):
            raise TypeError("__repr__ returned a non-string")
    except BaseException as exc:
        ev["repr_error"] = _describe(exc)
    else:
        ev["repr"] = text[:MAX_REPR]
        if len(text) > MAX_REPR:
            ev["repr_truncated"] = True
    try:
        s = str(result)
        if not isinstance(s, str):
            raise TypeError("__str__ returned a non-string")
    except BaseException:
        s = None
    if s is not None and s != ev.get("repr"):
        ev["str"] = s[:MAX_REPR]
        if len(s) > MAX_REPR:
            ev["str_truncated"] = True
    try:
        ev["value"] = _encode(result, [200_000])
    except _TooBig:
        ev["value"] = ["opaque", _type_name(result), "<value too large to describe>"]
    except BaseException as exc:
        ev["value"] = ["opaque", _type_name(result), "<cannot describe: " + _describe(exc) + ">"]
    return ev


def _fit(line_obj, max_line):
    """Drop detail from a too-long event until its line fits the channel's limit."""
    line = json.dumps(line_obj, ensure_ascii=True)
    for key in ("str", "value", "repr"):
        if len(line) < max_line:
            break
        if key in line_obj:
            if key == "value":
                line_obj["value"] = ["opaque", "?", "<value too large to describe>"]
            else:
                line_obj[key] = line_obj[key][:600]
                line_obj[key + "_truncated"] = True
        line = json.dumps(line_obj, ensure_ascii=True)
    return line


class _BoundedBytes(io.BytesIO):
    """In-memory stdout of capture mode: keeps the first MAX_CAPTURE bytes, cannot be closed."""

    overflow = False

    def write(self, b):
        n = len(b)
        room = MAX_CAPTURE - self.tell()
        if n > room:
            self.overflow = True
            b = bytes(b)[:max(0, room)]
        if b:
            super().write(b)
        return n

    def close(self):  # the user's code may close sys.stdout; the text stays readable
        pass


def _new_capture(prefix):
    raw = _BoundedBytes()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n",
                           write_through=True)
    if prefix:
        out.write(prefix)
    return out, raw


def _captured(out, raw):
    try:
        out.flush()
    except BaseException:
        pass
    return raw.getvalue().decode("utf-8", "replace")


def _feed_stdin(text, workdir):
    """Point sys.stdin and file descriptor 0 at ``text`` (an unlinked file in the workdir)."""
    path = os.path.join(workdir, ".stdin")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives with the process


def _captured_event(i, text, overflow):
    ev = {"ev": "result", "i": i, "status": "returned"}
    ev.update(_describe_result(text))
    ev["stdout_overflow"] = bool(overflow)
    ev["stripped_sha256"] = hashlib.sha256(text.strip().encode("utf-8", "replace")).hexdigest()
    return ev


def _call_captured(fn, args, kwargs, i, load_text, print_result):
    """Capture mode: the text a script would print (load output, the call, its printed result)."""
    real_stdout = sys.stdout
    out, raw = _new_capture(load_text)
    sys.stdout = out
    try:
        try:
            result = fn(*args, **kwargs)
        except SystemExit as exc:  # sys.exit(0) after printing the answer is a normal end
            if exc.code not in (None, 0):
                return {"ev": "result", "i": i, "status": "runtime_error",
                        "detail": _short(f"SystemExit: {exc.code!r}")}
        else:
            if print_result:
                print(result)
    except BaseException as exc:
        return {"ev": "result", "i": i, "status": _classify(exc), "detail": _describe(exc)}
    finally:
        sys.stdout = real_stdout
    return _captured_event(i, _captured(out, raw), raw.overflow)


def main():
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")

    max_line = int(job.get("max_line", 200 * 1024))

    def emit(obj):
        channel.write(_fit(obj, max_line) + "\n")
        channel.flush()

    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversize writes fail with EFBIG
    except (AttributeError, ValueError):
        pass
    workdir = os.getcwd()
    inputs = job["inputs"]
    repr_ns = _repr_namespace(inputs)
    capture = bool(job.get("capture"))
    if capture and job.get("stdin") is not None:
        _feed_stdin(str(job["stdin"]), workdir)
    if job.get("guard"):
        _install_guards(workdir)
    real_stdout = sys.stdout
    load_out = load_raw = None
    if capture:
        load_out, load_raw = _new_capture("")
        sys.stdout = load_out

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
    load_text = ""
    if capture:
        sys.stdout = real_stdout
        load_text = _captured(load_out, load_raw)
    fn = module.__dict__.get(job["func_name"])
    if not callable(fn):
        emit({"ev": "loaded", "ok": False, "reason": "missing_function",
              "detail": f"no callable named {job['func_name']!r} after loading the code"})
        return
    emit({"ev": "loaded", "ok": True})

    for i in range(int(job.get("start", 0)), len(inputs)):
        emit({"ev": "start", "i": i})
        env = dict(module.__dict__)
        env.update(repr_ns)
        try:
            call = eval(inputs[i], env)  # noqa: S307
            args, kwargs = call
            args, kwargs = tuple(args), dict(kwargs)
        except BaseException as exc:
            emit({"ev": "result", "i": i, "status": "bad_test",
                  "detail": "test input cannot be evaluated: " + _describe(exc)})
            continue
        if capture:
            emit(_call_captured(fn, args, kwargs, i, load_text, bool(job.get("print_result"))))
            continue
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            emit({"ev": "result", "i": i, "status": _classify(exc), "detail": _describe(exc)})
            continue
        ev = {"ev": "result", "i": i, "status": "returned"}
        ev.update(_describe_result(result))
        emit(ev)
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
