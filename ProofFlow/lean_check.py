"""Lean 4 checker: is a candidate Lean file accepted, and is it proved without ``sorry``?

A candidate is written, behind the standard ProofFlow header, into a Lake
project pinned to Lean 4.15.0 and compiled with ``lake env lean --json FILE``
under a wall-clock timeout. Lean prints one JSON object per message
(``severity``, ``data``, ``pos``, ``endPos``, ``fileName``, ...); the verdict is
read from those objects, never from grepping the text output for words such as
"failed" (Lean prints "failed" inside perfectly fine messages, and a proof can
fail without that word):

- ``lean_pass``: the process finished in time and no message has severity
  ``error`` (a statement formalized with ``:= by sorry`` passes);
- ``lean_verify``: ``lean_pass`` and no "declaration uses 'sorry'" message
  (the proof is complete).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simulator.base import cliargs
from simulator.base.errors import UserError

log = logging.getLogger(__name__)

LEAN_TOOLCHAIN = "leanprover/lean4:v4.15.0"
LEAN_HEADER = (
    "import Mathlib\n"
    "import Aesop\n"
    "set_option maxHeartbeats 0\n"
    "open BigOperators Real Nat Topology Rat\n"
    "\n"
)
HEADER_LINE_COUNT = LEAN_HEADER.count("\n")
DEFAULT_PROJECT_DIR = Path(__file__).resolve().parent / "lean_project"
DEFAULT_TIMEOUT_SEC = 300.0
SCRATCH_DIR_NAME = ".proofflow_checks"
SORRY_MESSAGE = "declaration uses 'sorry'"

INSTALL_HELP = f"""\
Lean is not installed: no `{{lake}}` executable on PATH. This checker needs Lean 4.15.0 and Mathlib.
Here is how to install them:
  1. install elan, the Lean toolchain manager:
       curl https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh -sSf \\
         | sh -s -- -y --default-toolchain none
       source ~/.elan/env
  2. fetch Mathlib and its prebuilt files into the pinned Lake project (elan installs
     {LEAN_TOOLCHAIN} from the project's lean-toolchain file on first use):
       cd {{project}} && lake exe cache get
  3. check:  cd {{project}} && lake env lean --version
Then rerun, or point --lake / --lean-project at your own installation."""

_IMPORT_RE = re.compile(r"^\s*import\s+\S")
_HEARTBEATS_RE = re.compile(r"^set_option\s+maxHeartbeats\s+\d+(\s+in)?\s*$")


class LeanNotInstalledError(UserError):
    """``lake`` is not available; the message says how to install Lean and Mathlib."""


@dataclass
class LeanMessage:
    """One message of ``lean --json`` (positions are 1-based lines in the checked file)."""

    severity: str
    data: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    kind: str | None = None
    file_name: str | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> LeanMessage:
        pos = obj.get("pos") or {}
        end = obj.get("endPos") or {}
        return cls(
            severity=str(obj.get("severity", "")),
            data=str(obj.get("data", "")),
            line=pos.get("line"),
            column=pos.get("column"),
            end_line=end.get("line"),
            end_column=end.get("column"),
            kind=obj.get("kind"),
            file_name=obj.get("fileName"),
        )

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    @property
    def is_sorry(self) -> bool:
        return self.data.strip().startswith(SORRY_MESSAGE)


@dataclass
class LeanCheckResult:
    """Verdict of one check plus what is needed to debug it."""

    lean_pass: bool
    lean_verify: bool
    uses_sorry: bool = False
    timed_out: bool = False
    failure_reason: str | None = None  # None, lean_error, sorry, timeout, lean_setup_error, ...
    latency_sec: float = 0.0
    returncode: int | None = None
    messages: list[LeanMessage] = field(default_factory=list)
    stderr: str = ""
    other_output: list[str] = field(default_factory=list)  # stdout lines that were not JSON

    @property
    def errors(self) -> list[LeanMessage]:
        return [m for m in self.messages if m.is_error]

    def error_summary(self, limit: int = 3) -> list[str]:
        """Short ``line:col: text`` strings of the first errors (for rollout records)."""
        out = []
        for m in self.errors[:limit]:
            out.append(f"{m.line}:{m.column}: {m.data[:500]}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def prepare_source(candidate: str) -> str:
    """The candidate behind the standard header.

    ``import`` lines of the candidate are removed (Lean accepts imports only at
    the top of a file, and the header already imports Mathlib and Aesop), and
    so are top-level ``set_option maxHeartbeats N`` lines, so that the only
    bound on elaboration is the checker's timeout.
    """
    kept = [
        line
        for line in candidate.splitlines()
        if not _IMPORT_RE.match(line) and not _HEARTBEATS_RE.match(line)
    ]
    return LEAN_HEADER + "\n".join(kept).strip("\n") + "\n"


def parse_lean_json_output(stdout: str) -> tuple[list[LeanMessage], list[str]]:
    """Messages from ``lean --json`` stdout (one JSON object per line) and the other lines."""
    messages: list[LeanMessage] = []
    other: list[str] = []
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            other.append(raw)
            continue
        if isinstance(obj, dict) and "severity" in obj:
            messages.append(LeanMessage.from_json(obj))
        else:
            other.append(raw)
    return messages, other


def classify_messages(
    messages: list[LeanMessage], header_lines: int = HEADER_LINE_COUNT
) -> tuple[bool, bool, bool, str | None]:
    """``(lean_pass, lean_verify, uses_sorry, failure_reason)`` from parsed messages.

    An error located in the header (the imports) means the Lake project is not
    set up (Mathlib missing or not built): reported as ``lean_setup_error`` so
    that a broken installation is not mistaken for thousands of wrong proofs.
    """
    errors = [m for m in messages if m.is_error]
    uses_sorry = any(m.is_sorry for m in messages)
    lean_pass = not errors
    lean_verify = lean_pass and not uses_sorry
    reason: str | None = None
    if errors:
        in_header = any(m.line is not None and m.line <= header_lines for m in errors)
        reason = "lean_setup_error" if in_header else "lean_error"
    elif uses_sorry:
        reason = "sorry"
    return lean_pass, lean_verify, uses_sorry, reason


def read_toolchain(project_dir: Path) -> str:
    """Content of the project's ``lean-toolchain`` file (a clear error when absent)."""
    tc = project_dir / "lean-toolchain"
    if not tc.is_file():
        raise UserError(
            f"{project_dir} is not a Lake project pinned to Lean 4.15.0: no lean-toolchain file "
            f"(copy ProofFlow/lean_project/ or create it with '{LEAN_TOOLCHAIN}')"
        )
    return tc.read_text(encoding="utf-8").strip()


def find_lake(lake_cmd: str = "lake", project_dir: Path | None = None) -> str:
    """Absolute path of ``lake``, or :class:`LeanNotInstalledError` with install steps."""
    found = shutil.which(lake_cmd)
    if found is None:
        proj = project_dir or DEFAULT_PROJECT_DIR
        raise LeanNotInstalledError(INSTALL_HELP.format(lake=lake_cmd, project=proj))
    return found


class LeanChecker:
    """Checks Lean candidates in one Lake project (thread-safe: one scratch file per check)."""

    def __init__(
        self,
        project_dir: str | os.PathLike | None = None,
        timeout_sec: float = DEFAULT_TIMEOUT_SEC,
        lake_cmd: str = "lake",
        keep_files: bool = False,
    ) -> None:
        self.project_dir = Path(project_dir) if project_dir else DEFAULT_PROJECT_DIR
        self.project_dir = self.project_dir.resolve()
        if not self.project_dir.is_dir():
            raise UserError(f"Lean project directory {self.project_dir} does not exist")
        self.toolchain = read_toolchain(self.project_dir)
        if self.toolchain != LEAN_TOOLCHAIN:
            log.warning(
                "Lean project %s pins %r, not %r: results may differ from the paper's",
                self.project_dir,
                self.toolchain,
                LEAN_TOOLCHAIN,
            )
        if timeout_sec <= 0:
            raise UserError(f"Lean timeout must be positive, got {timeout_sec}")
        self.timeout_sec = float(timeout_sec)
        self.lake = find_lake(lake_cmd, self.project_dir)
        self.keep_files = keep_files
        self.scratch_dir = self.project_dir / SCRATCH_DIR_NAME

    def command(self, lean_file: Path) -> list[str]:
        """The command run for one file (``--json`` before the file name)."""
        return [self.lake, "env", "lean", "--json", str(lean_file)]

    def check(self, candidate: str) -> LeanCheckResult:
        """Compile ``candidate`` (header added) and return the verdict."""
        if not candidate.strip():
            return LeanCheckResult(False, False, failure_reason="no_code")
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        path = self.scratch_dir / f"Check_{uuid.uuid4().hex}.lean"
        path.write_text(prepare_source(candidate), encoding="utf-8")
        try:
            return self._run(path)
        finally:
            if not self.keep_files:
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass

    def _run(self, path: Path) -> LeanCheckResult:
        start = time.monotonic()
        proc = subprocess.Popen(
            self.command(path),
            cwd=self.project_dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own process group: a timeout kills lake and lean
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout_sec)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stdout, stderr = proc.communicate()
            messages, other = parse_lean_json_output(stdout or "")
            return LeanCheckResult(
                False,
                False,
                timed_out=True,
                failure_reason="timeout",
                latency_sec=time.monotonic() - start,
                returncode=proc.returncode,
                messages=messages,
                stderr=(stderr or "")[-4000:],
                other_output=other[-50:],
            )
        latency = time.monotonic() - start
        messages, other = parse_lean_json_output(stdout or "")
        lean_pass, lean_verify, uses_sorry, reason = classify_messages(messages)
        if proc.returncode != 0 and lean_pass:
            # Lean exits non-zero on errors; a failure without any error message is the
            # tool failing (lake error, crash, out of memory), not a verdict on the proof.
            lean_pass = lean_verify = False
            reason = "lean_process_error"
        return LeanCheckResult(
            lean_pass,
            lean_verify,
            uses_sorry=uses_sorry,
            failure_reason=reason,
            latency_sec=latency,
            returncode=proc.returncode,
            messages=messages,
            stderr=(stderr or "")[-4000:],
            other_output=other[-50:],
        )


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group of ``proc`` (lake spawns lean as a child)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    """``python -m ProofFlow.lean_check FILE.lean``: print the verdict as JSON."""
    import sys

    ap = cliargs.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=cliargs.input_path(), help="Lean file (the standard header is added)")
    ap.add_argument("--lean-project", type=cliargs.input_path("dir"), default=None, help="Lake project dir (default: bundled)")
    ap.add_argument("--timeout", type=cliargs.number(0, lo_inclusive=False), default=DEFAULT_TIMEOUT_SEC, help="seconds")
    ap.add_argument("--lake", default="lake", help="lake executable")
    try:
        args = ap.parse_args(argv)
        checker = LeanChecker(args.lean_project, args.timeout, args.lake)
        res = checker.check(Path(args.file).read_text(encoding="utf-8"))
    except (UserError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(res.to_dict(), indent=2, ensure_ascii=False))
    return 0 if res.lean_verify else 1


if __name__ == "__main__":
    raise SystemExit(main())
