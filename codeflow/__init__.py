"""CodeFlow half of the data pipeline: LLM client, sandboxed verifier, rollout generator."""
