"""Benchmarks of tms-hbase against raw happybase on the same HBase (run: python -m bench.run)."""
