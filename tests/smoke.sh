#!/usr/bin/env bash
# Packaging smoke test (`make smoke`, and CI): build the sdist and the wheel (the wheel from the sdist, so a
# file missing from the sdist shows here), install the wheel with its gateway extra into a fresh virtualenv
# in a temporary directory (not editable, run from outside the source tree), and do what a new user does
# first: import the package, ask each program for --help and --version, and run examples/quickstart.py
# against a real HBase. The wheel brings neither happybase nor the local HBase launcher (launcher/, a
# distribution of its own): checked, and its `tms-admin hbase` says how to install the launcher.
#
# HBase: $TMS_HBASE_THRIFT if set; otherwise the local launcher's, started with the source tree's
# virtualenv's `tms-admin hbase start` (it has the launcher) when it does not run yet (and then stopped
# again at the end).
# Leaves nothing behind: the temporary directory, the quickstart's tables and an HBase it started go.
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$src/.venv/bin/python}"   # has `build` (the test extra) and the launcher
launcher_admin="$(dirname "$python")/tms-admin"
work="$(mktemp -d "${TMPDIR:-/tmp}/tms-smoke.XXXXXX")"
bin="$work/venv/bin"
export TMS_TABLE_PREFIX="smoke$$x$RANDOM"
started_hbase=""

step() { printf '\n== smoke: %s\n' "$*"; }

cleanup() {
    local status=$?
    set +e
    if [ -n "${TMS_HBASE_THRIFT:-}" ] && [ -x "$bin/python" ]; then
        (cd "$work" && "$bin/python" -c 'from tms_hbase import MessagingClient
with MessagingClient(timeout_seconds=60) as c: c.admin.drop_tables()') || echo "smoke: could not drop tables $TMS_TABLE_PREFIX*"
    fi
    if [ -n "$started_hbase" ]; then
        "$launcher_admin" hbase stop
    fi
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT

step "build the sdist and the wheel"
"$python" -m build --outdir "$work/dist" "$src" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
ls "$work/dist"
wheel="$(ls "$work"/dist/*.whl)"

step "the wheel's packages: every one of the source tree, under our names only"
"$python" - "$wheel" "$src" <<'EOF'
import pathlib
import sys
import zipfile

wheel, src = sys.argv[1], pathlib.Path(sys.argv[2])
# the folders and the names they install under (setup.cfg's package_dir)
folders = {"tms_hbase": "tms_hbase", "admin": "tms_hbase_admin", "compactor": "tms_hbase_sweeper", "gateway": "tms_hbase_gateway"}
names = zipfile.ZipFile(wheel).namelist()
top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
assert top == set(folders.values()), f"top-level names in the wheel: {sorted(top)}"
packed = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
for folder, name in folders.items():
    for init in (src / folder).rglob("__init__.py"):
        package = name + init.parent.as_posix().removeprefix((src / folder).as_posix())
        assert package in packed, f"{init.parent} is not in the wheel as {package} (setup.cfg's packages)"
# the web console's files are package data, served from the installed package
for asset in ("index.html", "login.html", "login.js", "console.js", "chart.js", "console.css"):
    assert f"tms_hbase_gateway/console/static/{asset}" in names, f"the console's {asset} is not in the wheel"
print("top-level:", ", ".join(sorted(top)))
EOF

step "install the wheel into a fresh virtualenv"
"$python" -m venv "$work/venv"
"$bin/python" -m pip install --quiet --disable-pip-version-check "${wheel}[gateway]"

cd "$work"   # nothing of the source tree on sys.path from here on
step "import"
"$bin/python" - <<'EOF'
import pathlib
import sys

import tms_hbase

where = pathlib.Path(tms_hbase.__file__).resolve()
assert where.is_relative_to(pathlib.Path(sys.prefix).resolve()), f"imported from {where}, not the wheel"
for data in ("py.typed", "tx/tephra.thrift"):
    assert (where.parent / data).is_file(), f"{data} missing from the wheel"
print(f"tms_hbase {tms_hbase.__version__} from {where.parent}")

import importlib.util

import tms_hbase_admin.cli
import tms_hbase_gateway.cli
import tms_hbase_sweeper.cli

for generic in ("admin", "compactor", "gateway"):
    assert importlib.util.find_spec(generic) is None, f"the wheel installs a top-level package {generic!r}"
print("programs import as tms_hbase_admin, tms_hbase_sweeper, tms_hbase_gateway; no admin, compactor, gateway")

# the library's install needs no Java tooling and no happybase: the launcher is a distribution of its own
for absent in ("happybase", "tms_hbase_launcher"):
    assert importlib.util.find_spec(absent) is None, f"the wheel's install brings {absent}"
EOF
"$bin/python" -m pip list --disable-pip-version-check --format=freeze >"$work/installed.txt"
if grep -iE '^(happybase|tms-hbase-launcher)==' "$work/installed.txt"; then
    echo "smoke: the wheel's install pulls in happybase or the launcher" >&2
    exit 1
fi
echo "installed: neither happybase nor tms-hbase-launcher"

step "tms-admin hbase without the launcher: one line and exit code 6"
code=0
"$bin/tms-admin" hbase status 2>"$work/no-launcher.txt" || code=$?
cat "$work/no-launcher.txt"
if [ "$code" -ne 6 ] || [ "$(wc -l <"$work/no-launcher.txt")" -ne 1 ] || ! grep -q 'pip install -e ./launcher' "$work/no-launcher.txt"; then
    echo "smoke: expected one line naming 'pip install -e ./launcher' and exit code 6, got exit code $code" >&2
    exit 1
fi

for program in tms-admin tms-sweeper tms-gateway; do
    step "$program --help, --version"
    "$bin/$program" --help >/dev/null
    "$bin/$program" --version
done

step "HBase"
if [ -z "${TMS_HBASE_THRIFT:-}" ]; then
    # status exits 1 unless HBase answers; only one that does not run at all is ours to stop later
    if ! { "$launcher_admin" hbase status --json || true; } | "$bin/python" -c 'import json, sys; sys.exit(not json.load(sys.stdin)["running"])'; then
        started_hbase=1
    fi
    TMS_HBASE_THRIFT="$("$launcher_admin" hbase start --json | "$bin/python" -c 'import json, sys; print(json.load(sys.stdin)["thrift"])')"
    export TMS_HBASE_THRIFT
fi
echo "Thrift at $TMS_HBASE_THRIFT${started_hbase:+ (started for the smoke test)}, table prefix $TMS_TABLE_PREFIX"

step "examples/quickstart.py"
"$bin/python" "$src/examples/quickstart.py"

step "passed"
