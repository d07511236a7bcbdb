#!/usr/bin/env bash
# The supported Python versions (`make test-pythons`, and CI): for each VERSION given (e.g. 3.12 3.13), a
# virtualenv .venv-VERSION made from pyenv's interpreter of that version (made and installed once, again when
# setup.cfg or pyproject.toml change) with the package, its test extra and the launcher; in it, the unit tests,
# then the packaging smoke test (tests/smoke.sh with that Python: the wheel built, installed into a fresh
# virtualenv and examples/quickstart.py run with it) against a real HBase ($TMS_HBASE_THRIFT, else the local
# launcher's, started with .venv's `tms-admin hbase start` if it does not run, and then stopped at the end). An
# interpreter that is missing fails the run. Leaves the virtualenvs (for the next run); the quickstart's tables
# are dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
admin=".venv/bin/tms-admin"   # `make install`'s, with the launcher
started_hbase=""
stop_hbase() { if [ -n "$started_hbase" ]; then "$admin" hbase stop; fi; }
trap stop_hbase EXIT

# The virtualenvs first, all at once and while HBase starts (mostly downloads and unpacking: pyspark and
# pyarrow are large).
interpreter_of() {
    ls -d "$pyenv_root"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -n 1 || true
}
install() {  # VERSION INTERPRETER: .venv-VERSION with the package, its test extra and the launcher
    local venv=".venv-$1"
    if [ -f "$venv/.installed" ] && [ "$venv/.installed" -nt setup.cfg ] && [ "$venv/.installed" -nt pyproject.toml ]; then
        return 0
    fi
    "$2" -m venv "$venv" &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip &&
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]' -e ./launcher &&
        touch "$venv/.installed"
}
pids=()
for version in "$@"; do
    interpreter="$(interpreter_of "$version")"
    if [ -z "$interpreter" ]; then
        echo "pythons: no Python $version under $pyenv_root/versions (pyenv install $version)" >&2
        exit 1
    fi
    echo "pythons: Python $version is $interpreter"
    install "$version" "$interpreter" >".venv-$version.install.log" 2>&1 &
    pids+=("$!")
done
# HBase meanwhile
if [ -z "${TMS_HBASE_THRIFT:-}" ]; then
    # status exits 1 unless HBase answers; only one that does not run at all is ours to stop later
    if ! { "$admin" hbase status --json || true; } | .venv/bin/python -c 'import json, sys; sys.exit(not json.load(sys.stdin)["running"])'; then
        started_hbase=1
    fi
    TMS_HBASE_THRIFT="$("$admin" hbase start --json | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["thrift"])')"
fi
export TMS_HBASE_THRIFT
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        version="${*:$((i + 1)):1}"
        cat ".venv-$version.install.log" >&2
        echo "pythons: installing into .venv-$version failed" >&2
        exit 1
    fi
done

for version in "$@"; do
    venv=".venv-$version"
    printf '\n== Python %s\n' "$version"
    "$venv/bin/python" -m pytest -p no:cacheprovider -q -n 2 tests/unit
    # the wheel, built and installed into a fresh virtualenv of this Python, runs the quickstart (tests/smoke.sh)
    if ! PYTHON="$venv/bin/python" bash tests/smoke.sh >".venv-$version.smoke.log" 2>&1; then
        cat ".venv-$version.smoke.log" >&2
        echo "pythons: the wheel's smoke test failed on Python $version" >&2
        exit 1
    fi
    echo "the wheel's smoke test (its install and the quickstart) on Python $version: passed"
done
