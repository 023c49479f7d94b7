"""``python -m executor``: run, world, demo, agree, summary (see :mod:`executor.cli`).

The process leaves with ``os._exit`` once the command has returned, its
output is flushed, every trace is fsynced and closed and every verifier's
process group is killed: the interpreter's own teardown (numba's and LLVM's
finalizers, abandoned planner threads) can take most of a second on a loaded
machine, and a run's promise is that the process is gone within 0.5 s of its
deadline.
"""

import os
import sys

if sys.argv[1:2] == ["quote"]:  # the quote prints its header before numpy and the live executor load
    from executor.quote import main
else:
    from executor import verifiers  # noqa: F401  (loaded before the command, as it always was)
    from executor.cli import main

rc = main()

from executor import verifiers  # noqa: E402
from executor.trace import drain  # noqa: E402

try:
    sys.stdout.flush()
    sys.stderr.flush()
except (BrokenPipeError, ValueError):
    pass
drain()
verifiers.kill_all()
os._exit(rc if isinstance(rc, int) else 1)
