"""What the verifier's reaper costs a command verdict: one command, bare and under the reaper, interleaved.

Run by hand (never in the test suite; about 10 seconds on 2 cores)::

    python -m benchmarks.bench_verifier [--runs 15] [--command 'python3 -c "import sys; sys.stdin.read()"']

Each round spawns the command twice, in turn: **bare** (a new session, the
answer on stdin, output discarded: what a verdict cost before the reaper,
without its limits) and through :func:`executor.verifiers.run_command`
(under :mod:`executor.reaper`: one more interpreter start, and as root a PID
namespace). Interleaved rounds keep the machine's load the same for both;
the medians and their difference are printed as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import statistics
import time

from executor import verifiers
from simulator.base import cliargs


async def bare(argv: list[str], answer: bytes) -> float:
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    await proc.communicate(answer)
    return time.perf_counter() - t0


async def reaped(argv: list[str], answer: str) -> float:
    t0 = time.perf_counter()
    ok, why = await verifiers.run_command(argv, answer, 30.0)
    if not ok:
        raise SystemExit(f"the command failed under the reaper: {why}")
    return time.perf_counter() - t0


async def main_async(argv: list[str], runs: int) -> dict:
    a, b = [], []
    for _ in range(runs):
        a.append(await bare(argv, b"x"))
        b.append(await reaped(argv, "x"))
    ma, mb = statistics.median(a), statistics.median(b)
    return {"runs": runs, "command": argv, "bare_ms": round(ma * 1e3, 1), "reaped_ms": round(mb * 1e3, 1),
            "extra_ms": round((mb - ma) * 1e3, 1), "load_1min": round(os.getloadavg()[0], 2),
            "root": os.geteuid() == 0}


def main() -> None:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--command", default='python3 -c "import sys; sys.stdin.read()"')
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main_async(shlex.split(args.command), args.runs))))


if __name__ == "__main__":
    main()
