"""The harness's environment variables: ONE table (name, default, parser, help).

Everything that knows a harness variable reads it from :data:`VARIABLES`:
``prepare`` (values and the "Resolved settings" it prints), the other actions
(worker, status and SLURM settings), ``bash run_experiment.sh help`` and the
settings table of ``docs/harness.md`` (a test checks that the docs hold exactly
:func:`markdown_table`). A default is written once, here, as the text a user
would type; the typed default is that text run through the variable's parser,
so the shown and the used default cannot disagree.

Each action parses every variable it reads, and refuses unknown names under
the harness's prefixes (:data:`CHECKED_PREFIXES`, e.g. ``MC_PORTFOLIO_MM``
with "did you mean 'MC_PORTFOLIO_M'?"), **before any work**
(:func:`check_environment`). Checks use :mod:`simulator.base.validation`, so a
message names the variable, what was expected and what was given.

This module imports nothing heavy (no numpy/numba): ``help`` works, and says
how to install the requirements, in an interpreter without them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.settings import MAX_SEED, MAX_TRIALS
from simulator.base.validation import (
    check_choice,
    check_int,
    check_number,
    check_unknown_names,
    closest,
    where,
)
from simulator.mcpp.params import ENV_VARS as MCPP_ENV_VARS
from simulator.mcpp.params import MCPPParams

from .grid_syntax import parse_map, parse_value_list

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_POOL = os.path.join(REPO, "examples", "example_pool.jsonl")
DEFAULT_RESULTS_ROOT = os.path.join(REPO, "results", "runs")
SOURCE = "environment"

#: MCPP parameters whose harness default differs from the policy's own (docs/policies.md).
HARNESS_MCPP_DEFAULTS: dict[str, Any] = {"max_candidate_actions": 2048}

# ----------------------------------------------------------------------------- parsers


class Parser:
    """Text of one variable -> typed value; ``expects`` says what is accepted (help, docs); ``role``: for a
    path, ``"in"`` (read) or ``"out"`` (written), declared so that no path variable goes unchecked."""

    expects = "text"
    role: str | None = None

    def __call__(self, text: str, name: str) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


class Text(Parser):
    expects = "text"

    def __call__(self, text: str, name: str) -> str:
        return text


class Word(Parser):
    """One word (no spaces): names handed to another program (SLURM partition, account)."""

    expects = "a word (no spaces)"

    def __call__(self, text: str, name: str) -> str:
        if re.search(r"\s", text):
            raise ConfigError(f"{where(name, SOURCE)}: expected {self.expects}, got {text!r}")
        return text


class Integer(Parser):
    """An integer ``>= lo``; ``words`` map special spellings (``all``, ``auto``) to a value."""

    def __init__(self, lo: int | None = None, words: Mapping[str, Any] | None = None, hi: int | None = None) -> None:
        self.lo, self.hi = lo, hi
        self.words = dict(words or {})
        self.expects = "integer" + (f" >= {lo}" if lo is not None else "") + (f" and <= {hi}" if hi is not None else "")
        if self.words:
            self.expects += " or " + " / ".join(f"`{w}`" for w in self.words)

    def __call__(self, text: str, name: str) -> Any:
        if text.lower() in self.words:
            return self.words[text.lower()]
        return check_int(text, name, SOURCE, lo=self.lo, hi=self.hi)


class Number(Parser):
    """A finite number, bounded below."""

    def __init__(self, lo: float, lo_inclusive: bool = True) -> None:
        self.lo, self.lo_inclusive = lo, lo_inclusive
        self.expects = f"number {'>=' if lo_inclusive else '>'} {lo:g}"

    def __call__(self, text: str, name: str) -> float:
        return check_number(text, name, SOURCE, lo=self.lo, lo_inclusive=self.lo_inclusive)


class Choice(Parser):
    def __init__(self, choices: Iterable[str]) -> None:
        self.choices = tuple(choices)
        self.expects = " / ".join(f"`{c}`" for c in self.choices)

    def __call__(self, text: str, name: str) -> str:
        return check_choice(text, name, self.choices, SOURCE)


class Pattern(Parser):
    """Text matching a regular expression (SLURM's memory and time formats)."""

    def __init__(self, regex: str, expects: str) -> None:
        self.regex = re.compile(regex, re.IGNORECASE)
        self.expects = expects

    def __call__(self, text: str, name: str) -> str:
        if not self.regex.fullmatch(text):
            raise ConfigError(f"{where(name, SOURCE)}: expected {self.expects}, got {text!r}")
        return text


class Path(Parser):
    """A path, made absolute against the current directory (stored absolute in the run); ``role`` ``"in"``
    (a file the run reads) or ``"out"`` (a folder it writes)."""

    expects = "path"

    def __init__(self, role: str) -> None:
        self.role = role

    def __call__(self, text: str, name: str) -> str:
        return os.path.abspath(os.path.expanduser(text))


class PlainName(Parser):
    expects = "a plain name (no `/`, at most 255 bytes: one file name)"

    def __call__(self, text: str, name: str) -> str:
        if "/" in text or "\0" in text or text in ("", ".", "..") or len(os.fsencode(text)) > 255:
            shown = text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"
            raise ConfigError(f"{where(name, SOURCE)}: expected {self.expects}, got {shown!r}")
        return text


class Executable(Parser):
    """A command on PATH, kept as given, or a path, made absolute: job lines run in other directories (a
    relative ``PYTHON=.venv/bin/python`` would name nothing in a shard's working directory)."""

    expects = "an executable (path or command on PATH)"

    def __call__(self, text: str, name: str) -> str:
        if shutil.which(text) is None:
            raise ConfigError(f"{where(name, SOURCE)}: expected {self.expects}, got {text!r} (not found)")
        return os.path.abspath(text) if os.sep in text else text


class ShellWords(Parser):
    expects = "shell words (quoted as in a shell)"

    def __call__(self, text: str, name: str) -> list[str]:
        try:
            return shlex.split(text)
        except ValueError as exc:
            raise ConfigError(f"{where(name, SOURCE)}: expected {self.expects}, got {text!r} ({exc})") from None


class Formats(Parser):
    """Figure formats: ``png`` always (the report shows it), then any of ``pdf`` / ``svg`` asked for."""

    choices = ("png", "pdf", "svg")
    expects = "comma list of `png`, `pdf`, `svg` (PNG is always written)"

    def __call__(self, text: str, name: str) -> tuple[str, ...]:
        out = ["png"]
        for tok in text.replace(",", " ").split():
            out.append(check_choice(tok.lower(), name, self.choices, SOURCE))
        return tuple(dict.fromkeys(out))


class Values(Parser):
    """A grid axis: numbers separated by spaces or commas (``harness.grid.parse_value_list``)."""

    def __init__(self, allow_inf: bool = False) -> None:
        self.allow_inf = allow_inf
        self.expects = "numbers > 0" + (" or `inf`" if allow_inf else "") + ", space or comma separated"

    def __call__(self, text: str, name: str) -> list[float]:
        return parse_value_list(text, name, allow_inf=self.allow_inf, source=SOURCE)


class GridMap(Parser):
    expects = "`B:D,D;B:D` (`|` also separates deadlines; `inf` allowed)"

    def __call__(self, text: str, name: str) -> list[tuple[float, list[float]]]:
        return parse_map(text, source=SOURCE)


class Lazy(Parser):
    """A parser living in a module that needs the compiled stack (imported only when a value is parsed)."""

    def __init__(self, target: str, expects: str) -> None:
        self.target, self.expects = target, expects

    def __call__(self, text: str, name: str) -> Any:
        module, func = self.target.split(":")
        try:
            return getattr(importlib.import_module(module), func)(text)
        except ConfigError as exc:
            raise ConfigError(f"{where(name, SOURCE)}: {exc}") from None


class LazyChoice(Parser):
    """A choice whose list lives in a heavy module (e.g. ``simulator.costs.arrays.LATENCY_DISTS``)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def choices(self) -> tuple[str, ...]:
        module, attr = self.target.split(":")
        return tuple(getattr(importlib.import_module(module), attr))

    @property
    def expects(self) -> str:  # type: ignore[override]
        return " / ".join(f"`{c}`" for c in self.choices())

    def __call__(self, text: str, name: str) -> str:
        return check_choice(text, name, self.choices(), SOURCE)


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Var:
    """One harness variable.

    ``default`` is the text shown in ``help`` and the docs; when ``default_value``
    is None it is also what the parser turns into the typed default, else
    ``default`` only describes ``default_value()`` (a path in the repository, the
    running interpreter). ``group`` says which actions read it (:data:`ACTION_GROUPS`).
    """

    name: str
    default: str
    parse: Parser
    help: str
    group: str
    default_value: Callable[[], Any] | None = None

    def expects(self) -> str:
        return self.parse.expects

    def value(self, env: Mapping[str, str]) -> Any:
        text = (env.get(self.name) or "").strip()
        if text:
            return self.parse(text, self.name)
        if self.default_value is not None:
            return self.default_value()
        if self.default:
            return self.parse(self.default, self.name)
        return None


_POS = Integer(lo=1)
_SIGMA = Number(0.0)

_MCPP_HELP = {
    "model_ids": "MCPP portfolio models (comma list of names)",
    "base_ks": "MCPP sample counts k of the portfolio (comma list)",
    "M": "MCPP simulations per (candidate, member) pair",
    "random_free_n": "MCPP free nodes of the random branch",
    "max_exact_actions": "MCPP full-product cap",
    "max_candidate_actions": "MCPP candidate cap (the policy's own default is 260)",
    "max_rollout_steps": "MCPP events per simulation",
    "delta": "MCPP Hoeffding delta (reporting only)",
    "candidate_generator": "MCPP option: candidate generator",
    "evaluation": "MCPP option: candidate evaluation",
    "halving_eta": "MCPP halving: keep 1/eta per round",
    "halving_rounds": "MCPP halving: rounds",
    "time_limit_ms": "MCPP anytime planner: wall-time limit per decision in ms (off = the faithful planner)",
    "sim_limit": "MCPP anytime planner, deterministic: at most N simulations per decision (off = the faithful planner)",
    "reuse": "MCPP option: `state` keys decisions by the planner state and reuses them when a state repeats",
}


def _mcpp_default(param: str) -> str:
    if param in HARNESS_MCPP_DEFAULTS:
        return str(HARNESS_MCPP_DEFAULTS[param])
    value = {f.name: f.default for f in dataclasses.fields(MCPPParams)}[param]
    if param == "model_ids":
        return "every model of the DAG"
    if param == "max_exact_actions":
        return "len(base_ks) ** random_free_n"
    if value is None:
        return "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


class MCPPText(Text):
    """Kept as text here: :func:`simulator.mcpp.params.resolve_params` checks the MCPP values together, with
    one rule for these variables, the ``--mc-portfolio-*`` flags and the Python API."""

    def __init__(self, flag: str) -> None:
        self.expects = f"as the flag `{flag}`"


def _mcpp_vars() -> list[Var]:
    return [
        Var(var, _mcpp_default(param), MCPPText("--" + var.lower().replace("_", "-")),
            _MCPP_HELP.get(param, f"MCPP parameter {param}"), "mcpp", default_value=lambda: None)  # fmt: skip
        for var, param in MCPP_ENV_VARS.items()
    ]


class FurtherText(Text):
    """Kept as text here: :func:`simulator.baselines.further.variants.resolve_further_params` checks these values
    together, with one rule for the harness, the command line (which reads the same variables) and the API."""

    def __init__(self, expects: str, role: str | None = None) -> None:
        self.expects = expects
        self.role = role


#: the published defaults of the Chernoff policies (simulator.baselines.further.chernoff.DeadlineParams; a test checks
#: they agree). Written here because this module must not import the compiled stack (``help`` without numba).
FURTHER_DEFAULTS = {"theta_grid_size": 10, "theta_grid_spacing": "log_upper", "budget_reservation_mode": "hard",
                    "budget_reservation_c": 2.0, "budget_reservation_alpha": 0.0}  # fmt: skip


def _further_vars() -> list[Var]:
    d = FURTHER_DEFAULTS
    return [
        Var("LOADER_COLGEN_PARAMS_PATH", "", FurtherText("a JSON file of column-generation parameters", role="in"),
            "loader_dual_colgen: JSON object of column-generation parameters", "further"),
        Var("DEADLINE_THETA_GRID_SIZE", str(d["theta_grid_size"]), FurtherText("an integer (below 2 taken as 2)"),
            "Chernoff policies: theta grid points", "further", default_value=lambda: None),
        Var("DEADLINE_THETA_GRID_SPACING", "log_upper", FurtherText("`log_upper` or `linear` (aliases: `log`, `lin`)"),
            "Chernoff policies: theta grid spacing", "further", default_value=lambda: None),
        Var("DEADLINE_BUDGET_RESERVATION_MODE", d["budget_reservation_mode"], FurtherText("`hard`, `fixed_alpha`, `continuation` or `adaptive`"),
            "Chernoff policies: budget reservation", "further", default_value=lambda: None),
        Var("DEADLINE_BUDGET_RESERVATION_C", f"{d['budget_reservation_c']:g}", FurtherText("a number >= 0"),
            "Chernoff policies: reservation constant c", "further", default_value=lambda: None),
        Var("DEADLINE_BUDGET_RESERVATION_ALPHA", f"{d['budget_reservation_alpha']:g}", FurtherText("a number in [0, 1]"),
            "Chernoff policies: reservation alpha", "further", default_value=lambda: None),
        Var("DEADLINE_TRACE", "0", FurtherText("`0`/`1`"), "deadline_receding: record a trace per decision",
            "further", default_value=lambda: None),
        Var("DEADLINE_TRACE_LEVEL", "theta", FurtherText("`summary`, `theta`, `theta_full` or `iter`"),
            "deadline_receding: trace detail", "further", default_value=lambda: None),
    ]  # fmt: skip


#: ``local`` / ``surface`` start at most this many shard processes per core (each imports numba and holds its
#: memory; more only queue on the same cores: ``N_WORKERS=20`` on 2 cores took 23-34 s against 5-7 s)
MAX_WORKERS_PER_CORE = 4


def capped_workers(requested: int | None, n_shards: int | None = None) -> tuple[int, str | None]:
    """The shard processes to start for ``N_WORKERS`` (``None``: one per core), and the one line saying why
    when fewer than asked: never more than the shards to run nor :data:`MAX_WORKERS_PER_CORE` per core."""
    n_cores = cores()
    n = requested or n_cores
    limits = [(MAX_WORKERS_PER_CORE * n_cores, f"at most {MAX_WORKERS_PER_CORE} per core on {n_cores} core(s)")]
    if n_shards is not None:
        limits.append((max(1, n_shards), f"the number of shards ({n_shards})"))
    cap, why = min(limits, key=lambda x: x[0])
    if n <= cap:
        return n, None
    return cap, f"N_WORKERS={n} capped at {cap}: {why}"


def check_run_paths(values: Mapping[str, Any], run_dir: str, run_dir_name: str) -> None:
    """The one rule over a run's paths (:func:`simulator.base.cliargs.check_doors`): the run folder, which the
    actions write (and ``prepare --force`` moves away), never holds an input variable's file, and is a folder
    (not a file, nor under one). One line naming the variables, before any work."""
    from simulator.base.cliargs import check_doors, input_path, output_path

    doors = [(v.name, input_path(), values[v.name]) for v in VARIABLES
             if v.parse.role == "in" and v.name in values and values[v.name]]
    check_doors([*doors, (run_dir_name, output_path("dir"), run_dir)])


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


VARIABLES: tuple[Var, ...] = (
    # --- the run --------------------------------------------------------------------------------------------
    Var("DAG_POOL_PATH", "examples/example_pool.jsonl (in the repository)", Path("in"), "input pool (JSONL)", "run",
        default_value=lambda: DEFAULT_POOL),
    Var("RUN_NAME", "example", PlainName(), "run directory name", "rundir"),
    Var("RESULTS_ROOT", "results/runs (in the repository)", Path("out"), "directory holding the run directories",
        "rundir", default_value=lambda: DEFAULT_RESULTS_ROOT),
    Var("RUN_DIR", "", Path("out"), "explicit run directory for the actions after `prepare` (else "
        "`$RESULTS_ROOT/$RUN_NAME`)", "rundir"),
    Var("N_DAGS", "all", Integer(lo=1, words={"all": None}), "how many DAGs (the first N of the index file, "
        "else rows 0..N-1)", "run"),
    Var("USE_DAG_INDICES_FILE", "", Path("in"), "index file of the DAGs to use (`[..]` or `{\"dag_indices\": [..]}`)",
        "run"),
    Var("N_EXEC_TRIALS", "100", Integer(lo=1, hi=MAX_TRIALS), "trials per (DAG, cell, method); trial ids 0..N-1", "run"),
    Var("SEED", "42", Integer(lo=0, hi=MAX_SEED), "run seed", "run"),
    # --- the grid --------------------------------------------------------------------------------------------
    Var("BUDGET_DEADLINE_VALUES_MAP", "", GridMap(), "absolute grid, budget groups separated by `;` (has "
        "priority over the axes)", "grid"),
    Var("BUDGET_VALUES", "", Values(), "absolute budget axis (else `BUDGET_RATIOS`)", "grid"),
    Var("DEADLINE_VALUES", "", Values(allow_inf=True), "absolute deadline axis in seconds, `inf` = no "
        "deadline (else `DEADLINE_RATIOS`)", "grid"),
    Var("BUDGET_RATIOS", "0.3 0.5 1.0 2.0 5.0 10.0", Values(), "budget axis, multiples of each DAG's nominal "
        "budget", "grid"),
    Var("DEADLINE_RATIOS", "1.0", Values(), "deadline axis, multiples of each DAG's nominal deadline", "grid"),
    # --- costs -------------------------------------------------------------------------------------------------
    Var("BUDGET_COST_MODE", "token_cost_mean", Lazy("simulator.costs.modes:normalize_cost_mode",
        "`token`, `money`, `cost`, `latency` or the long names"), "what the budget counts", "run"),
    Var("LATENCY_DIST", "lognormal", LazyChoice("simulator.costs.modes:LATENCY_DISTS"), "parametric latency "
        "distribution", "run"),
    Var("PRICE_FILE", "", Path("in"), "JSON `{model: $ per 1M output tokens}` over the default prices (money mode)",
        "run"),
    Var("DEFAULT_PRICE_MODEL", "", Word(), "model that prices the id `default` when a node names none", "run"),
    # --- methods -----------------------------------------------------------------------------------------------
    Var("METHOD_SET", "all", Lazy("simulator.methods:resolve_methods", "a method set (`all`, `seq`, `static`, "
        "`mcpp`, `baselines`, `further`, ...) or a comma list of methods and sets (MCPP, any case, is "
        "`mc_portfolio_rollout`); a variant is `NAME[key=value,...]` "
        "(`python -m simulator methods` lists them)"), "the methods to run", "run"),
    Var("EXECUTION_RULES", "published", Choice(("published", "atomic", "per_attempt", "live")), "execution-rule mode: "
        "`published` (each method its own launch rule), `atomic` (every method atomic, hard deadline), `per_attempt` "
        "(every method per attempt; MCPP plans under it too), `live` (only what a live run knows: admission on expected costs, capped samples, estimated remaining times; docs/semantics.md); recorded with every record", "run"),
    Var("BASELINE_SUITE", "", Text(), "models to re-run the baselines with (comma list, or `all` = every model "
        "of the pool)", "run"),
    *_mcpp_vars(),
    *_further_vars(),
    # --- planning statistics (robustness) ------------------------------------------------------------------------
    Var("PLANNING_POOL_PATH", "", Path("in"), "planning pool aligned row by row with the execution pool", "run"),
    Var("PLANNING_NOISE_LATENCY_SIGMA", "0", _SIGMA, "planner latency noise (log-normal sigma)", "run"),
    Var("PLANNING_NOISE_COST_SIGMA", "0", _SIGMA, "planner cost noise (log-normal sigma)", "run"),
    Var("PLANNING_NOISE_LOGIT_SIGMA", "0", _SIGMA, "planner success noise (logit sigma)", "run"),
    Var("PLANNING_NOISE_SEED", "0", Integer(lo=0), "planner noise seed", "run"),
    # --- layout and workers -------------------------------------------------------------------------------------
    Var("DAGS_PER_SHARD", "auto", Integer(lo=1, words={"auto": None}), "DAGs per shard (auto: "
        "n_dags / (8 x cores), at most 10, with MCPP; else n_dags / (4 x cores), at most 500)", "run"),
    Var("PYTHON", "the Python running `prepare`", Executable(), "interpreter of `run_experiment.sh` and of the "
        "job lines", "run", default_value=lambda: sys.executable or "python3"),
    Var("N_WORKERS", "all", Integer(lo=1, words={"all": None}), "parallel shard processes of `local` (all = "
        "every core; capped at the number of shards and at 4 per core, with one line saying so)", "local"),
    Var("MAX_SHARD_FAILURES", "3", _POS, "tries before a shard is marked failed", "worker"),
    Var("HEARTBEAT_SECONDS", "10", Number(0.0, lo_inclusive=False), "heartbeat period of a running shard",
        "worker"),
    Var("STALE_SECONDS", "120", Number(0.0), "heartbeat age after which a claim is stale (`status`, `resume`)",
        "stale"),
    # --- SLURM ----------------------------------------------------------------------------------------------------
    Var("SLURM_MODE", "shard", Choice(("shard", "worker")), "one array task per shard, or `SLURM_WORKERS` "
        "`auto` workers", "slurm"),
    Var("SLURM_CPUS_PER_TASK", "1", _POS, "`--cpus-per-task` (also the task's `NUMBA_NUM_THREADS`)", "slurm"),
    Var("SLURM_MEM", "", Pattern(r"[1-9][0-9]*[KMGT]?", "a size like `4G` or `500M`"), "`--mem`", "slurm"),
    Var("SLURM_TIME", "", Pattern(r"(\d+-)?\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE",
        "a time like `30`, `04:00:00` or `1-12:00:00`"), "`--time`", "slurm"),
    Var("SLURM_PARTITION", "", Word(), "`--partition`", "slurm"),
    Var("SLURM_ACCOUNT", "", Word(), "`--account`", "slurm"),
    Var("SLURM_MAX_PARALLEL", "", _POS, "array throttle `%N`: at most N tasks at once", "slurm"),
    Var("SLURM_WORKERS", "min(pending shards, 8)", _POS, "array tasks of `SLURM_MODE=worker`", "slurm",
        default_value=lambda: None),
    Var("SLURM_EXTRA_ARGS", "", ShellWords(), "more `sbatch` flags", "slurm"),
    # --- analysis ------------------------------------------------------------------------------------------------
    Var("PLOT_FORMATS", "png", Formats(), "figure formats of `analyze` (`local`) and `claims`: PNG, plus PDF and "
        "SVG beside each PNG when listed, e.g. `png,pdf,svg` (`paper` sets that unless given)", "plots"),
    # --- claims report and paper grid (docs/claims.md) --------------------------------------------------------------
    Var("RUN_NAMES", "", Text(), "runs of `claims`: names under `RESULTS_ROOT` or directories, space separated "
        "(positional arguments too; else the one run of `RUN_DIR` / `RUN_NAME`)", "claims"),
    Var("CLAIMS_OUT", "", Path("out"), "output directory of `claims` (else `analysis/` of the first run; `paper`: "
        "`$RESULTS_ROOT/<PAPER_NAME>_claims`)", "claims"),
    Var("CLAIMS_MARGIN", "0.05", Number(0.0), "claim 2: the largest loss to planning noise still called robust "
        "(a fraction of on-time success)", "claims"),
    Var("PAPER_CONFIG", "configs/paper_grid.env (in the repository)", Path("in"), "the paper grid of `paper` "
        "(KEY=VALUE lines; the environment overrides them)", "paper",
        default_value=lambda: os.path.join(REPO, "configs", "paper_grid.env")),
    Var("PAPER_NAME", "paper", PlainName(), "prefix of the run names of `paper` (`<name>_<mode>_<noise>`)", "paper"),
    Var("PAPER_MODES", "", Text(), "execution-rule modes of `paper`, space separated (else the config's)",
        "paper"),
    Var("PAPER_NOISE_LEVELS", "", Text(), "planning-noise sigmas of `paper` (0 = exact; each sets the logit, "
        "latency and cost sigma; else the config's)", "paper"),
    Var("PAPER_NOISY_METHODS", "", Text(), "`METHOD_SET` of the noisy runs of `paper` (else the config's; "
        "planning noise changes MCPP only)", "paper"),
    Var("PAPER_BACKEND", "local", Choice(("local", "slurm")), "`paper`: run here, or submit each run to SLURM "
        "(then run the printed `claims` command)", "paper"),
    # --- the prediction-surface job (docs/surface.md) --------------------------------------------------------------
    Var("SURFACE_METHODS", "mc_portfolio_rollout", Text(), "methods of `surface` (as `METHOD_SET`: names, sets, "
        "variants); the first is the one in `success_pct`", "surface"),
    Var("SURFACE_BUDGETS", "", Text(), "budget axis of `surface`: `lo:hi:n` (log-spaced) or increasing numbers "
        "(unset: 0.02:20:100 dollars in money mode, else 0.2 x the smallest to 5 x the largest nominal budget, "
        "100 log-spaced)", "surface"),
    Var("SURFACE_DEADLINES", "", Text(), "deadline axis of `surface` in seconds: `lo:hi:n` or increasing numbers "
        "(unset: 30:7200:100)", "surface"),
    # --- the prediction-surface page (docs/surface.md) -------------------------------------------------------------
    Var("SURFACE_PORT", "8000", Integer(lo=0, hi=65535), "port of `surface-serve` on 127.0.0.1 (0 = any free "
        "port)", "surface_serve"),
)  # fmt: skip

BY_NAME: dict[str, Var] = {v.name: v for v in VARIABLES}

#: which variable groups each action reads (and checks before it starts)
PREPARE_GROUPS = ("rundir", "run", "grid", "mcpp", "further")
ACTION_GROUPS: dict[str, tuple[str, ...]] = {
    "prepare": PREPARE_GROUPS,
    "local": (*PREPARE_GROUPS, "local", "worker", "stale", "plots"),
    "local --no-prepare": ("rundir", "local", "worker", "stale", "plots"),
    "slurm": (*PREPARE_GROUPS, "slurm"),
    "slurm --no-prepare": ("rundir", "slurm"),
    "claims": ("rundir", "claims", "plots"),
    "paper": ("rundir", "claims", "paper", "plots"),
    "shard": ("rundir", "worker"),
    "task": ("rundir", "worker"),
    "auto": ("rundir", "worker"),
    "status": ("rundir", "stale"),
    "resume": ("rundir", "stale"),
    "merge": ("rundir",),
    "analyze": ("rundir", "plots"),
    "report": ("rundir", "plots"),
    "surface-serve": ("rundir", "surface_serve"),
    "surface": (*PREPARE_GROUPS, "surface", "local", "worker", "stale", "slurm"),
}

#: An environment variable under one of these prefixes must be a harness variable (a typo is refused with the
#: closest valid name). SLURM_* is special: SLURM itself sets many SLURM_* variables inside jobs, so there only
#: a near miss of a harness name that SLURM does not set is refused.
CHECKED_PREFIXES = (
    "MC_PORTFOLIO_", "PLANNING_", "BASELINE_", "BUDGET_", "DEADLINE_", "LATENCY_", "DAG_", "DAGS_", "N_EXEC_",
    "HEARTBEAT_", "STALE_", "MAX_SHARD_", "RESULTS_", "USE_DAG_", "PRICE_", "DEFAULT_PRICE_", "METHOD_", "SLURM_",
    "LOADER_", "CLAIMS_", "PAPER_", "SURFACE_", "PLOT_",
)  # fmt: skip
#: SLURM_* names SLURM sets or reads itself (families by prefix); never refused.
SLURM_OWN_PREFIXES = (
    "SLURM_JOB", "SLURM_ARRAY_", "SLURM_STEP", "SLURM_CPUS_ON", "SLURM_CPU_", "SLURM_MEM_", "SLURM_NODE",
    "SLURM_NNODES", "SLURM_TASK", "SLURM_NTASKS", "SLURM_SUBMIT_", "SLURM_CLUSTER", "SLURM_GPU", "SLURM_TRES",
    "SLURM_DIST", "SLURM_SRUN", "SLURM_LOCALID", "SLURM_PROCID", "SLURM_GTIDS", "SLURM_TOPOLOGY", "SLURM_PRIO",
    "SLURM_RESTART", "SLURM_EXPORT", "SLURM_HET", "SLURM_CONF", "SLURM_LAUNCH", "SLURM_UMASK", "SLURM_PTY",
    "SLURM_SCRIPT", "SLURM_OVERCOMMIT", "SLURM_SPANK", "SLURM_WORKING", "SLURM_TIME_FORMAT", "SLURM_HINT",
    "SLURM_EXCLUSIVE", "SLURM_THREADS", "SLURM_SOCKETS", "SLURM_CORES", "SLURM_TIMELIMIT", "SLURM_OPEN_MODE",
    "SLURM_UNBUFFEREDIO", "SLURM_DEBUG", "SLURM_TEST", "SLURM_BITSTR", "SLURM_CONTAINER",
)  # fmt: skip


def check_names(env: Mapping[str, str]) -> None:
    """Refuse unknown variables under :data:`CHECKED_PREFIXES`, naming the closest valid name."""
    known = list(BY_NAME)
    slurm_known = [n for n in known if n.startswith("SLURM_")]
    bad = []
    for name in env:
        if name in BY_NAME or not name.startswith(CHECKED_PREFIXES):
            continue
        if name.startswith("SLURM_"):
            if name.startswith(SLURM_OWN_PREFIXES) or closest(name, slurm_known) is None:
                continue
        bad.append(name)
    check_unknown_names(bad, known, "harness variable(s)", SOURCE)


def check_environment(env: Mapping[str, str], action: str) -> dict[str, Any]:
    """Every check of ``action``'s variables, before it starts: names, then each value it reads.

    Returns {name: typed value} of those variables (defaults filled in).
    """
    check_names(env)
    groups = ACTION_GROUPS.get(action, ("rundir",))
    return {v.name: v.value(env) for v in VARIABLES if v.group in groups}


def read(env: Mapping[str, str], name: str) -> Any:
    """The typed value of one variable (its default when unset)."""
    return BY_NAME[name].value(env)


def is_set(env: Mapping[str, str], name: str) -> bool:
    return bool((env.get(name) or "").strip())


def cores() -> int:
    """Cores this process may use (``N_WORKERS=all``)."""
    return _cores()


# ----------------------------------------------------------------------------- help and docs

GROUP_TITLES = {
    "rundir": "run directory",
    "run": "run settings (read by prepare)",
    "grid": "(budget, deadline) grid",
    "mcpp": "MCPP parameters (docs/policies.md)",
    "further": "LOADER and Chernoff-deadline baselines (docs/further_baselines.md)",
    "local": "workers",
    "worker": "workers",
    "stale": "workers",
    "slurm": "SLURM submission",
    "plots": "analysis",
    "claims": "claims report",
    "paper": "paper grid",
    "surface": "prediction-surface job",
    "surface_serve": "prediction-surface page",
}


def help_text() -> str:
    """The settings part of ``run_experiment.sh help``, one line per variable of the table."""
    width = max(len(v.name) for v in VARIABLES)
    lines: list[str] = []
    title = None
    for v in VARIABLES:
        t = GROUP_TITLES[v.group]
        if t != title:
            title = t
            lines.append(f"  # {t}")
        default = f" [default: {v.default}]" if v.default else ""
        lines.append(f"  {v.name.ljust(width)}  {v.help}{default}")
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """The settings table of ``docs/harness.md`` (a test checks the docs hold exactly this)."""
    rows = ["| variable | default | accepts | meaning |", "|---|---|---|---|"]
    for v in VARIABLES:
        default = f"`{v.default}`" if v.default and v.default_value is None and v.group != "mcpp" else v.default
        rows.append(f"| `{v.name}` | {_md(default) or 'unset'} | {_md(v.expects())} | {_md(v.help)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.variables``: print the docs table (to paste into docs/harness.md)."""
    print(markdown_table())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
