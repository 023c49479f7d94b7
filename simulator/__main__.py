"""Entry point of ``python -m simulator``."""

import sys

from simulator.cli import prewarm_groups

if __name__ == "__main__":
    prewarm_groups.start(sys.argv[1:])  # before the heavy imports: a cold start compiles on two cores
    from simulator.cli.main import main

    sys.exit(main())
