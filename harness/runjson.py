"""Reading a run's ``run.json`` (a grid run's or a surface job's): one line naming the file when it is damaged."""

from __future__ import annotations

from simulator.base.errors import ConfigError
from simulator.base.jsonread import JsonRefused, loads_strict


def read_run_json(path: str) -> dict:
    """A run's (or surface job's) ``run.json``; one line naming the file when it is unreadable or not JSON."""
    try:
        with open(path, "rb") as fh:
            doc = loads_strict(fh.read(), allow_nonfinite=True)  # a deadline axis holds Infinity ("no deadline")
    except JsonRefused as exc:
        raise ConfigError(f"{path}: {exc.msg}; this run.json is damaged: prepare the run again "
                          "(`prepare --force` archives the old one)") from None  # fmt: skip
    except PermissionError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: not a JSON object; this run.json is damaged: prepare the run again")
    return doc
