"""MCPP simulator: DAG pools, a numba-jitted episode simulator, baselines and MCPP."""

__version__ = "0.1.0"
