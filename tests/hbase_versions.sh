#!/usr/bin/env bash
# The older HBase releases users run (`make test-hbase-versions`, and CI): for each VERSION given (e.g. 2.5.2), a
# local HBase of that release (the launcher's, its -hadoop3 jars from Maven Central, `tms-admin hbase start
# --hbase-version`) in a home of its own ($TMS_HBASE_HOME-versions/VERSION; the jars beside the default release's)
# on a free Thrift port, checked to be that release, then the integration tests of publishing, fetching,
# consumers, shared subscriptions, transactions and the sweeper against it. Each is stopped at the end whatever the
# outcome; the HBase of the default home is not touched.
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
)
home=""
stop_hbase() { if [ -n "$home" ]; then TMS_HBASE_HOME="$home" .venv/bin/tms-admin hbase stop || true; fi; }
trap stop_hbase EXIT

for version in "$@"; do
    printf '\n== HBase %s\n' "$version"
    home="$root-versions/$version"
    port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    address="$(TMS_HBASE_HOME="$home" TMS_LOCAL_THRIFT_PORT="$port" .venv/bin/tms-admin hbase start --json \
        --hbase-version "$version" | "$py" -c 'import json, sys; print(json.load(sys.stdin)["thrift"])')"
    # the release that runs, as HBase itself says it at start (not what was asked for)
    if ! grep -q "VersionInfo: HBase $version-hadoop3\$" "$home"/local/logs/hbase.log*; then
        echo "hbase-versions: the HBase at $address does not say it is $version; see $home/local/logs" >&2
        exit 1
    fi
    echo "HBase $version runs, Thrift at $address"
    TMS_HBASE_THRIFT="$address" "$py" -m pytest -p no:cacheprovider -q -n "${TEST_WORKERS:-2}" "${tests[@]}"
    stop_hbase
    home=""
done
