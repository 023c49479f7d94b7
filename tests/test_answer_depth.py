"""An answer's nesting is measured without recursion, and a deep one is refused before any parser sees it.

Python's JSON parser recurses: the hostile world's 30,000-deep array ran it
to the recursion limit, where whatever else was called meanwhile failed too
(in CI an unraisable RecursionError that pytest's own hook could not
format). ``simulator.base.jsonread.nesting_depth`` (used by the live
executor's client and the rollout generator's) is checked against the depth
of random JSON values, strings full of brackets and escapes included.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from executor import client
from executor.client import error_message, parse_json
from simulator.base.jsonread import MAX_ANSWER_DEPTH, nesting_depth

_text = st.text(alphabet=st.sampled_from('ab"\\[]{}\n\u00e9'), max_size=8)
_values = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                       max_leaves=30)


def _depth(v) -> int:
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(_values, st.booleans())
def test_the_depth_of_random_json_with_brackets_and_escapes_in_its_strings(v, ascii_only):
    assert nesting_depth(json.dumps(v, ensure_ascii=ascii_only)) == _depth(v)


@pytest.mark.parametrize("text, depth", [
    ("{}", 1), ("[[], {}]", 2), ('{"a": "[[[["}', 1), ('["\\"]]]", [1]]', 2), ('"{{{"', 0), ("42", 0)])
def test_by_hand(text, depth):
    assert nesting_depth(text) == depth


def test_a_deep_answer_is_refused_before_any_parser_sees_it(monkeypatch):
    def no_parse(*a, **k):
        raise AssertionError("a parser saw the deep answer")

    monkeypatch.setattr(client.json, "loads", no_parse)
    deep = "[" * 30000 + "]" * 30000
    with pytest.raises(ValueError, match=f"deeper than {MAX_ANSWER_DEPTH}"):
        parse_json(deep)
    said = error_message(deep.encode())  # the server's words: the text itself, one line, with no parse
    assert isinstance(said, str) and "\n" not in said


def test_an_answer_at_the_limit_is_parsed():
    ok = "[" * MAX_ANSWER_DEPTH + "]" * MAX_ANSWER_DEPTH
    data, dup = parse_json(ok)
    assert _depth(data) == MAX_ANSWER_DEPTH and not dup
