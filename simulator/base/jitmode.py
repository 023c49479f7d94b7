"""When the keyed RNG (:mod:`simulator.base.rng`) is compiled: at import (the default), or at first use.

Its functions carry explicit signatures, so numba compiles them (or loads
them from the cache) when the module is imported: one compiled version
each, whatever calls them. Loading the first compiled code of a process
also starts numba's code generator, about a second. A process that imports
the simulator but never runs compiled code (the harness's orchestrator: it
checks settings, validates the pool, merges and analyses, while the
simulations run in shard processes) sets :data:`EAGER` to False *before* the
first import of :mod:`simulator.base.rng`; the functions are then declared
without compiling anything. Set only in the process itself (never through
the environment), so no shard, warm-up or helper process ever compiles the
RNG lazily; in a process with ``EAGER = False`` the functions cannot compile
at all, so a call there raises instead of compiling another version.
"""

EAGER = True
