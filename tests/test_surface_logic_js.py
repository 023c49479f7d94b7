"""The surface page's pure functions (``harness/surface/page/logic.js``) under node's built-in test runner.

The JavaScript tests are ``tests/js/surface_logic.test.js`` (``node --test tests/js/`` runs them alone);
this file runs them as part of the suite. Without ``node`` on PATH they skip, saying so; the page as a
whole is still tested in Chromium by ``tests/test_surface_page.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.surface.page import ASSETS, ASSETS_DIR

JS_TESTS = Path(__file__).resolve().parent / "js" / "surface_logic.test.js"


def test_logic_module_passes_its_node_tests():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's logic is tested only in Chromium (test_surface_page.py)")
    r = subprocess.run([node, "--test", str(JS_TESTS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    passed = re.search(r"^# pass (\d+)$", r.stdout, re.M)
    failed = re.search(r"^# fail (\d+)$", r.stdout, re.M)
    assert passed and failed and int(passed.group(1)) >= 9 and int(failed.group(1)) == 0, r.stdout[-2000:]


def test_the_page_loads_the_logic_before_the_app_and_ships_it():
    html = (ASSETS_DIR / "index.html").read_text(encoding="utf-8")
    assert html.index('src="logic.js"') < html.index('src="app.js"')
    assert "logic.js" in ASSETS
    app = (ASSETS_DIR / "app.js").read_text(encoding="utf-8")
    # the pure functions live in logic.js only: app.js does not define them again
    for name in ("contour", "chain", "diffRange", "ramp", "tickIndices", "fitLabels"):
        assert not re.search(rf"function {name}\(", app), name
