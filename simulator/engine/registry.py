"""What a method is: one :class:`MethodSpec` per method, and variants of a method written ``name[...]``.

Every method the simulator runs (the twelve compiled baselines, MCPP, the
further baselines, a policy a user adds) is one entry. An entry says how the
method runs, so no caller has to know it by name:

* ``kind``: ``compiled_baseline`` (a decision rule compiled into the episode
  loop of :mod:`simulator.baselines.compiled`; ``rule(arr)`` gives its compiled form)
  or ``python_policy`` (``factory(params, planning)`` returns a
  :class:`~simulator.engine.episode.Policy`, driven by
  :func:`~simulator.engine.episode.run_policy_episode`);
* ``launch``: ``per_attempt`` (each attempt is charged as it starts; an
  attempt the budget cannot pay is refused, the rest of the batch goes on) or
  ``atomic`` (a whole batch is drawn at once; any over-budget or over-deadline
  draw ends the episode): see ``docs/semantics.md``;
* ``deadline``: ``scored`` (simulated once per budget with no deadline, then
  scored at each deadline of the grid, as the baselines are) or ``hard`` (one
  simulation per deadline, which the episode cannot pass);
* ``baseline``: whether the analysis compares the other methods with it;
* ``settings_key``: the field of :class:`~simulator.simulate.RunSettings`
  holding the run's parameters for this method (``mcpp``, ``further``), and
  ``params``: the fixed parameters of this entry (a variant's), applied on top.

A *variant* of a registered method is written ``name[token,key=value,...]``
(``mc_portfolio_rollout[crn]``, ``mc_portfolio_rollout[evaluation=halving,M=32]``)
and runs as a method of its own beside the others: its parameters are the
base method's with the given ones on top. A bare token is looked up in the
base entry's ``variant_words`` (``crn`` -> ``evaluation=crn``). The module
that holds the table of methods is :mod:`simulator.methods`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from simulator.base.errors import ConfigError
from simulator.base.validation import did_you_mean

KINDS = (COMPILED_BASELINE, PYTHON_POLICY) = ("compiled_baseline", "python_policy")
LAUNCH_RULES = (PER_ATTEMPT, ATOMIC) = ("per_attempt", "atomic")
#: the two launch rules under the ``live`` execution rules (simulator.engine.live_rules)
LIVE_LAUNCH_RULES = (LIVE_PER_ATTEMPT, LIVE_ATOMIC) = ("live_per_attempt", "live_atomic")
DEADLINE_RULES = (SCORED, HARD) = ("scored", "hard")

#: execution-rule modes of a run (setting EXECUTION_RULES, flag --execution-rules; docs/semantics.md)
PUBLISHED, LIVE = "published", "live"
EXECUTION_RULES = (PUBLISHED, ATOMIC, PER_ATTEMPT, LIVE)

_VARIANT = re.compile(r"^([A-Za-z0-9_]+)\[(.*)\]$")


@dataclass(frozen=True)
class MethodSpec:
    """One method: how it runs, its parameters, its label and the method sets it belongs to."""

    name: str
    kind: str
    launch: str
    deadline: str
    baseline: bool
    family: str = ""
    label: str = ""  # label in tables and plots (default: the name)
    #: other names a user may give for it, matched ignoring case (``MCPP`` for ``mc_portfolio_rollout``);
    #: records keep ``name``
    aliases: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()  # method sets (besides its own name) that include it
    rule: Callable[..., Any] | None = None  # compiled baselines: rule(arr) -> baselines.BaselineRule
    factory: Callable[..., Any] | None = None  # Python policies: factory(params, planning) -> Policy
    settings_key: str | None = None  # RunSettings field with the run's parameters for it
    params: Mapping[str, Any] = field(default_factory=dict)  # fixed parameters of this entry
    variant_words: Mapping[str, tuple[str, Any]] = field(default_factory=dict)  # bare variant tokens
    check_params: Callable[[Mapping[str, Any], str], Any] | None = None  # refuses bad parameters
    #: refuses a DAG this method cannot run on, before any work: check_dag(run params, DagStats, DagArrays)
    check_dag: Callable[[Mapping[str, Any], Any, Any], None] | None = None
    launch_param: str | None = None  # parameter telling the policy the launch rule it runs under (planners)
    base: str | None = None  # the registered method a variant derives from
    description: str = ""
    #: its name on the surface page, followed by a variant's brackets (``MCPP`` -> ``MCPP[crn]``); empty: the description
    display_label: str = ""

    def __post_init__(self) -> None:
        for value, allowed, what in (
            (self.kind, KINDS, "kind"),
            (self.launch, LAUNCH_RULES, "launch"),
            (self.deadline, DEADLINE_RULES, "deadline"),
        ):
            if value not in allowed:
                raise ValueError(f"method {self.name!r}: {what} {value!r} is not one of {', '.join(allowed)}")
        if (self.kind == COMPILED_BASELINE) != (self.rule is not None):
            raise ValueError(f"method {self.name!r}: a compiled baseline has a rule, a Python policy does not")
        if (self.kind == PYTHON_POLICY) != (self.factory is not None):
            raise ValueError(f"method {self.name!r}: a Python policy has a factory")

    @property
    def compiled(self) -> bool:
        return self.kind == COMPILED_BASELINE

    @property
    def table_label(self) -> str:
        return self.label or self.name

    @property
    def base_name(self) -> str:
        return self.base or self.name

    @property
    def display_name(self) -> str:
        """The name the surface page shows: ``display_label`` with the variant's part, else the description."""
        if self.display_label:
            return self.display_label + self.name[len(self.base_name):]
        return self.description or self.name

    def run_params(self, settings_params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The parameters this method runs with: the run's (``settings_key``) with the entry's on top."""
        return {**dict(settings_params or {}), **dict(self.params)}

    def refuse_dag(self, settings_params: Mapping[str, Any] | None, stats: Any, arr: Any, where: str) -> None:
        """The method's own refusal of a DAG (``check_dag``), before any work, its message prefixed by ``where``."""
        if self.check_dag is None:
            return
        try:
            self.check_dag(self.run_params(settings_params), stats, arr)
        except ConfigError as exc:
            raise ConfigError(f"{where}{exc}") from None


class Execution(NamedTuple):
    """How a method runs under a run's execution-rule mode."""

    launch: str
    deadline: str
    compiled: bool  # in the compiled baselines' loop (else the Python-policy driver)


def execution_of(spec: MethodSpec, mode: str = PUBLISHED) -> Execution:
    """The launch rule, deadline treatment and runner of ``spec`` under ``mode``.

    * ``published``: the method's own rules (the registry entry).
    * ``atomic``: every method launches atomically with the hard deadline; a
      compiled baseline runs as a Python policy with the same decisions
      (:class:`simulator.baselines.compiled.AtomicBaseline`), so Seq-(m, k) is exactly
      MCPP's portfolio member.
    * ``per_attempt``: every method launches per attempt. A method that
      ignores time keeps being scored per deadline (its decisions never
      depend on D, so its on-time successes are those of a hard-deadline
      run); the others run with the hard deadline, and MCPP's planner
      simulates under the per-attempt rule too.
    * ``live``: what a live run can know (:mod:`simulator.engine.live_rules`):
      each method keeps its launch (atomic for the planners, per attempt for
      the baselines) under the live rules, with the hard deadline (a live
      run cancels what runs at D), as a Python policy; a planner simulates
      under the live rules too.
    """
    if mode == PUBLISHED:
        return Execution(spec.launch, spec.deadline, spec.compiled)
    if mode == ATOMIC:
        return Execution(ATOMIC, HARD, False)
    if mode == PER_ATTEMPT:
        return Execution(PER_ATTEMPT, spec.deadline, spec.compiled)
    if mode == LIVE:
        return Execution(LIVE_PER_ATTEMPT if spec.launch == PER_ATTEMPT else LIVE_ATOMIC, HARD, False)
    raise ConfigError(f"execution rules {mode!r}: choose one of {', '.join(EXECUTION_RULES)}")


class Registry:
    """Registered methods in registration order, and the method sets they form."""

    def __init__(self) -> None:
        self._specs: dict[str, MethodSpec] = {}
        self._variants: dict[str, MethodSpec] = {}  # parsed (and checked) once: entries are immutable
        self._aliases: dict[str, str] = {}  # lower-case alias -> registered name

    def register(self, spec: MethodSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"method {spec.name!r} is registered twice")
        for alias in spec.aliases:
            if alias.lower() in self._aliases or alias in self._specs:
                raise ValueError(f"method {spec.name!r}: alias {alias!r} is taken")
            self._aliases[alias.lower()] = spec.name
        self._specs[spec.name] = spec

    def aliases(self) -> dict[str, str]:
        """Each alias as written in its entry -> the registered name it stands for."""
        return {a: s.name for s in self._specs.values() for a in s.aliases}

    def canonical(self, name: str) -> str:
        """``name`` with an alias (any case) replaced by the registered name: ``mcpp[crn]`` -> ``mc_portfolio_rollout[crn]``.

        Records, tables and shard files use the registered name, so a run given
        ``MCPP`` stays comparable with one given ``mc_portfolio_rollout``.
        """
        name = name.strip()
        m = _VARIANT.match(name)
        base = m.group(1) if m else name
        if base not in self._specs and base.lower() in self._aliases:
            return self._aliases[base.lower()] + name[len(base):]
        return name

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def sets(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for spec in self._specs.values():
            for s in spec.sets:
                out.setdefault(s, []).append(spec.name)
        return {k: tuple(v) for k, v in out.items()}

    def get(self, name: str, source: str | None = None, sets: bool = False) -> MethodSpec:
        """The entry of ``name``, a registered method (or an alias of one) or a variant ``base[...]`` of one.

        ``sets``: whether the caller also accepts method sets (a list such as
        ``METHOD_SET``); it only changes what an unknown name is offered
        instead, since a hint must be something the flag accepts.
        """
        name = self.canonical(name)
        if name in self._specs:
            return self._specs[name]
        if name in self._variants:
            return self._variants[name]
        m = _VARIANT.match(name)
        if m is None:
            raise ConfigError(_prefix(source) + self._unknown(name, sets))
        base = self.get(m.group(1), source)
        spec = variant_of(base, m.group(2), name, source)
        self._variants[name] = spec
        return spec


    def _unknown(self, name: str, sets: bool) -> str:
        """The message for an unknown ``name``: at most three suggestions among what the caller accepts."""
        all_sets = self.sets()
        if not sets and name in all_sets:
            members = all_sets[name]
            shown = ", ".join(members[:4]) + (", ..." if len(members) > 4 else "")
            return (f"{name!r} is a method set ({shown}), and this takes one method; "
                    "`python -m simulator methods` lists them")  # fmt: skip
        choices = [*self._specs, *self.aliases(), *(all_sets if sets else ())]
        what = "methods and method sets" if sets else "methods"
        return (f"unknown method(s) {name!r}{did_you_mean(name, choices)}; `python -m simulator methods` lists the "
                f"{what}; a variant of a method is written NAME[key=value,...]")  # fmt: skip


def _prefix(source: str | None) -> str:
    return f"{source}: " if source else ""


def variant_of(base: MethodSpec, body: str, name: str, source: str | None = None) -> MethodSpec:
    """The entry of ``base[body]``: the base's parameters with the variant's on top (checked)."""
    if base.base is not None:
        raise ConfigError(_prefix(source) + f"{name!r}: a variant of a variant; write one NAME[...] with every parameter")
    if base.compiled:
        raise ConfigError(_prefix(source) + f"{name!r}: {base.name} is a compiled baseline and has no parameters")
    params: dict[str, Any] = dict(base.params)
    seen: set[str] = set()
    items = [s.strip() for s in body.split(",") if s.strip()]
    if not items:
        raise ConfigError(_prefix(source) + f"{name!r}: nothing between the brackets")
    for item in items:
        if "=" in item:
            key, value = (s.strip() for s in item.split("=", 1))
            if not key or not value:
                raise ConfigError(_prefix(source) + f"{name!r}: {item!r} is not key=value")
        elif item in base.variant_words:
            key, value = base.variant_words[item]
        else:
            words = ", ".join(base.variant_words) or "none"
            raise ConfigError(
                _prefix(source) + f"{name!r}: unknown variant word {item!r}"
                + did_you_mean(item, list(base.variant_words))
                + f"; words of {base.name}: {words}; or write key=value"
            )
        if key in seen:
            raise ConfigError(_prefix(source) + f"{name!r}: {key} given twice")
        seen.add(key)
        params[key] = value
    if base.check_params is not None:
        base.check_params(params, _prefix(source) + repr(name))
    return replace(base, name=name, label="", sets=(), params=params, base=base.name)


def split_method_list(text: str) -> list[str]:
    """``"a,b[x=1,y=2], c"`` -> ``["a", "b[x=1,y=2]", "c"]``: commas inside brackets stay."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]
