"""Run a console script's entry point with ``time.sleep`` working under libfaketime:
``python -m tests.verify.shim tms_hbase_sweeper.cli:main run --grace 120 ...``.

libfaketime 0.9.10 (Debian 12) breaks ``time.sleep`` when the monotonic clock is not faked (see
``worker.patch_sleep_under_faketime``); the sweeper and the transaction server sleep between rounds, so
they run through this shim when their clocks are skewed.
"""

from __future__ import annotations

import importlib
import sys

from .worker import patch_sleep_under_faketime

patch_sleep_under_faketime()  # worker applies it on import too; explicit here for readers

if __name__ == "__main__":
    target, *args = sys.argv[1:]
    module, _, func = target.partition(":")
    sys.argv = [target, *args]
    sys.exit(getattr(importlib.import_module(module), func)())
