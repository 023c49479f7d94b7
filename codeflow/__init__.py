"""CodeFlow half of the data pipeline: LLM client, sandboxed verifier, rollout generator.

The Repo split lives here (``dataset``, ``verify``, ``generate_rollouts``); the
competition split (CodeFlow-Comp) is the sub-package :mod:`codeflow.comp`.
"""
