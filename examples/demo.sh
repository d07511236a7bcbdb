#!/usr/bin/env bash
# The tms-hbase demo: a local HBase, the tables, and a topic's life with CDAP's generation rules.
# Run it with `make demo` (which installs everything first). Safe to run again.
set -euo pipefail
export TMS_TABLE_PREFIX="${TMS_TABLE_PREFIX:-demo}"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

# The local HBase (downloads its jars with mvn on the first run); skip if TMS_HBASE_THRIFT is set.
if [ -z "${TMS_HBASE_THRIFT:-}" ]; then
  step tms-admin hbase start
fi
# One host, so writers may trust a remembered tail for 1 s; the sweeper's grace must then be >= 4 s.
step tms-admin init --tail-cache-seconds 1
step tms-admin settings
for t in demo:events demo:audit; do tms-admin topic delete "$t" >/dev/null 2>&1 || true; done  # rerunnable
step tms-admin topic create demo:events --ttl 3600 --property owner=demo
step tms-admin topic create demo:audit
step tms-admin topic list demo
step tms-admin topic update demo:events --ttl 600 --property owner=ops
step tms-admin topic get demo:events --json
step tms-admin topic delete demo:events
echo; echo "a deleted topic is gone (exit code 3):"
step tms-admin topic get demo:events || echo "exit code $?"
echo; echo "re-created, it gets the next generation:"
step tms-admin topic create demo:events
echo; echo "the same from Python:"
python - <<'PY'
from tms_hbase import MessagingClient, TopicAlreadyExists, TopicId

with MessagingClient() as client:          # address and prefix from the environment
    topic = TopicId("demo", "events")
    meta = client.get_topic(topic)
    print(f"{topic}: generation {meta.generation}, ttl {meta.ttl} s")
    try:
        client.create_topic(topic)
    except TopicAlreadyExists as err:
        print(f"create again -> {type(err).__name__}: {err}")
    print("topics in demo:", [str(t) for t in client.list_topics("demo")])
PY
echo; echo "publishing and consuming (examples/quickstart.py):"
step python "$(dirname "$0")/quickstart.py"
echo; echo "the sweeper: a grace below the installation's minimum is refused (exit code 2):"
step tms-sweeper once --grace 1 || echo "exit code $?"
echo; echo "a topic with a 1 s TTL, swept with the smallest grace this installation accepts:"
tms-admin topic delete demo:short >/dev/null 2>&1 || true
step tms-admin topic create demo:short --ttl 1
python -c "from tms_hbase import MessagingClient, TopicId
with MessagingClient() as c:
    for i in range(3): c.publish(TopicId('demo', 'short'), [b'm%d' % i])"
echo "(waiting 5.5 s: the 1 s TTL plus the 4 s grace)"; sleep 5.5
step tms-sweeper once --grace 4 2>/dev/null   # drops the two older rows; the newest is only stripped
echo
echo "HBase keeps running: 'tms-admin hbase status', 'tms-admin hbase stop' (from .venv/bin)."
