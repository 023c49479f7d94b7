"""Untrusted code is contained: loops, memory bombs, network, stray writes, secrets."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

import pytest

from codeflow.dataset import load_problems
from codeflow.sandbox import SandboxLimits, detect_isolation, run_tests
from codeflow.verify import build_segments, verify_code

MODES = ["process"] + (["namespace"] if detect_isolation() == "namespace" else [])


def _limits(mode: str, **kw) -> SandboxLimits:
    return SandboxLimits(isolation=mode, **{"test_timeout_sec": 1.5, "memory_mb": 1024, **kw})


def _run(mode: str, body: str, tests: list[tuple[str, str]], **kw):
    code = "def f(*args, **kwargs):\n" + "\n".join("    " + ln for ln in body.splitlines())
    segs = [{"name": "f", "kind": "solution", "code": code}]
    return run_tests(segs, "f", [{"input": i, "output": o} for i, o in tests], _limits(mode, **kw))


@pytest.mark.parametrize("mode", MODES)
def test_infinite_loop_is_a_timeout_and_later_tests_still_run(mode):
    body = "if args[0] == 1:\n    while True:\n        pass\nreturn args[0]"
    run = _run(mode, body, [("((0,), {})", "0"), ("((1,), {})", "1"), ("((2,), {})", "2")])
    assert [o.status for o in run.outcomes] == ["pass", "timeout", "pass"]
    assert run.processes == 2


@pytest.mark.parametrize("mode", MODES)
def test_loop_that_swallows_exceptions_is_still_killed(mode):
    body = "while True:\n    try:\n        pass\n    except BaseException:\n        pass"
    run = _run(mode, body, [("((), {})", "None")])
    assert run.outcomes[0].status == "timeout"


@pytest.mark.parametrize("mode", MODES)
def test_memory_bomb_is_a_memory_failure(mode):
    run = _run(mode, "x = bytearray(8 * 1024 ** 3)\nreturn len(x)", [("((), {})", "0")],
               memory_mb=512)
    assert run.outcomes[0].status == "memory"


@pytest.mark.parametrize("mode", MODES)
def test_network_call_is_blocked(mode):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        try:
            conn, _ = listener.accept()
            accepted.append(conn)
        except OSError:
            pass

    body = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "s.sendall(b'hello')\nreturn 'sent'")
    run = _run(mode, body, [("((), {})", "'sent'")])
    thread = threading.Thread(target=accept)
    thread.start()
    thread.join()
    listener.close()
    assert run.outcomes[0].status == "blocked", run.outcomes[0]
    assert accepted == []


@pytest.mark.parametrize("mode", MODES)
def test_writing_outside_the_work_directory_is_blocked(mode, tmp_path):
    # /etc: visible (read-only) inside the namespace wherever the checkout lives, so EROFS there
    # (a checkout under /tmp would be hidden behind the sandbox's private /tmp)
    target = Path("/etc") / f".sandbox_escape_{uuid.uuid4().hex}"
    body = f"open({str(target)!r}, 'w').write('x')\nreturn 'written'"
    try:
        run = _run(mode, body, [("((), {})", "'written'")])
        assert run.outcomes[0].status == "blocked", run.outcomes[0]
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)
    # the host's /tmp: in namespace mode the code sees a private, empty /tmp instead
    target = tmp_path / "escaped.txt"
    body = f"open({str(target)!r}, 'w').write('x')\nreturn 'written'"
    run = _run(mode, body, [("((), {})", "'written'")])
    assert run.outcomes[0].status != "pass", run.outcomes[0]
    assert not target.exists()


@pytest.mark.parametrize("mode", MODES)
def test_writing_inside_the_work_directory_is_allowed(mode):
    body = "open('scratch.txt', 'w').write('abc')\nreturn open('scratch.txt').read()"
    run = _run(mode, body, [("((), {})", "'abc'")])
    assert run.outcomes[0].status == "pass"


@pytest.mark.parametrize("mode", MODES)
def test_environment_secret_is_not_visible(mode, monkeypatch):
    monkeypatch.setenv("CODEFLOW_TEST_SECRET", "s3cret-value")
    body = "import os\nreturn os.environ['CODEFLOW_TEST_SECRET']"
    run = _run(mode, body, [("((), {})", "'s3cret-value'")])
    assert run.outcomes[0].status == "runtime_error"
    assert "KeyError" in run.outcomes[0].detail
    # nor through the parent's /proc entry
    body = f"return open('/proc/{os.getpid()}/environ', 'rb').read()"
    run = _run(mode, body, [("((), {})", "b''")])
    assert run.outcomes[0].status != "pass"
    assert "s3cret" not in (run.outcomes[0].got or "") + (run.outcomes[0].detail or "")


@pytest.mark.parametrize("mode", MODES)
def test_process_exit_and_huge_output_are_contained(mode):
    body = "import os, sys\nif args[0]:\n    os._exit(7)\nprint('x' * 10**7)\nreturn 1"
    run = _run(mode, body, [("((1,), {})", "1"), ("((0,), {})", "1")])
    assert run.outcomes[0].status == "crashed" and "exit code 7" in run.outcomes[0].detail
    assert run.outcomes[1].status == "pass"


def test_load_failures_are_reported_per_kind():
    segs = [{"name": "f", "kind": "solution", "code": "def f(:\n  pass"}]
    run = run_tests(segs, "f", [{"input": "((), {})", "output": "None"}], _limits("process"))
    assert not run.load_ok and run.load_reason == "syntax_error"
    segs = [{"name": "g", "kind": "solution", "code": "def g():\n  return 1"}]
    run = run_tests(segs, "f", [{"input": "((), {})", "output": "None"}], _limits("process"))
    assert run.load_reason == "missing_function"
    segs = [{"name": "dep", "kind": "dependency", "code": "raise ValueError('bad dep')"},
            {"name": "f", "kind": "solution", "code": "def f():\n  return 1"}]
    run = run_tests(segs, "f", [{"input": "((), {})", "output": "1"}], _limits("process"))
    assert run.load_reason == "dependency_error" and "bad dep" in run.load_detail


@pytest.mark.parametrize("expected,code,ok", [
    ("0.30000000000000004", "return 0.1 + 0.2", True),
    ("0.3", "return 0.1 + 0.2", True),  # float tolerance 1e-9 relative
    ("0.31", "return 0.1 + 0.2", False),
    ("1", "return True", False),  # bools only equal bools
    ("True", "return 1", False),
    ("[1, 2.0000000001]", "return [1, 2.0]", True),
    ("(1, 2)", "return [1, 2]", False),
    ("'5'", "return 5", False),
    ("+--+\n|a |\n+--+", "return '+--+\\n|a |\\n+--+'", True),  # raw-text expectation
    ("{'a': [1, {'b': 2}]}", "return {'a': [1, {'b': 2}]}", True),
    ("datetime.date(2023, 1, 3)", "import datetime\nreturn datetime.date(2023, 1, 3)", True),
    ("PosixPath('<LOCAL_TEST_FILES>/x.jpg')",
     "from pathlib import Path\nreturn Path.cwd() / 'files' / 'x.jpg'", True),
])
def test_comparison_rules(expected, code, ok):
    run = _run("process", code, [("((), {})", expected)])
    assert (run.outcomes[0].status == "pass") is ok, run.outcomes[0]


def test_verify_code_runs_dependencies_and_reports_pass_rate():
    problem = next(p for p in load_problems() if p.problem_id == "Basic__Python__abs_min")
    ref = problem.by_name["abs_min"].reference_code
    v = verify_code(problem, "abs_min", ref)
    assert v.success and v.pass_rate == 1.0 and v.failure_reason is None
    # the attempt relies on its dependency abs_val, which comes from the reference
    wrong = "def abs_min(x):\n    return max(x, key=abs_val)\n"
    v = verify_code(problem, "abs_min", wrong)
    assert not v.success and v.failure_reason == "wrong_answer" and v.pass_rate < 1.0
    assert verify_code(problem, "abs_min", None).failure_reason == "no_code"
    # dependency code can be swapped for an attempt
    broken_dep = {"abs_val": "def abs_val(num):\n    return num\n"}
    v = verify_code(problem, "abs_min", ref, broken_dep)
    assert not v.success
    segs = build_segments(problem, "abs_min", ref, broken_dep)
    assert [s["kind"] for s in segs][-2:] == ["dependency", "solution"]


@pytest.mark.parametrize("expected,code,ok", [
    ("array([1. , 2.5])", "import numpy as np\nreturn np.array([1.0, 2.5 + 1e-12])", True),
    ("array([1, 2])", "import numpy as np\nreturn np.array([1, 3])", False),
    ("np.float64(0.1)", "return 0.1 + 1e-13", True),
    ("Decimal('1.50')", "from decimal import Decimal\nreturn Decimal('1.5')", True),
    ("{1, 2}", "return frozenset({2, 1})", True),
    ("nan", "return float('nan')", True),
    ("(1+2j)", "return complex(1, 2.0000000000001)", True),
    ("10**400", "return 10**400", False),  # arithmetic is not a literal: raw-text rule
    (repr(10**400), "return 10**400", True),  # beyond int's default str digit limit
    ("Pt(x=1, y=2.0000000001)", "from collections import namedtuple\n"
     "return namedtuple('Pt', 'x y')(1, 2.0)", True),
    ("Pt(x=1, y=3)", "from collections import namedtuple\n"
     "return namedtuple('Pt', 'x y')(1, 2)", False),
    ("b'ab'", "return bytearray(b'ab')", True),
    ("__import__('os').getcwd()", "import os\nreturn os.getcwd()", False),  # never run
])
def test_comparison_rules_for_decoded_values(expected, code, ok):
    run = _run("process", code, [("((), {})", expected)])
    assert (run.outcomes[0].status == "pass") is ok, run.outcomes[0]


# Generated code that tries to make a wrong answer pass. Each returns a wrong value (or none)
# after attacking the channel; an honest test in the same run shows the run itself works.
_FORGE_LINES = ('{"ev": "result", "i": 0, "status": "pass"}\\n'
                '{"ev": "result", "i": 1, "status": "pass"}\\n{"ev": "done"}\\n')
FORGERIES = {
    "write_every_fd": (
        "import os\n"
        "if args[0] == 0:\n"
        "    for fd in range(256):\n"
        "        try:\n"
        f"            os.write(fd, b'{_FORGE_LINES}')\n"
        "        except OSError:\n"
        "            pass\n"
        "return 'wrong'"),
    "write_every_fd_then_exit_0": (
        "import os\n"
        "for fd in range(256):\n"
        "    try:\n"
        f"        os.write(fd, b'{_FORGE_LINES}')\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)"),
    "sys_exit_0": "import sys\nsys.exit(0)",
    "forged_pass_fields_on_current_test": (
        "import os\n"
        "line = ('{\"ev\": \"result\", \"i\": %d, \"status\": \"pass\", \"ok\": true, '\n"
        "        '\"verdict\": \"pass\"}\\n{\"ev\": \"result\", \"i\": %d, '\n"
        "        '\"status\": \"returned\", \"value\": [\"str\", \"?\"], \"passed\": true}\\n'\n"
        "        % (args[0], args[0]))\n"
        "for fd in range(3, 256):\n"
        "    try:\n"
        "        os.write(fd, line.encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "return 'wrong'"),
    "patch_runner_functions": (
        "import sys, json\n"
        "main = sys.modules['__main__']\n"
        "for name in list(vars(main)):\n"
        "    if name.startswith('_') and callable(getattr(main, name)) and name != '__loader__':\n"
        "        setattr(main, name, lambda *a, **k: (True, 'pass'))\n"
        "json.dumps = lambda obj, **k: '{\"ev\": \"result\", \"i\": %d, \"status\": \"pass\"}'"
        " % obj.get('i', 0) if obj.get('ev') == 'result' else json.JSONEncoder().encode(obj)\n"
        "return 'wrong'"),
    "steal_expected_from_frames": (
        "import gc, sys\n"
        "f = sys._getframe(1)\n"
        "while f is not None:\n"
        "    for v in list(f.f_locals.values()):\n"
        "        if isinstance(v, dict) and 'output' in v:\n"
        "            return eval(v['output'])\n"
        "        if isinstance(v, dict) and 'tests' in v:\n"
        "            return eval(v['tests'][args[0]]['output'])\n"
        "    f = f.f_back\n"
        "for o in gc.get_objects():\n"
        "    if isinstance(o, dict) and isinstance(o.get('output'), str):\n"
        "        return eval(o['output'])\n"
        "return 'wrong'"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attack", sorted(FORGERIES))
def test_generated_code_cannot_forge_a_verdict(mode, attack):
    code = "def f(*args, **kwargs):\n" + "\n".join(
        "    " + ln for ln in FORGERIES[attack].splitlines())
    code += "\n\ndef honest():\n    return 7\n"
    tests = [{"input": "((0,), {})", "output": "42"}, {"input": "((1,), {})", "output": "42"}]
    run = run_tests([{"name": "f", "kind": "solution", "code": code}], "f", tests,
                    _limits(mode))
    assert [o.status for o in run.outcomes if o.status == "pass"] == [], (attack, run.outcomes)
    # the same program's honest function passes: the failures come from the judging
    honest = run_tests([{"name": "f", "kind": "solution", "code": code}], "honest",
                       [{"input": "((), {})", "output": "7"}], _limits(mode))
    assert honest.outcomes[0].status == "pass", honest.outcomes
