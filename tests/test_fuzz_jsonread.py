"""The one reader of untrusted JSON (issue 44), at every reader of the project that uses it.

A table first: each hostile document (nesting thousands deep, an integer of
400 digits, ``1e400``, a repeated key, a byte order mark, ``NaN``, a byte that
is not UTF-8) given to each reader (pool line, index file, ``PRICE_FILE`` /
``--price-file``, tasks file, ``executor summary``'s trace, ``comp.sample``'s
indices, ``LOADER_COLGEN_PARAMS_PATH``, the CodeFlow dataset) is refused in
one ``error:`` line, exit 2, naming what is wrong. Then hypothesis embeds
those fragments at random places of random valid documents: every reader
either accepts or refuses in one line, never a traceback.

``FUZZ_EXAMPLES=N`` (and ``FUZZ_SEED``) as in ``tests/test_fuzz_inputs.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from simulator.base.errors import cli_entry
from simulator.base.jsonread import JsonRefused, loads_strict

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "examples" / "example_pool.jsonl"
FUZZ_EXAMPLES = os.environ.get("FUZZ_EXAMPLES")

POOL_LINE = json.dumps({"problem_id": "z", "nodes": [{"node_id": 0, "parents": [], "children": [], "template": {
    "success_prob": 0.5, "lat_mean": 1, "lat_std": 1, "cost_mean": 5, "token_cost_mean": 5}}]})


def _readers() -> dict:
    """name -> (a valid document, a function reading a file and returning the exit code)."""
    from codeflow.comp.sample import read_indices
    from codeflow.dataset import read_json_list
    from executor.cli import main as executor_main
    from executor.tasks import load_tasks
    from simulator.baselines.further.variants import _read_colgen_file
    from simulator.cli.main import main as simulator_main
    from simulator.costs.charges import load_price_table
    from simulator.pools.pool import load_index_file

    def code(fn, *args):  # a reader under the commands' one rule for errors: 0 when it reads the file
        return lambda p: cli_entry(lambda: fn(p, *args) and 0)()

    return {
        "pool": (POOL_LINE, lambda p: simulator_main(["validate", "--pool", p])),
        "index file": ('{"dag_indices": [0, 1]}', code(load_index_file, 24)),
        "PRICE_FILE": ('{"m": 1.5}', code(load_price_table)),
        "tasks file": ('{"default": {"kind": "generic", "prompt": "say ok", "verify": {"regex": "ok"}}}',
                       code(load_tasks, [0], {0: []})),
        "trace": ('{"event": "run", "t": 0}', lambda p: executor_main(["summary", p])),
        "comp.sample indices": ("[0, 1]", code(read_indices, 5)),
        "LOADER_COLGEN_PARAMS_PATH": ("{}", code(_read_colgen_file, "LOADER_COLGEN_PARAMS_PATH")),
        "CodeFlow dataset": ("[]", code(read_json_list)),
    }


#: (name, bytes of a hostile document, words of the refusal)
HOSTILE = [
    ("deep", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ("huge int", b'{"a": ' + b"9" * 400 + b"}", "beyond 64 bits"),
    ("1e400", b'{"a": 1e400}', "beyond the float range"),
    ("duplicate key", b'{"a": 1, "a": 2}', "given twice"),
    ("BOM", b"\xef\xbb\xbf{}", "byte order mark"),
    ("NaN", b'{"a": NaN}', "NaN"),
    ("not UTF-8", b'{"a": "\xff"}', "not UTF-8"),
]


def _run(fn, path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = fn(str(path))
    return rc, err.getvalue()


def _one_line_or_success(rc, err):
    assert "Traceback" not in err, err
    if rc != 0:
        lines = err.strip().splitlines()
        assert rc in (1, 2) and len(lines) == 1 and lines[0].startswith("error:"), (rc, err)


@pytest.mark.parametrize("kind,raw,words", HOSTILE, ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("reader", list(_readers()))
def test_every_reader_refuses_each_hostile_document_in_one_line(tmp_path, reader, kind, raw, words):
    _, fn = _readers()[reader]
    if reader == "pool" and kind in ("huge int", "NaN"):
        pytest.skip("a pool line's numbers are checked by field, with the node named (test_pool_limits)")
    p = tmp_path / "doc.json"
    p.write_bytes(raw)
    rc, err = _run(fn, p)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:"), (rc, err)
    assert words in lines[0] and str(p) in lines[0], lines[0]


def test_every_reader_accepts_its_valid_document(tmp_path):
    for name, (doc, fn) in _readers().items():
        p = tmp_path / f"{name.replace(' ', '_')}.json"
        p.write_text(doc)
        rc, err = _run(fn, p)
        assert rc == 0, (name, err)


def test_pool_huge_integer_and_nan_are_refused_by_field(tmp_path):
    from simulator.cli.main import main

    for text, words in ((POOL_LINE.replace('"lat_mean": 1', '"lat_mean": ' + "9" * 400), "400 digits"),
                        (POOL_LINE.replace('"lat_mean": 1', '"lat_mean": NaN'), "is NaN")):
        p = tmp_path / "p.jsonl"
        p.write_text(text + "\n")
        rc, err = _run(lambda q: main(["validate", "--pool", q]), p)
        assert rc == 2 and words in err and "node 0" in err, err


def test_the_reader_itself():
    assert loads_strict('{"a": [1, 2.5, null, "x"]}') == {"a": [1, 2.5, None, "x"]}
    assert loads_strict("[NaN, Infinity]", allow_nonfinite=True)[1] == float("inf")
    assert loads_strict("18446744073709551615") == 2**64 - 1
    for bad in ("18446744073709551616", "[1e309]", '{"x": {"y": 1, "y": 1}}', "Infinity", "[" * 5000):
        with pytest.raises(JsonRefused):
            loads_strict(bad)


# ----------------------------------------------------------------------------- hypothesis

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_docs = st.recursive(_scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(st.text(max_size=5), kids, max_size=4)),
                     max_leaves=12)  # fmt: skip
_fragments = st.sampled_from(["[" * 3000 + "]" * 3000, "9" * 400, "-" + "9" * 30, "1e400", "-1e999", "NaN",
                              "Infinity", '{"k": 1, "k": 2}', '"\\ud800"', "1.0e-400", "[[[[]]]]"])  # fmt: skip


@st.composite
def _hostile_texts(draw) -> bytes:
    doc = json.dumps(draw(_docs))
    frag = draw(_fragments)
    # put the fragment where a value may stand: after a '[' or a ':' of the document, or as the document
    spots = [i + 1 for i, ch in enumerate(doc) if ch in "[:"]
    if spots and draw(st.booleans()):
        i = draw(st.sampled_from(spots))
        text = doc[:i] + frag + ("," if doc[i] not in "]}" else "") + doc[i:]
    else:
        text = frag
    raw = text.encode("utf-8", errors="surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        raw = b"\xef\xbb\xbf" + raw
    return raw


_SETTINGS = settings(max_examples=int(FUZZ_EXAMPLES) if FUZZ_EXAMPLES else 40, deadline=None,
                     derandomize=FUZZ_EXAMPLES is None, database=None, suppress_health_check=list(HealthCheck))


def _seeded(fn):
    return seed(int(os.environ["FUZZ_SEED"]))(fn) if "FUZZ_SEED" in os.environ else fn


@_seeded
@_SETTINGS
@given(raw=_hostile_texts(), reader=st.sampled_from(sorted(_readers())))
def test_fuzz_every_reader_accepts_or_refuses_in_one_line(raw, reader):
    import tempfile

    _, fn = _readers()[reader]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "doc.json"
        p.write_bytes(raw)
        rc, err = _run(fn, p)
    _one_line_or_success(rc, err)
