#!/usr/bin/env bash
# The older HBase releases users run (`make test-hbase-versions`, and CI): for each VERSION given (e.g. 2.5.2), a
# local HBase of that release (the launcher's, its -hadoop3 jars from Maven Central, `tms-admin hbase start
# --hbase-version`) in a home of its own ($TMS_HBASE_HOME-versions/VERSION, started afresh; the jars beside the
# default release's) on a free Thrift port, checked to be that release, then the integration tests of publishing
# and fetching, consumers, shared subscriptions, transactions and the sweeper (regions split and major-compacted
# too): together they make every Thrift call the library makes. The tests get $PYTEST_ARGS and $TEST_WORKERS
# processes (2). Whatever the outcome (a failure, an interrupt, SIGTERM), the tests are stopped and then the HBase;
# the HBase of the default home is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
py=".venv/bin/python"
root="${TMS_HBASE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/tms-hbase}"
export TMS_HBASE_JARS="${TMS_HBASE_JARS:-$root/jars}"
tests=(
    tests/integration/test_messaging.py
    tests/integration/test_consumer.py
    tests/integration/test_shared.py
    tests/integration/test_tx_messaging.py
    tests/integration/test_sweeper.py
    tests/integration/test_sweeper_regions.py
)
read -ra pytest_args <<<"${PYTEST_ARGS:-}"
home=""
tests_pid=""
stop_hbase() { if [ -n "$home" ]; then TMS_HBASE_HOME="$home" .venv/bin/tms-admin hbase stop || true; fi; }
finish() {
    # pytest runs in the background (so that a signal reaches this script at once): stop it before its server
    if [ -n "$tests_pid" ] && kill -0 "$tests_pid" 2>/dev/null; then
        kill -TERM "$tests_pid" 2>/dev/null || true
        wait "$tests_pid" 2>/dev/null || true
    fi
    stop_hbase
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for version in "$@"; do
    printf '\n== HBase %s\n' "$version"
    home="$root-versions/$version"
    # a fresh start: whatever an earlier run left there (a JVM it could not stop, tables, logs) goes first, so the
    # version check reads this start's log and HBase does not first reassign the regions of old tables
    TMS_HBASE_HOME="$home" .venv/bin/tms-admin hbase stop >/dev/null
    rm -rf "$home/local/data" "$home/local/logs"
    port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    address="$(TMS_HBASE_HOME="$home" TMS_LOCAL_THRIFT_PORT="$port" .venv/bin/tms-admin hbase start --json \
        --hbase-version "$version" | "$py" -c 'import json, sys; print(json.load(sys.stdin)["thrift"])')"
    # the release that runs, as HBase itself says it at start (not what was asked for)
    if ! grep -q "VersionInfo: HBase $version-hadoop3\$" "$home"/local/logs/hbase.log*; then
        echo "hbase-versions: the HBase at $address does not say it is $version; see $home/local/logs" >&2
        exit 1
    fi
    echo "HBase $version runs, Thrift at $address"
    # The region splitter (tests/hbase_admin.py) reaches this HBase through its ZooKeeper with its release's jars.
    zk_port="$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["zk_port"])' "$home/local/state.json")"
    TMS_HBASE_THRIFT="$address" TMS_TEST_HBASE_ZK_PORT="$zk_port" TMS_HBASE_VERSION="$version" \
        "$py" -m pytest -p no:cacheprovider -q -n "${TEST_WORKERS:-2}" "${pytest_args[@]}" "${tests[@]}" &
    tests_pid=$!
    wait "$tests_pid"
    tests_pid=""
    stop_hbase
    home=""
done
