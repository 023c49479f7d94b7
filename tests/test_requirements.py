"""Two installs: requirements.txt is what the product code imports, requirements-test.txt adds the tests'.

Why: README command 1 installs requirements.txt only, and ``pip install -e .``
installs ``pyproject.toml``'s dependencies only; a third-party import of the
product code declared in neither breaks a command on a fresh machine
(``regex`` once did: ``python -m executor --help`` failed after
``pip install -e .``). The imports are read from the source (``ast``), so a new
one is caught the day it is written.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from harness_util import ROOT

ROOT_P = Path(ROOT)
#: the product's packages (pyproject's package list) and the top-level scripts beside them
PRODUCT = ("simulator", "harness", "poolbuild", "codeflow", "ProofFlow", "executor")
LOCAL = (set(PRODUCT) | {"tests", "benchmarks"} | {p.stem for p in ROOT_P.glob("*.py")}
         | {p.stem for p in (ROOT_P / "tests").glob("*.py")})  # the tests import each other by module name
#: packages the product needs without importing them by name, and why
INDIRECT = {
    "pyarrow": "pandas' Parquet engine (the results tables)",
    "llvmlite": "numba's compiler, pinned to the numba release",
    "h11": "httpx's HTTP/1.1 parser, which the executor's hostile-server tools also import",
}
#: import name -> distribution name, where they differ
DIST = {"yaml": "pyyaml", "jwt": "pyjwt", "multipart": "python-multipart", "PIL": "pillow",
        "apscheduler": "apscheduler", "expression": "expression", "fastapi_sso": "fastapi-sso"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _guarded(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside ``try: ... except (ImportError|Exception|BaseException)``:
    optional libraries (e.g. codeflow's sandbox offers gmpy2 to a reference solution if present)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            caught = {ast.unparse(h.type) if h.type else "BaseException" for h in node.handlers}
            if caught & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
                for stmt in node.body:
                    for sub in ast.walk(stmt):
                        if isinstance(sub, (ast.Import, ast.ImportFrom)):
                            lines.add(sub.lineno)
    return lines


def third_party_imports(files) -> dict[str, str]:
    """{distribution name: first file importing it} over ``files``, optional imports left out."""
    found: dict[str, str] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = _guarded(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            if node.lineno in guarded:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if top in sys.stdlib_module_names or top in LOCAL:
                    continue
                found.setdefault(_norm(DIST.get(top, top)), str(path.relative_to(ROOT_P)))
    return found


def _product_files():
    for pkg in PRODUCT:
        yield from (ROOT_P / pkg).rglob("*.py")
    yield from ROOT_P.glob("*.py")


def pinned(path: Path) -> set[str]:
    """The package names a requirements file pins, following ``-r`` includes."""
    names: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            names |= pinned(path.parent / line[3:].strip())
            continue
        m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==\S+$", line)
        assert m, f"{path.name}: {line!r} is not an exact pin (name==version)"
        names.add(_norm(m.group(1)))
    return names


def _pyproject_deps() -> set[str]:
    with open(ROOT_P / "pyproject.toml", "rb") as fh:
        deps = tomllib.load(fh)["project"]["dependencies"]
    return {_norm(re.match(r"^[A-Za-z0-9_.\-]+", d).group(0)) for d in deps}


def test_every_import_of_the_product_is_in_requirements_and_pyproject():
    imports = third_party_imports(_product_files())
    assert imports, "no third-party import found: the scan is broken"
    runtime, pyproject = pinned(ROOT_P / "requirements.txt"), _pyproject_deps()
    missing = {d: f for d, f in imports.items() if d not in runtime}
    assert not missing, f"imported by the product code but not in requirements.txt: {missing}"
    missing = {d: f for d, f in imports.items() if d not in pyproject}
    assert not missing, f"imported by the product code but not in pyproject.toml's dependencies: {missing}"


def test_the_runtime_install_holds_only_what_the_product_needs():
    imports = set(third_party_imports(_product_files()))
    runtime, pyproject = pinned(ROOT_P / "requirements.txt"), _pyproject_deps()
    extra = runtime - imports - set(INDIRECT)
    assert not extra, f"requirements.txt pins packages the product code does not need (test software?): {extra}"
    assert runtime == pyproject, (
        f"requirements.txt and pyproject.toml's dependencies differ: only in requirements.txt {runtime - pyproject}, "
        f"only in pyproject.toml {pyproject - runtime}"
    )


def test_the_test_install_holds_the_tests_imports():
    from gateway_helpers import PROXY_MODULES

    tests = third_party_imports((ROOT_P / "tests").rglob("*.py"))
    everything = pinned(ROOT_P / "requirements-test.txt")
    assert pinned(ROOT_P / "requirements.txt") <= everything, "requirements-test.txt must start with -r requirements.txt"
    # pillow comes with matplotlib (a dependency of it, not pinned here)
    missing = {d: f for d, f in tests.items() if d not in everything and d != "pillow"}
    assert not missing, f"imported by the tests but not in requirements-test.txt: {missing}"
    proxy = {_norm(DIST.get(m, m)) for m in PROXY_MODULES}
    assert proxy <= everything, f"the LiteLLM proxy's imports not pinned: {proxy - everything}"


def test_the_docs_install_the_right_file():
    readme = (ROOT_P / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    assert "pip install -r requirements.txt &&" in blocks[0] and "requirements-test" not in blocks[0]
    assert "pip install -r requirements-test.txt" in blocks[1] and "pytest" in blocks[1]
    assert "pip install -q -r requirements-test.txt" in (ROOT_P / ".ci" / "run").read_text(encoding="utf-8")


def test_the_scan_finds_an_undeclared_import(tmp_path):
    """The adversarial case: a product file importing a package nobody declared is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("import regex\nimport someundeclaredlib.sub\ntry:\n    import gmpy2\nexcept ImportError:\n    pass\n")
    global ROOT_P
    saved, ROOT_P = ROOT_P, tmp_path
    try:
        found = third_party_imports([bad])
    finally:
        ROOT_P = saved
    assert set(found) == {"regex", "someundeclaredlib"}
