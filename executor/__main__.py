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

from executor import verifiers
from executor.cli import main
from executor.trace import drain

rc = main()
try:
    sys.stdout.flush()
    sys.stderr.flush()
except (BrokenPipeError, ValueError):
    pass
drain()
verifiers.kill_all()
os._exit(rc if isinstance(rc, int) else 1)
