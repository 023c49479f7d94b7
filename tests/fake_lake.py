"""A stand-in for ``lake`` used by the tests (no Lean toolchain on this machine).

Invoked as ``lake env lean --json FILE``. It answers with real Lean 4 JSON
message lines chosen by markers in FILE:
FAKE_SLEEP (hang), FAKE_CRASH (exit 1, no messages), FAKE_ERROR (errors),
``sorry`` (sorry warning); otherwise it prints nothing and exits 0.
FAKE_LAKE_LOG (env) receives the argv and cwd of every call.
"""

import json
import os
import sys
import time
from pathlib import Path

FIX = Path(__file__).resolve().parent / "fixtures" / "lean"


def install(bin_dir: Path, monkeypatch, log_path: Path | None = None) -> Path:
    """Put an executable ``lake`` running this script first on PATH (pytest helper)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "lake"
    script = str(Path(__file__).resolve())
    exe.write_text(
        f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({script!r}, run_name='__main__')\n",
        encoding="utf-8",
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    if log_path is not None:
        monkeypatch.setenv("FAKE_LAKE_LOG", str(log_path))
    return exe


def main() -> int:
    args = sys.argv[1:]
    log = os.environ.get("FAKE_LAKE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"argv": args, "cwd": os.getcwd()}) + "\n")
    if args[:2] != ["env", "lean"] or "--json" not in args:
        print(f"fake lake: unsupported arguments {args}", file=sys.stderr)
        return 2
    files = [a for a in args[2:] if a.endswith(".lean")]
    text = Path(files[0]).read_text(encoding="utf-8")
    if not text.startswith("import Mathlib\nimport Aesop\n"):
        print(json.dumps({"severity": "error", "pos": {"line": 1, "column": 0},
                          "data": "fake lake: header missing", "fileName": files[0]}))
        return 1
    print("some non-JSON progress line")
    if "FAKE_SLEEP" in text:
        time.sleep(60)
        return 0
    if "FAKE_CRASH" in text:
        print("lake: out of memory", file=sys.stderr)
        return 1
    if "FAKE_SETUP_ERROR" in text:
        print(json.dumps({"severity": "error", "pos": {"line": 1, "column": 0},
                          "endPos": {"line": 1, "column": 14}, "fileName": files[0],
                          "data": "unknown module prefix 'Mathlib'"}))
        return 1
    if "FAKE_ERROR" in text:
        sys.stdout.write((FIX / "errors.jsonl").read_text(encoding="utf-8"))
        return 1
    sys.stdout.write((FIX / "clean_with_linter_warnings.jsonl").read_text(encoding="utf-8"))
    if "sorry" in text:
        sys.stdout.write((FIX / "sorry_warning.jsonl").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
