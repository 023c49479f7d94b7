"""The surface's copy of ``run_pair`` inlines the per-pair steps named in ``PER_PAIR_STEPS``, by name.

``simulator.mcpp.kernel.with_steps_inlined`` rebinds those names in the copy's globals; a step renamed
without its entry would silently stay a call (slower, never wrong). Checked here: every listed name is a
compiled function of the kernel, and each is reached from ``run_pair`` through the listed steps.
"""

from __future__ import annotations

import simulator.mcpp.kernel as kernel
from simulator.mcpp.kernel import run_pair


def _reached(fn, names):
    """The names in ``names`` that ``fn`` calls, directly or through other names in ``names``."""
    seen, todo = set(), [fn]
    while todo:
        code = todo.pop().__code__
        for name in code.co_names:
            if name in names and name not in seen:
                seen.add(name)
                todo.append(getattr(kernel, name).py_func)
    return seen


def test_every_listed_step_is_a_compiled_function_of_the_kernel():
    for name in kernel.PER_PAIR_STEPS:
        assert hasattr(getattr(kernel, name, None), "py_func"), name


def test_every_listed_step_is_reached_from_run_pair():
    steps = set(kernel.PER_PAIR_STEPS)
    assert _reached(run_pair.py_func, steps) == steps


def test_the_surface_copy_binds_every_reached_step_to_an_inlined_copy():
    bound = kernel.run_pair_surface.py_func.__globals__
    called = set(run_pair.py_func.__code__.co_names)  # the steps run_pair calls itself (they, theirs)
    for name in set(kernel.PER_PAIR_STEPS) & called:
        assert bound[name] is not getattr(kernel, name), name
        assert bound[name].targetoptions.get("inline") == "always", name
