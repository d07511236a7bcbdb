"""Apache Tephra 0.16.1, resolved and run for the compatibility tests (tests/integration/test_tephra_compat.py)."""
