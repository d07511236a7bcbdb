# tms-hbase developer commands. Everything runs in a virtualenv (.venv) made on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Test processes of `make test` (pytest-xdist): the tests mostly wait for HBase, processes and sleeps, so more
# than the cores; each has a table prefix of its own. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 4

.PHONY: install demo test test-slow test-all test-loaded test-secured test-unit test-pythons test-hbase-versions test-cluster cluster-start cluster-stop lint typecheck smoke bench-quick hbase-start hbase-stop bench-peers verify verify-quick verify-deps browser-deps console-screenshots clean

# gssapi (the kerberos extra, part of test's) builds against MIT Kerberos: Debian's libkrb5-dev, apt-get as root if missing.
$(VENV)/.installed: setup.cfg pyproject.toml launcher/pyproject.toml
	command -v krb5-config >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libkrb5-dev; }
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' -e ./launcher
	touch $@

install: $(VENV)/.installed  ## the package, its CLI and the test tools, into .venv
	@# Bytecode for every process the tests and benchmarks start (CLIs, daemons, workers): where the environment sets
	@# PYTHONDONTWRITEBYTECODE, each would otherwise compile the sources again (~0.1 s of CPU per CLI run).
	@$(PY) -m compileall -q -j 0 tms_hbase admin gateway compactor launcher tests bench tools >/dev/null

demo: install  ## start a local HBase and show topics working end to end
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/demo.sh

# The suite is split by the `slow` mark (tests that take minutes or start a JVM, a browser or many processes of
# their own: Spark, the launcher, the console in a browser, the kill and fault-injection tests, extra Thrift
# gateways): `make test` runs the rest, `make test-slow` the slow group, `make test-all` both in one run.
NOT_SERVERS := not cluster and not secured

test: install verify-deps browser-deps  ## the test suite but its slow group, against a real HBase (started if needed), TEST_WORKERS processes at once
	$(PY) -m pytest -n $(TEST_WORKERS) -m "not slow and $(NOT_SERVERS)" $(PYTEST_ARGS)

test-slow: install verify-deps browser-deps  ## the slow group: Spark, the launcher, the console in a browser, kill and fault tests, extra gateways
	$(PY) -m pytest -n $(TEST_WORKERS) -m "slow and $(NOT_SERVERS)" $(PYTEST_ARGS)

test-all: install verify-deps browser-deps  ## make test and make test-slow in one run
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The slow group is also the timing-sensitive one (consumers and shared subscriptions killed and stopped, Spark, the
# launcher, the console, fault injection): CI runs it under CPU load. tests/load.py's busy processes (3 a core and
# one more) hold the load average at 6 or more on 2 cores before the tests' own, for the whole run, as on a busy
# laptop or CI runner.
test-loaded: install verify-deps browser-deps  ## the slow group with the load average held at 6 or more by busy processes
	$(PY) -m tests.load -- $(PY) -m pytest -n $(TEST_WORKERS) -m "slow and $(NOT_SERVERS)" $(PYTEST_ARGS)

# The secured group (tests/integration/test_kerberos.py, test_authorization.py): a KDC (Apache Kerby's, from the HBase
# jars), a local HBase secured with it on ports of its own and a Kerberized Thrift gateway per mode (SASL auth,
# auth-int, auth-conf; SPNEGO over HTTP); another with HBase's AccessController on and an identity per role; all
# started and stopped by the tests; the shared HBase is not used.
test-secured: install  ## the client through Kerberized Thrift gateways (SASL and SPNEGO) on a secured HBase of its own
	$(PY) -m pytest -m secured -n 0 tests/integration/test_kerberos.py tests/integration/test_authorization.py $(PYTEST_ARGS)

test-unit: install  ## the unit tests only: seconds, no HBase
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# The other supported Python versions (tests/pythons.sh): a virtualenv each (.venv-3.12, .venv-3.13) from pyenv's
# interpreters, the unit tests in each, and the packaging smoke test (tests/smoke.sh: the wheel installed into a
# fresh virtualenv, the quickstart against the running HBase) with each; `make smoke` is the one on .venv's Python.
PYTHONS ?= 3.12 3.13

test-pythons: install  ## the unit tests and the wheel smoke test on Python $(PYTHONS) too (pyenv's; HBase must run)
	bash tests/pythons.sh $(PYTHONS)

# Older HBase releases (tests/hbase_versions.sh): for each, a local HBase of that release started afresh in a home
# of its own on a free port, the messaging, consumer, shared, transaction and sweeper tests against it, then
# stopped whatever the outcome (4 to 6 minutes each at load 20).
HBASE_VERSIONS ?= 2.5.2

test-hbase-versions: install  ## the core integration tests against HBase $(HBASE_VERSIONS) too (a local HBase each)
	PYTEST_ARGS='$(PYTEST_ARGS)' bash tests/hbase_versions.sh $(HBASE_VERSIONS)

# The cluster group (tests/cluster): HDFS, ZooKeeper, a master, 3 region servers and 2 Thrift gateways, each a
# JVM of its own (docs/operations.md#a-local-cluster), started for the run if not running and stopped at the end
# whatever the outcome (nothing left running); test_spark.py adds a standalone Spark master and two workers of its
# own, which its fixture stops. CLUSTER_KILLS is how many times the region-server kill test kills
# one under load (CI: 2; `make test-cluster CLUSTER_KILLS=20` is the long run). The run is bounded: SIGINT (so
# the tests' clean-ups run) after 28 minutes plus 2 a kill (32 in CI), SIGKILL 1 minute later, then the stop.
CLUSTER_KILLS ?= 2

test-cluster: install  ## faults under load on a local HBase cluster (region server kills, moves, splits, transactions, sweeper, Spark)
	TMS_CLUSTER_KILLS=$(CLUSTER_KILLS) timeout -s INT -k 60 $$((1680 + 120 * $(CLUSTER_KILLS))) \
		$(PY) -m pytest -m cluster tests/cluster $(PYTEST_ARGS); \
		status=$$?; $(VENV)/bin/tms-admin hbase cluster stop; exit $$status

cluster-start: install
	$(VENV)/bin/tms-admin hbase cluster start

cluster-stop: install
	$(VENV)/bin/tms-admin hbase cluster stop

lint: install  ## style, formatting, the asyncio interface generated from the blocking one, the bridge's rules and the layer rule of docs/architecture.md (import-linter contracts), types (mypy)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m tools.unasync --check
	$(PY) -m tools.bridge_rules
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

# mypy with the real dependencies installed (config in pyproject.toml); also the last step of `lint`.
typecheck: install  ## types only (mypy)
	$(VENV)/bin/mypy

# Builds the sdist and wheel, installs the wheel into a fresh virtualenv in a temp dir and runs the
# quickstart with it ($$TMS_HBASE_THRIFT, or the local launcher's HBase, started and stopped if needed).
smoke: install  ## the packaging check: what a user installing the wheel sees first
	bash tests/smoke.sh

# Every benchmark of bench.run once at small sizes, and bench/gateway_cpu.py briefly: they run and their checks
# hold (CI runs it after the tests); not the peers. Arguments go to bench.run, e.g. BENCH_ARGS="--only fetch".
BENCH_ARGS ?=

bench-quick: install browser-deps  ## every benchmark once, briefly (not the peers); fails if one fails
	VENV=$(VENV) bash bench/quick.sh $(BENCH_ARGS)

# The peer benchmark (bench/peers): the [peers] extra (Kafka, NATS and Redis clients, nats-server),
# Debian's redis-server (apt-get, as root) if missing; Kafka's jars come from Maven Central on the first run.
# Arguments go in PEERS_ARGS, e.g. `make bench-peers PEERS_ARGS=--quick`.
PEERS_ARGS ?=

$(VENV)/.peers: $(VENV)/.installed setup.cfg
	$(PY) -m pip install --quiet -e '.[test,peers]'
	touch $@

bench-peers: $(VENV)/.peers  ## tms-hbase side by side with Kafka, NATS JetStream and Redis Streams
	command -v redis-server >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }
	$(PY) -m bench.peers $(PEERS_ARGS)

# The fault-injection verification suite (tests/verify; not part of `make test`): real writer, reader,
# consumer, sweeper and transaction-server processes under kills, pauses, clock skew (libfaketime: Debian's
# faketime, apt-get as root if missing) and a cut-off Thrift connection; a checker over the recorded history.
# Exit code 1 on any anomaly. Arguments: VERIFY_ARGS / VERIFY_QUICK_ARGS (`python -m tests.verify --help`).
VERIFY_ARGS ?= --duration 1800
VERIFY_QUICK_ARGS ?= --duration 120 --seed 24 --max-skew 5

verify-deps:
	ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime; }

# The web console's tests (tests/integration/test_console*.py) drive Debian's headless chromium through
# chromium-driver (apt-get, as root, if missing; tests/browser.py does the same when run on their own).
browser-deps:
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

# The screenshots docs/console.md shows, taken by the console's browser test on the local HBase.
console-screenshots: install browser-deps  ## PNGs of every console screen into docs/console/
	TMS_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(PY) -m pytest tests/integration/test_console.py -n 0 -q -k "every_screen or charts or dead_letters_replayed or lists_show or overview_shows or live_tail"

verify: install verify-deps  ## the verification suite, long: 30 min with every fault kind on both orderings
	$(PY) -m tests.verify $(VERIFY_ARGS)

verify-quick: install verify-deps  ## a few minutes of the verification suite (CI runs it)
	$(PY) -m tests.verify $(VERIFY_QUICK_ARGS)

hbase-start: install
	$(VENV)/bin/tms-admin hbase start

hbase-stop: install
	$(VENV)/bin/tms-admin hbase stop

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
