"""``python -m poolbuild.synthetic``: the command line of :mod:`poolbuild.synthetic.cli`."""

import sys

from poolbuild.synthetic.cli import main

sys.exit(main())
