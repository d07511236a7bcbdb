"""Which Python runs Spark's tasks: local mode made to work out of the box, and a clear error otherwise.

PySpark starts its Python workers with ``$PYSPARK_PYTHON``, or ``python3`` from PATH: not with the
interpreter that runs the driver, which in a virtualenv is usually the one that has tms-hbase.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import Any

from tms_hbase.errors import TmsError

PYTHON_ENV = "PYSPARK_PYTHON"


def use_current_python() -> str:
    """Make local-mode Spark start its Python workers on this interpreter (the one that has tms-hbase),
    unless ``$PYSPARK_PYTHON`` already names one. Call it before the SparkSession is created; returns
    the interpreter the workers will run. On a cluster, install tms-hbase on the executors instead."""
    return os.environ.setdefault(PYTHON_ENV, sys.executable)


def check_workers(spark: Any) -> None:
    """In local mode, fail fast with a clear error when Spark's Python workers cannot import tms-hbase
    (PySpark starts them with ``$PYSPARK_PYTHON`` or ``python3`` from PATH, not with the driver's Python).
    ``spark`` is a SparkSession or a SparkContext."""
    context = getattr(spark, "sparkContext", spark)
    if not str(context.master).startswith("local"):
        return
    reason = _worker_import_error(str(context.pythonExec))
    if reason:
        raise TmsError(
            f"Spark's Python workers run {context.pythonExec!r}, which cannot import tms_hbase ({reason}); "
            "call tms_hbase.spark.use_current_python() before creating the SparkSession, or set PYSPARK_PYTHON "
            "to an interpreter that has tms-hbase installed"
        )


@functools.cache
def _worker_import_error(python: str) -> str | None:
    """Why ``python`` cannot import the packages a Spark task needs (None if it can); checked once per interpreter."""
    if python == sys.executable:
        return None
    executable = shutil.which(python)
    if executable is None:
        return "no such interpreter"
    try:
        done = subprocess.run(
            [executable, "-c", "import thriftpy2, pyarrow, tms_hbase"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else f"exit code {done.returncode}")
