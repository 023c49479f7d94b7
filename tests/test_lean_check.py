"""Lean checker: JSON message parsing, verdicts, and the subprocess path with a fake lake.

This machine has no Lean toolchain: the real check (``@pytest.mark.lean``) runs
only when ``lake`` is on PATH and the bundled Lake project has Mathlib.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ProofFlow import lean_check
from ProofFlow.lean_check import (
    LEAN_HEADER,
    LeanChecker,
    LeanNotInstalledError,
    classify_messages,
    parse_lean_json_output,
    prepare_source,
)
from simulator.base.errors import UserError
from tests import fake_lake

FIX = Path(__file__).resolve().parent / "fixtures" / "lean"
REPO = Path(__file__).resolve().parents[1]


def _fixture(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_real_error_messages_fail():
    msgs, other = parse_lean_json_output(_fixture("errors.jsonl"))
    assert len(msgs) == 4 and not other
    assert msgs[0].severity == "error" and msgs[0].line == 9 and msgs[0].column == 15
    assert msgs[0].end_line == 9 and msgs[0].kind == "[anonymous]"
    assert classify_messages(msgs) == (False, False, False, "lean_error")


def test_sorry_warning_passes_but_does_not_verify():
    msgs, _ = parse_lean_json_output(_fixture("sorry_warning.jsonl"))
    assert msgs[0].is_sorry and msgs[0].severity == "warning"
    assert classify_messages(msgs) == (True, False, True, "sorry")


def test_linter_warnings_verify():
    msgs, _ = parse_lean_json_output(_fixture("clean_with_linter_warnings.jsonl"))
    assert [m.severity for m in msgs] == ["warning"] * 3
    assert classify_messages(msgs) == (True, True, False, None)
    assert classify_messages([]) == (True, True, False, None)


def test_word_failed_in_a_warning_is_not_a_failure():
    line = json.dumps({"severity": "warning", "pos": {"line": 9, "column": 0},
                       "data": "this tactic failed to do anything useful", "caption": ""})
    msgs, _ = parse_lean_json_output(line + "\nbuild failed (not JSON)\n")
    assert classify_messages(msgs)[:2] == (True, True)


def test_error_in_header_is_a_setup_error():
    line = json.dumps({"severity": "error", "pos": {"line": 1, "column": 0},
                       "data": "unknown module prefix 'Mathlib'"})
    msgs, _ = parse_lean_json_output(line)
    assert classify_messages(msgs) == (False, False, False, "lean_setup_error")


def test_non_json_and_info_lines():
    text = 'Building Mathlib\n{"severity":"information","data":"1"}\n[1, 2]\n'
    msgs, other = parse_lean_json_output(text)
    assert [m.severity for m in msgs] == ["information"]
    assert other == ["Building Mathlib", "[1, 2]"]
    assert classify_messages(msgs)[:2] == (True, True)


def test_prepare_source_header_and_stripping():
    cand = ("import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n\n"
            "theorem t : 1 = 1 := by\n  rfl\n")
    src = prepare_source(cand)
    assert src.startswith(LEAN_HEADER)
    assert "set_option maxHeartbeats 0" in src and "400000" not in src
    assert src.count("import Mathlib") == 1
    assert "open BigOperators Real Nat Topology Rat" in src
    assert src.endswith("theorem t : 1 = 1 := by\n  rfl\n")


def test_lake_missing_gives_install_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LeanNotInstalledError) as ei:
        LeanChecker(REPO / "ProofFlow" / "lean_project")
    msg = str(ei.value)
    assert msg.startswith("Lean is not installed")
    assert "elan" in msg and "lake exe cache get" in msg and "v4.15.0" in msg


def test_bundled_project_is_pinned():
    proj = REPO / "ProofFlow" / "lean_project"
    assert (proj / "lean-toolchain").read_text().strip() == "leanprover/lean4:v4.15.0"
    lakefile = (proj / "lakefile.toml").read_text()
    assert 'name = "mathlib"' in lakefile and 'rev = "v4.15.0"' in lakefile


def test_project_without_toolchain_is_rejected(tmp_path):
    with pytest.raises(UserError, match="lean-toolchain"):
        LeanChecker(tmp_path)


@pytest.fixture
def fake_project(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "lean-toolchain").write_text(lean_check.LEAN_TOOLCHAIN + "\n")
    log = tmp_path / "lake_calls.jsonl"
    fake_lake.install(tmp_path / "bin", monkeypatch, log)
    return proj, log


def test_subprocess_clean_and_sorry(fake_project):
    proj, log = fake_project
    checker = LeanChecker(proj, timeout_sec=30)
    ok = checker.check("theorem t : 1 = 1 := by rfl")
    assert (ok.lean_pass, ok.lean_verify, ok.failure_reason) == (True, True, None)
    assert ok.returncode == 0 and ok.other_output == ["some non-JSON progress line"]
    sorry = checker.check("theorem t : 1 = 1 := by sorry")
    assert (sorry.lean_pass, sorry.lean_verify, sorry.uses_sorry) == (True, False, True)
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert calls[0]["argv"][:3] == ["env", "lean", "--json"]
    assert Path(calls[0]["cwd"]).resolve() == proj.resolve()
    # scratch files are removed
    assert list((proj / ".proofflow_checks").iterdir()) == []


def test_subprocess_error_crash_setup(fake_project):
    proj, _ = fake_project
    checker = LeanChecker(proj, timeout_sec=30)
    err = checker.check("-- FAKE_ERROR\ntheorem t : 1 = 2 := by rfl")
    assert (err.lean_pass, err.lean_verify, err.failure_reason) == (False, False, "lean_error")
    assert len(err.errors) == 4 and err.error_summary(1)[0].startswith("9:15: function expected")
    crash = checker.check("-- FAKE_CRASH")
    assert (crash.lean_pass, crash.failure_reason) == (False, "lean_process_error")
    assert "out of memory" in crash.stderr
    setup = checker.check("-- FAKE_SETUP_ERROR")
    assert setup.failure_reason == "lean_setup_error"
    assert checker.check("  \n").failure_reason == "no_code"


def test_subprocess_timeout_kills(fake_project):
    proj, _ = fake_project
    res = LeanChecker(proj, timeout_sec=1.0).check("-- FAKE_SLEEP")
    assert res.timed_out and not res.lean_pass and res.failure_reason == "timeout"
    assert res.returncode is not None  # the process was killed and reaped


def test_cli_reports_verdict(fake_project, capsys):
    proj, _ = fake_project
    f = proj / "cand.lean"
    f.write_text("theorem t : 1 = 1 := by rfl")
    assert lean_check.main([str(f), "--lean-project", str(proj), "--timeout", "30"]) == 0
    assert json.loads(capsys.readouterr().out)["lean_verify"] is True


def _real_lean_ready() -> bool:
    proj = REPO / "ProofFlow" / "lean_project"
    return shutil.which("lake") is not None and (proj / ".lake" / "packages" / "mathlib").is_dir()


@pytest.mark.lean
@pytest.mark.skipif(not _real_lean_ready(), reason="Lean 4.15.0 + Mathlib not installed")
def test_real_lean_check():
    checker = LeanChecker(timeout_sec=600)
    good = checker.check(
        "theorem t (a b : ℝ) : (a - b)^2 ≥ 0 := by\n  nlinarith [sq_nonneg (a - b)]"
    )
    assert good.lean_verify, good.messages
    sorry = checker.check("theorem t (a : ℝ) : a ^ 2 ≥ 0 := by sorry")
    assert sorry.lean_pass and not sorry.lean_verify
    bad = checker.check("theorem t : (1 : ℕ) = 2 := by rfl")
    assert not bad.lean_pass and bad.failure_reason == "lean_error"
