"""Which Python runs Spark's tasks: local mode made to work out of the box, and a clear error otherwise.

PySpark starts its Python workers with ``$PYSPARK_PYTHON``, or ``python3`` from PATH: not with the
interpreter that runs the driver, which in a virtualenv is usually the one that has tms-hbase.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and Py4J's zip) first on its workers' PYTHONPATH. With
PySpark installed by pip, SPARK_HOME is the installed package, whose zip holds the same modules without
bytecode, so every worker compiles PySpark again as it starts: about 1 s of CPU, against 0.25 s importing
the installed, compiled package. A worker Spark starts on its own (not forked from its daemon: the driver's
runner of each streaming query on a Python data source) must connect back within a fixed 10 s
(``PythonWorkerFactory.createSimpleWorker``; no setting changes it in Spark 4), which a loaded machine
missed. :func:`use_current_python` therefore names a launcher that drops those two zips, when they are the
installed package's own, and runs this interpreter.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tms_hbase.errors import TmsError

PYTHON_ENV = "PYSPARK_PYTHON"


def use_current_python() -> str:
    """Make local-mode Spark start its Python workers on this interpreter (the one that has tms-hbase),
    unless ``$PYSPARK_PYTHON`` already names one. Call it before the SparkSession is created; returns
    the interpreter (or its launcher: see the module doc) the workers will run. On a cluster, install
    tms-hbase on the executors instead."""
    if PYTHON_ENV not in os.environ:
        os.environ[PYTHON_ENV] = _launcher()
    return os.environ[PYTHON_ENV]


@functools.cache
def _launcher() -> str:
    """A shell script that runs this interpreter without the installed PySpark's bytecode-less zips on
    PYTHONPATH (written once into a folder of this user's in the temp dir), or this interpreter itself
    when PySpark carries no such zips."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(z) for z in lib.glob("*.zip"))
    if not zips:
        return sys.executable
    cases = "|".join(shlex.quote(z) for z in zips)
    script = (
        "#!/bin/sh\n"
        "# Spark's Python workers (tms_hbase.spark.use_current_python): this interpreter, importing the\n"
        "# installed PySpark (compiled) instead of the same modules from its zips (compiled at every start).\n"
        "kept=\n"
        "set -f\n"
        "IFS=:\n"
        "for entry in $PYTHONPATH; do\n"
        f'    case "$entry" in {cases}) ;; *) kept="${{kept:+$kept:}}$entry" ;; esac\n'
        "done\n"
        f'PYTHONPATH="$kept" exec {shlex.quote(sys.executable)} "$@"\n'
    )
    folder = Path(tempfile.gettempdir()) / f"tms-hbase-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"spark-python-{hashlib.sha256(script.encode()).hexdigest()[:16]}"
    if not path.exists():
        partial = folder / f".{path.name}.{os.getpid()}"
        partial.write_text(script)
        partial.chmod(0o755)
        os.replace(partial, path)
    return str(path)


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
    if python in (sys.executable, _launcher()):
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
