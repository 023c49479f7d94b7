"""Reading a run's ``run.json`` (a grid run's or a surface job's): one line naming the file when it is damaged."""

from __future__ import annotations

import json

from simulator.base.errors import ConfigError


def read_run_json(path: str) -> dict:
    """A run's (or surface job's) ``run.json``; one line naming the file when it is unreadable or not JSON."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; this run.json is damaged: prepare the run again "
                          "(`prepare --force` archives the old one)") from None  # fmt: skip
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); this run.json is damaged: prepare the run again "
                          "(`prepare --force` archives the old one)") from None  # fmt: skip
    except PermissionError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: not a JSON object; this run.json is damaged: prepare the run again")
    return doc
