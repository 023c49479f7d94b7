"""The endpoints file: where each model of the pool is served, what it costs, how hard to push it.

TOML (read with the standard library's ``tomllib``), one table per model id::

    [models.30B_ins]
    base_url = "http://127.0.0.1:8000/v1"   # OpenAI-compatible, POST {base_url}/chat/completions
    model = "Qwen/Qwen3-30B-A3B-Instruct"   # the served model name sent in the body
    api_key_env = "VLLM_API_KEY"            # environment variable holding the key ("" = none)
    input_price_per_1m = 0.0                # dollars per 1M prompt tokens
    output_price_per_1m = 0.8               # dollars per 1M completion tokens
    concurrency = 16                        # requests in flight to this model, at most
    max_tokens = 4096                       # sent with every request; bounds the reservation
    request_timeout_s = 120                 # wall seconds per whole try (never more than the time left)
    # optional:
    token_param = "max_tokens"              # or "max_completion_tokens" (OpenAI's reasoning models)
    max_response_bytes = 131072             # answers larger than this are cut (default: 32 x max_tokens, >= 64 KiB)
    errors_may_bill = false                 # true behind a gateway that retries: a 5xx may hide billed tries
    headers = { "x-portkey-provider" = "openai", "x-portkey-config" = { env = "PORTKEY_CONFIG" } }
                                            # sent with every request: a literal value, or { env = "NAME" }
                                            # (read from the environment at each request, a secret: redacted)

Every field is required (a missing one, a negative price or a non-positive
limit is refused with the file and the item), so that the worst-case cost of
a request, which the hard budget reserves, is always known.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.redact import remember
from simulator.base.errors import ConfigError

FIELDS = ("base_url", "model", "api_key_env", "input_price_per_1m", "output_price_per_1m", "concurrency",
          "max_tokens", "request_timeout_s")
OPTIONAL = ("token_param", "max_response_bytes", "errors_may_bill", "headers")
#: headers the executor sets itself (an endpoints file may not set them)
OWN_HEADERS = frozenset({"host", "content-type", "content-length", "transfer-encoding", "connection",
                         "accept-encoding", "x-mcpp-dag", "x-mcpp-node", "x-mcpp-trial", "x-mcpp-attempt"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")


@dataclass(frozen=True)
class Endpoint:
    """One model's endpoint (a row of the endpoints file)."""

    model_id: str
    base_url: str
    model: str
    api_key_env: str
    input_price_per_1m: float
    output_price_per_1m: float
    concurrency: int
    max_tokens: int
    request_timeout_s: float
    token_param: str = "max_tokens"
    max_response_bytes: int = 0  # 0: the default cap (executor.client.response_cap)
    errors_may_bill: bool = False  # a 5xx answer is possibly billed (a gateway may have retried a billed request)
    #: extra request headers: (name, literal value, environment variable); exactly one of the last two is set
    headers: tuple[tuple[str, str, str], ...] = ()

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"


def _number(path: str, where: str, name: str, value: Any, *, integer: bool = False, positive: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok or value < 0 or (positive and value <= 0):
        kind = "an integer" if integer else "a finite number"
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{path}: {where}: {name} must be {kind} {bound}, got {value!r}")
    return int(value) if integer else float(value)


def parse_endpoints(data: Mapping[str, Any], path: str) -> dict[str, Endpoint]:
    """Endpoints from a parsed TOML document (refused with one line naming the file and item)."""
    models = data.get("models")
    if not isinstance(models, Mapping) or not models:
        raise ConfigError(f"{path}: needs a [models.<model id>] table per model")
    unknown = set(data) - {"models"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level item(s) {sorted(unknown)}; only [models.*] tables")
    out: dict[str, Endpoint] = {}
    for model_id, row in models.items():
        where = f"[models.{model_id}]"
        if not isinstance(row, Mapping):
            raise ConfigError(f"{path}: {where} must be a table")
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise ConfigError(f"{path}: {where}: missing field(s) {', '.join(missing)}")
        extra = set(row) - set(FIELDS) - set(OPTIONAL)
        if extra:
            raise ConfigError(f"{path}: {where}: unknown field(s) {', '.join(sorted(extra))}")
        for name in ("base_url", "model", "api_key_env"):
            if not isinstance(row[name], str):
                raise ConfigError(f"{path}: {where}: {name} must be a string")
        if not row["base_url"].startswith(("http://", "https://")):
            raise ConfigError(f"{path}: {where}: base_url must start with http:// or https://, got {row['base_url']!r}")
        if not row["model"]:
            raise ConfigError(f"{path}: {where}: model (the served model name) is empty")
        token_param = row.get("token_param", "max_tokens")
        if token_param not in TOKEN_PARAMS:
            raise ConfigError(f"{path}: {where}: token_param must be one of {', '.join(TOKEN_PARAMS)}, "
                              f"got {token_param!r}")
        cap = row.get("max_response_bytes", 0)
        if "max_response_bytes" in row:
            cap = int(_number(path, where, "max_response_bytes", cap, integer=True, positive=True))
        may_bill = row.get("errors_may_bill", False)
        if not isinstance(may_bill, bool):
            raise ConfigError(f"{path}: {where}: errors_may_bill must be true or false, got {may_bill!r}")
        headers = parse_headers(row.get("headers", {}), f"{path}: {where}: headers", row["api_key_env"])
        out[str(model_id)] = Endpoint(
            model_id=str(model_id),
            base_url=row["base_url"],
            model=row["model"],
            api_key_env=row["api_key_env"],
            input_price_per_1m=_number(path, where, "input_price_per_1m", row["input_price_per_1m"]),
            output_price_per_1m=_number(path, where, "output_price_per_1m", row["output_price_per_1m"]),
            concurrency=int(_number(path, where, "concurrency", row["concurrency"], integer=True, positive=True)),
            max_tokens=int(_number(path, where, "max_tokens", row["max_tokens"], integer=True, positive=True)),
            request_timeout_s=_number(path, where, "request_timeout_s", row["request_timeout_s"], positive=True),
            token_param=token_param,
            max_response_bytes=cap,
            errors_may_bill=may_bill,
            headers=headers,
        )
    return out


def parse_headers(table: Any, where: str, api_key_env: str) -> tuple[tuple[str, str, str], ...]:
    """An endpoint's ``headers`` table: name -> a literal string or ``{ env = "NAME" }`` (refused in one line)."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: headers must be a table of name = value, got {table!r}")
    out = []
    for name, value in table.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ConfigError(f"{where}: {name!r} is not a header name")
        if name.lower() in OWN_HEADERS:
            raise ConfigError(f"{where}: {name} is set by the executor")
        if any(name.lower() == n.lower() for n, _, _ in out):
            raise ConfigError(f"{where}: {name} is named twice (header names ignore case)")
        if name.lower() == "authorization" and api_key_env:
            raise ConfigError(f"{where}: Authorization comes from api_key_env ({api_key_env}); set one of the two")
        if isinstance(value, str):
            literal, env = value, ""
        elif (isinstance(value, Mapping) and set(value) == {"env"} and isinstance(value["env"], str)
              and value["env"]):
            literal, env = "", value["env"]
        else:
            raise ConfigError(f'{where}: {name} must be a string or {{env = "NAME"}}, got {value!r}')
        if "\r" in literal or "\n" in literal:
            raise ConfigError(f"{where}: {name} holds a line break")
        out.append((name, literal, env))
    return tuple(out)


def request_secrets(ep: Endpoint) -> dict[str, str]:
    """The endpoint's ``Authorization`` (from ``api_key_env``) and extra headers, read from the environment now.

    Every value read from the environment is registered as a secret
    (:func:`executor.redact.remember`) before it can be sent.
    """
    out: dict[str, str] = {}
    if ep.api_key_env:
        key = os.environ.get(ep.api_key_env)
        if key:
            remember(key, f"${ep.api_key_env}")
            remember(f"Bearer {key}", f"${ep.api_key_env}")
            out["Authorization"] = f"Bearer {key}"
    for name, literal, env in ep.headers:
        if env:
            value = os.environ.get(env, "")
            remember(value, f"${env}")
        else:
            value = literal
        if value:
            out[name] = value
    return out


def load_endpoints(path: str | Path) -> dict[str, Endpoint]:
    """Read and check an endpoints file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: endpoints file not found")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return parse_endpoints(data, str(path))


def check_models_served(endpoints: Mapping[str, Endpoint], model_ids: Iterable[str], path: str, dag_where: str) -> None:
    """Every model the run may launch must have an endpoint."""
    for m in model_ids:
        if m not in endpoints:
            raise ConfigError(f"{path}: {dag_where} model {m!r} has no endpoint (add [models.{m}])")


def check_keys(endpoints: Mapping[str, Endpoint], model_ids: Iterable[str], path: str) -> None:
    """Every ``api_key_env`` and header variable an endpoint the run uses names must be set and non-empty
    (before any request); their values are registered as secrets (:mod:`executor.redact`)."""
    for m in model_ids:
        ep = endpoints.get(m)
        if ep is None:
            continue
        if ep.api_key_env and not os.environ.get(ep.api_key_env):
            raise ConfigError(f"{path}: [models.{m}]: api_key_env names {ep.api_key_env!r}, which is not set "
                              f"(or empty) in the environment")
        for name, _literal, env in ep.headers:
            if env and not os.environ.get(env):
                raise ConfigError(f"{path}: [models.{m}]: headers: {name} names {env}, which is not set (or empty) "
                                  f"in the environment")
        request_secrets(ep)


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def endpoints_toml(endpoints: Iterable[Endpoint]) -> str:
    """The endpoints file text of ``endpoints`` (what ``world --write-endpoints`` writes)."""
    lines = []
    for ep in endpoints:
        lines.append(f'[models."{ep.model_id}"]')
        for f in FIELDS:
            lines.append(f"{f} = {_toml_value(getattr(ep, f))}")
        if ep.token_param != "max_tokens":
            lines.append(f"token_param = {_toml_value(ep.token_param)}")
        if ep.max_response_bytes:
            lines.append(f"max_response_bytes = {ep.max_response_bytes}")
        if ep.errors_may_bill:
            lines.append("errors_may_bill = true")
        if ep.headers:
            items = [f"{_toml_value(n)} = " + (f"{{ env = {_toml_value(env)} }}" if env else _toml_value(lit))
                     for n, lit, env in ep.headers]
            lines.append(f"headers = {{ {', '.join(items)} }}")
        lines.append("")
    return "\n".join(lines)
