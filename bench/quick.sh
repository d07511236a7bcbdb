#!/usr/bin/env bash
# `make bench-quick` (and CI, after `make test`): every benchmark of `python -m bench.run` once, briefly
# (`--quick`: smaller sizes, one round), and bench/gateway_cpu.py with a few calls, to check that each runs and
# its own checks hold; exits non-zero if one fails. Figures from a run on a busy machine mean nothing, and
# goals not met do not fail it. The peers (bench/peers: Kafka, NATS, Redis) are not run: `make bench-peers`.
#
# HBase: $TMS_HBASE_THRIFT if set; otherwise the local launcher's, started if it does not run (and then
# stopped again at the end). Extra arguments go to bench.run (e.g. --only fetch,consumer).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
started_hbase=""

cleanup() {
    local status=$?
    if [ -n "$started_hbase" ]; then
        "$venv/bin/tms-admin" hbase stop || true
    fi
    exit $status
}
trap cleanup EXIT

if [ -z "${TMS_HBASE_THRIFT:-}" ]; then
    # started here only if not running at all (one that runs but is slow to answer is someone else's)
    if ! "$venv/bin/python" -c 'import sys
from tms_hbase_launcher import LocalHBase
sys.exit(0 if LocalHBase(progress=lambda _m: None).status().running else 1)'; then
        "$venv/bin/tms-admin" hbase start
        started_hbase=1
    fi
fi

started=$SECONDS
failed=0
"$venv/bin/python" -m bench.run --quick "$@" || failed=1
if [ $# -eq 0 ]; then
    "$venv/bin/python" -m bench.gateway_cpu --calls 200 --rounds 1 || failed=1
    "$venv/bin/python" -m bench.gateway_cpu --kind consume --calls 20 --rounds 1 || failed=1
fi
echo "bench-quick: $((SECONDS - started)) s, load average $(cut -d' ' -f1-3 /proc/loadavg)$([ $failed = 0 ] || echo ', FAILED')" >&2
exit $failed
