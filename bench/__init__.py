"""agentcore benchmarks (not part of the test suite): ``python -m bench`` runs the durable suite."""
