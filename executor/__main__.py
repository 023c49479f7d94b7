"""``python -m executor``: run, world, demo, agree, summary (see :mod:`executor.cli`)."""

import sys

from executor.cli import main

sys.exit(main())
