"""Every door of the project, found from the code: each path option is a declared input or output,
each float option a checked number, and each command's parser runs the one check over its paths.

The commands are not written here by hand: they are every module with an
``if __name__ == "__main__"`` block, every console script of
``pyproject.toml`` and every action of ``run_experiment.sh``
(``harness.cli.ACTIONS``); a module with a ``COMMANDS`` table contributes each
of its sub-commands. Each command's ``main`` is called with ``--help`` while
argparse's parser is intercepted at its first parse, so the options are read
from the parser the command really builds (nothing is run).

The harness actions also read paths from the environment: each variable
whose parser is a path (``harness.variables.Path``) must say whether it is
an input or an output.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

from simulator.base.cliargs import ArgumentParser, NumberArg, PathArg

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {"tests", "lean_project", "__pycache__", ".venv", "venv", "results", "build", ".git"}

#: entry points that are processes of the project itself, not commands a user types: what they take instead.
INTERNAL = {
    "harness.shard_host": "the shard host: reads shard command lines from its parent's pipe",
    "harness.analysis_host": "the analysis host: reads requests from its parent's pipe",
    "harness.warmup": "the warm-up child: one kernel group name from its parent",
    "simulator.methods": "writes the methods table of docs/ (a maintainer's tool, one optional output path)",
    "codeflow.sandbox_runner": "the sandbox's runner: reads its job from stdin",
    "simulator.__main__": "starts the cold-start helper, then `simulator.cli.main` (enumerated itself)",
    "harness.variables": "prints the settings table of docs/harness.md (no options)",
    "executor.reaper": "the verifier's reaper: started by the executor with its pid, a CPU limit and the command",
    "benchmarks.run_digest": "digests of run folders given as arguments: reads only, writes nothing",
}

#: a string option whose name looks like a path but is not one: why.
NOT_PATHS = {
    "--pool-sha256": "the pool's digest recorded by prepare",
    "--runs": "benchmarks.agree_cells: a number of episodes",
    "--benchmark-nodes": "poolbuild.synthetic: a node count range (N or LO-HI)",
}

PATHLIKE = re.compile(r"(^|[_-])(out|outs|output|dir|file|files|path|paths|pool|pools|index-file|journal|trace|"
                      r"traces|record|records|plot|csv|json|jsonl|tasks|template|pickle|pickles|endpoints|"
                      r"rollouts|dataset|root|input|inputs|keep|manifest|config|spec|png|html|results|runs|log|"
                      r"summary-out|indices|prices-file|price-file|benchmark|benchmark-file|model-spec|cache|project|prompt)($|[_-])")  # fmt: skip


def _main_modules() -> list[str]:
    out = []
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT)
        if SKIP_DIRS & set(rel.parts[:-1]) or rel.parts[0] in SKIP_DIRS:
            continue
        text = p.read_text(encoding="utf-8")
        if "__main__" not in text:
            continue
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                out.append(".".join(rel.with_suffix("").parts))
    for p in sorted(ROOT.rglob("__main__.py")):  # python -m package
        rel = p.relative_to(ROOT)
        if not (SKIP_DIRS & set(rel.parts)):
            out.append(".".join(rel.parent.parts) + ".__main__")
    return sorted(set(out))


def _console_scripts() -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return sorted(set(data["project"]["scripts"].values()))


def _entry(module: str):
    """The function a module's ``__main__`` block (or ``python -m`` package) calls with the command line."""
    if module.endswith(".__main__"):
        src = (ROOT / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8")
        if "cli.main" in src or "import main" in src:
            mod = importlib.import_module(module.rsplit(".", 1)[0] + ".cli") if "from .cli" in src or \
                "cli import main" in src else None
            if mod is not None:
                return mod.main
    mod = importlib.import_module(module)
    src = (ROOT / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8")
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                        call.func.id.startswith(("main", "cmd_")) and hasattr(mod, call.func.id):
                    return getattr(mod, call.func.id)
    return mod.main


class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def _capture(fn, argv) -> argparse.ArgumentParser | None:
    orig = argparse.ArgumentParser.parse_known_args

    def grab(self, args=None, namespace=None):
        raise _Captured(self)

    argparse.ArgumentParser.parse_known_args = grab
    try:
        if inspect.signature(fn).parameters:
            fn(argv)
        else:  # main() reading sys.argv
            saved, sys.argv = sys.argv, ["prog", *argv]
            try:
                fn()
            finally:
                sys.argv = saved
    except _Captured as c:
        return c.parser
    except SystemExit:
        return None
    finally:
        argparse.ArgumentParser.parse_known_args = orig
    return None


def _parsers(parser: argparse.ArgumentParser, name: str):
    yield name, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub, p in a.choices.items():
                yield from _parsers(p, f"{name} {sub}")


def _commands() -> list[tuple[str, object, list[str]]]:
    """(command line, entry function, argv) of every command of the project."""
    out = []
    seen = set()
    entries = [(m, _entry) for m in _main_modules() if m not in INTERNAL]
    entries += [(s, None) for s in _console_scripts()]
    for name, how in entries:
        if how is None:
            mod_name, fn_name = name.split(":")
            fn = getattr(importlib.import_module(mod_name), fn_name)
        else:
            fn = how(name)
        if fn in seen:
            continue
        seen.add(fn)
        mod = importlib.import_module(fn.__module__)
        table = getattr(mod, "COMMANDS", None) or getattr(mod, "ACTIONS", None)
        if isinstance(table, dict):
            for sub in list(table) + list(getattr(mod, "HIDDEN", {})):
                out.append((f"{name} {sub}", fn, [sub, "--help"]))
        else:
            out.append((name, fn, ["--help"]))
        src = inspect.getsource(mod)
        if 'argv[:1] == ["--surface"]' in src:  # run_shard.py --surface: a surface job's shard (its job lines)
            out.append((f"{name} --surface", fn, ["--surface", "--help"]))
    return out


def _commands_leaving_the_environment() -> list[tuple[str, object, list[str]]]:
    """:func:`_commands`, with ``os.environ`` as it was: importing every command's module runs their imports,
    and a benchmark sets ``NUMBA_NUM_THREADS`` there (for its own process, before numba loads). Left in the test
    process, numba re-reads it at the next compile and refuses a thread count other than the one its threads
    started with: every later test that compiled a function of its own failed when the suite ran unactivated."""
    saved = dict(os.environ)
    try:
        return _commands()
    finally:
        os.environ.clear()
        os.environ.update(saved)


COMMANDS = _commands_leaving_the_environment()


def test_the_enumeration_finds_the_known_doors():
    names = " ".join(c for c, _, _ in COMMANDS)
    for expected in ("simulate", "harness.cli local", "run_shard", "executor.__main__ run",
                     "build_loader", "build_aligned", "executor.hostile", "codeflow.generate_rollouts",
                     "ProofFlow.convert_proofflow_pickle_to_dag_pool", "poolbuild.synthetic"):
        assert expected in names, expected
    sh = (ROOT / "run_experiment.sh").read_text(encoding="utf-8")
    assert "-m harness.cli" in sh  # the actions of run_experiment.sh are harness.cli.ACTIONS


@pytest.mark.parametrize("cmd,fn,argv", COMMANDS, ids=[c for c, _, _ in COMMANDS])
def test_every_path_option_is_declared_and_every_float_checked(cmd, fn, argv):
    parser = _capture(fn, argv)
    assert parser is not None, f"{cmd}: no argparse parser found (takes no options?)"
    bad = []
    for name, p in _parsers(parser, cmd):
        if not isinstance(p, ArgumentParser):
            bad.append(f"{name}: built with argparse.ArgumentParser, not simulator.base.cliargs.ArgumentParser")
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or a.nargs == 0:
                continue
            flag = a.option_strings[-1] if a.option_strings else a.dest
            if a.type is float:
                bad.append(f"{name} {flag}: type=float (use cliargs.number: NaN and inf refused)")
            if isinstance(a.type, (PathArg, NumberArg)) or a.choices is not None:
                continue
            if a.type not in (None, str, Path):
                continue
            if PATHLIKE.search(flag.lstrip("-")) and flag not in NOT_PATHS:
                bad.append(f"{name} {flag}: looks like a path but is declared neither input_path nor output_path")
    assert not bad, "\n".join(bad)


def test_every_path_variable_of_the_harness_is_declared():
    from harness import variables

    pathlike = re.compile(r"(_PATH|_FILE|_ROOT|_DIR|_OUT|_CONFIG)$")
    found = [v for v in variables.VARIABLES if isinstance(v.parse, variables.Path) or pathlike.search(v.name)]
    bad = [v.name for v in found if v.parse.role not in ("in", "out")]
    assert not bad, bad
    assert {"DAG_POOL_PATH", "RESULTS_ROOT", "PRICE_FILE"} <= {v.name for v in found}


def test_a_refusal_outside_cli_entry_is_the_same_one_line(tmp_path, capsys):
    """A command that parses before any ``cli_entry`` (a benchmark's ``main``): the parser prints the one line and
    exits 2 itself; under ``cli_entry`` the refusal is the entry's (``ConfigError``, the same line, exit 2)."""
    from simulator.base import cliargs
    from simulator.base.errors import cli_entry

    def parse(argv):
        ap = cliargs.ArgumentParser(prog="bench")
        ap.add_argument("--limit-ms", type=cliargs.number(0, lo_inclusive=False), default=100.0)
        ap.add_argument("--out", type=cliargs.output_path())
        return ap.parse_args(argv)

    for argv, words in ((["--limit-ms", "nan"], "--limit-ms (flag): expected a finite number > 0, got 'nan'"),
                        (["--out", str(tmp_path)], "is a directory, expected a file path")):
        with pytest.raises(SystemExit) as exc:
            parse(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("error:") and words in err[0], err
        assert cli_entry(lambda a=argv: parse(a) and 0)() == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err
