"""Test fixtures for the world as others see it: a world on its own thread, and a LiteLLM proxy in front of it.

``WorldThread`` runs a :class:`executor.world.World` (or a
:class:`executor.hostile.HostileWorld`) on an event loop of its own thread,
so blocking clients (the official ``openai`` SDK, a subprocess gateway) can
talk to it from the test's thread. ``LiteLLMProxy`` starts the LiteLLM proxy
(``sys.executable -m litellm.proxy.proxy_cli``) with default settings but a
master key (LiteLLM refuses to start without one) from a config that points
every model at a base URL, and waits until it answers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

#: modules the LiteLLM proxy imports beyond litellm itself (pinned in requirements-test.txt)
PROXY_MODULES = ("litellm", "uvicorn", "fastapi", "websockets", "backoff", "apscheduler", "jwt", "multipart",
                 "redis", "cryptography", "semver", "expression", "fastapi_sso", "mcp", "soundfile", "uvloop")


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WorldThread:
    """A world (anything with ``async start(port=...)`` / ``async stop()``) served on its own thread's loop."""

    def __init__(self, world: Any, port: int = 0) -> None:
        self.world = world
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="world")
        self.thread.start()
        self.port = self.call(world.start(port=port))
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine on the world's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.call(self.world.stop())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    def __enter__(self) -> WorldThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def litellm_proxy_missing() -> str | None:
    """Why the LiteLLM proxy cannot start here (one line), or None when its modules are importable."""
    missing = [m for m in PROXY_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        return f"the LiteLLM proxy cannot be imported: no module {', '.join(missing)} (pip install 'litellm[proxy]')"
    return None


def litellm_config(models: Mapping[str, str | tuple[str, str]]) -> str:
    """A LiteLLM proxy config (YAML): each model name served by ``openai/<served name>`` at its base URL.

    ``models`` maps a name to a base URL (the served name is the name) or to
    (served name, base URL).
    """
    lines = ["model_list:"]
    for name, where in models.items():
        served, base_url = (name, where) if isinstance(where, str) else where
        lines += [f"  - model_name: {json.dumps(name)}",
                  "    litellm_params:",
                  f"      model: {json.dumps('openai/' + served)}",
                  f"      api_base: {json.dumps(base_url)}",
                  '      api_key: "none"']
    return "\n".join(lines) + "\n"


class GatewayProcess:
    """A gateway in a subprocess on a free 127.0.0.1 port, its output in ``<workdir>/<log_name>``: started by
    the subclass (``self.proc``), waited for until ``health_path`` answers 200, stopped on exit."""

    name = "the gateway"
    health_path = "/"

    def _start(self, argv: list[str], workdir: Path, log_name: str, env: Mapping[str, str],
               start_timeout_s: float) -> None:
        self.log = workdir / log_name
        self._log = open(self.log, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(argv, cwd=workdir, env=dict(env), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        try:
            self._wait(start_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait(self, limit_s: float) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.proc.returncode}): {self.tail()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}{self.health_path}", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer within {limit_s:g} s: {self.tail()}")

    def tail(self, n: int = 15) -> str:
        self._log.flush()
        return " | ".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LiteLLMProxy(GatewayProcess):
    """The LiteLLM proxy in a subprocess on a free 127.0.0.1 port, default settings, a fresh master key.

    Raises :class:`RuntimeError` with the proxy's last log lines when it
    exits or does not answer within ``start_timeout_s``.
    """

    name = "the LiteLLM proxy"
    health_path = "/health/liveliness"

    def __init__(self, models: Mapping[str, str | tuple[str, str]], workdir: Path, *, start_timeout_s: float = 180.0,
                 extra_env: Mapping[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config = self.workdir / "litellm_config.yaml"
        self.config.write_text(litellm_config(models))
        self.key = "sk-mcpp-" + secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        env = {**os.environ, "LITELLM_MASTER_KEY": self.key,
               "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no network fetch of the price map at start
               **dict(extra_env or {})}
        self._start([sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(self.config), "--host",
                     "127.0.0.1", "--port", str(self.port)], self.workdir, "litellm.log", env, start_timeout_s)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def gateway_endpoints(endpoints: Mapping[str, Any], proxy: LiteLLMProxy,
                      key_env: str = "MCPP_TEST_LITELLM_KEY") -> dict[str, Any]:
    """The world's endpoints (model id -> Endpoint) pointed at the proxy instead, its key in ``key_env``.

    The proxy serves each model under its pool id (:func:`litellm_config`),
    so only ``base_url`` and ``api_key_env`` change; the key is put in this
    process's environment.
    """
    from dataclasses import replace

    os.environ[key_env] = proxy.key
    return {m: replace(e, base_url=proxy.url, api_key_env=key_env) for m, e in endpoints.items()}


# -- the Portkey AI gateway (npm @portkey-ai/gateway), run by node --------------------------------------------------

#: the Portkey gateway version the tests are written against (installed by .ci/run)
PORTKEY_VERSION = "1.15.2"
#: where .ci/run installs it (``npm install --prefix DIR @portkey-ai/gateway@1.15.2``); MCPP_PORTKEY_DIR overrides
PORTKEY_DIR_DEFAULT = "/opt/mcpp/portkey-gateway"


def portkey_entry() -> Path:
    """The gateway's node entry point under ``$MCPP_PORTKEY_DIR`` (default :data:`PORTKEY_DIR_DEFAULT`)."""
    root = Path(os.environ.get("MCPP_PORTKEY_DIR") or PORTKEY_DIR_DEFAULT)
    return root / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"


def portkey_gateway_missing() -> str | None:
    """Why the Portkey gateway cannot start here (one line), or None."""
    import shutil

    if shutil.which("node") is None:
        return "no node on PATH (apt-get install nodejs): the Portkey gateway runs on node"
    entry = portkey_entry()
    if not entry.is_file():
        return (f"the Portkey gateway is not installed at {entry.parents[3]} (npm install --prefix DIR "
                f"@portkey-ai/gateway@{PORTKEY_VERSION}, then MCPP_PORTKEY_DIR=DIR; .ci/run does it)")
    return None


class PortkeyGateway(GatewayProcess):
    """The Portkey AI gateway (``node build/start-server.js --port=N --headless``) on a free port.

    It is configured per request (``x-portkey-config``: a JSON config with
    the provider, its ``custom_host``, ``request_timeout``, ``retry``,
    fallback ``targets`` and ``forward_headers``), so one gateway serves
    every test. Raises :class:`RuntimeError` with its last log lines when it
    exits or does not answer within ``start_timeout_s``.
    """

    name = "the Portkey gateway"

    def __init__(self, workdir: Path, *, start_timeout_s: float = 60.0) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._start(["node", str(portkey_entry()), f"--port={self.port}", "--headless"], self.workdir,
                    "portkey.log", {**os.environ, "NODE_ENV": "production"}, start_timeout_s)


#: the loopback world's key headers: Portkey drops unknown headers and the body's ``mcpp`` object, so its config
#: must forward these (``forward_headers``)
MCPP_HEADERS = ["x-mcpp-dag", "x-mcpp-node", "x-mcpp-trial", "x-mcpp-attempt"]


def portkey_target(base_url: str, **extra: Any) -> dict[str, Any]:
    """One Portkey target: an OpenAI-compatible upstream at ``base_url`` (its ``custom_host``)."""
    return {"provider": "openai", "custom_host": base_url, "api_key": "none", **extra}


def portkey_headers(config: Mapping[str, Any]) -> dict[str, str]:
    """The request headers that configure Portkey: ``x-portkey-config`` (the MCPP keys forwarded)."""
    return {"x-portkey-config": json.dumps({"forward_headers": MCPP_HEADERS, **config})}
