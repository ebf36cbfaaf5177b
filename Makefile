# The two commands a newcomer needs: `make demo` and `make test`. Every other target is a step
# they run; each is idempotent and prints what it does. A loop over versions stops at the first
# failure (`|| exit 1`): a shell loop's status is only its last iteration's.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
KAFKA_VERSIONS := 4.3.1 3.9.2 3.5.2 4.4.0
# Every version label the integration tests run on (kafka_fixtures.py): `make integration` fails
# unless a test passed on each, so a dropped parametrisation cannot pass unseen.
KAFKA_LABELS := $(KAFKA_VERSIONS) 3.9.2-nv 4.3.1-tv1 4.3.1-tv0
empty :=
comma := ,
# The oldest supported PySpark (pyproject: pyspark>=4.0,<4.4) in a venv of its own; $(VENV) has
# the newest, which runs every test.
PYSPARK_OLDEST := 4.0.5
OLDEST_VENV := .venv-pyspark-4.0
OLDEST_BIN := $(OLDEST_VENV)/bin
# Every package the venvs install, pinned exactly (pip constraints; `make lock` regenerates it).
LOCK := requirements/test.lock
# pytest-xdist workers for `unit` and `integration`: a pipeline run leaves about a third of the
# 2 cores idle (brokers, process starts) and a property machine uses one, so a second worker
# fills them. `unit` lets an idle worker steal queued tests (--dist worksteal): its seven
# property and seeded-bug tests take 15 to 48 s each, and with the default scheduling one
# worker ran on alone at the end (the suite 118 s against 142 and 147 s, 2026-11-28).
# `integration` gives each worker whole files (--dist loadfile), so a module's cluster starts
# once; each worker starts its own session clusters and SparkSession
# (docs/testing.md, "The suite's cost").
PYTEST_WORKERS ?= 2
# The tests' JVMs (Spark's launcher, drivers and executors, the schema registry) live seconds to
# minutes: C1 alone compiles enough for them and saves about a fifth of a pipeline run's CPU,
# and the serial collector spares the 2 cores G1's threads (a pipeline run's CPU, the whole
# machine's, 31.1 s against 29.0 s, means of three interleaved, 2026-11-29).
# JDK_JAVA_OPTIONS reaches every `java` they start (not the brokers in containers, which get the
# same two flags from integration_tests/kafka_containers.py); each then prints "NOTE: Picked up
# JDK_JAVA_OPTIONS" on stderr.
# They also start from a class-data-sharing archive of the classes a Spark driver loads
# (scripts/spark-cds.py, made with spark-home): a pipeline run took 10.1 s against 13.2 s
# without (medians of three, interleaved, 2026-11-28). A JVM whose class path or jars differ
# from the dump's (the oldest-PySpark run, a driver with S3A's class path first, a broker, a
# Kafka tool) starts without it, and -Xlog:cds=off keeps that silent.
SPARK_HOME_DIR := .cache/spark-home
SPARK_CDS := $(SPARK_HOME_DIR).jsa
CDS_QUIET := -Xlog:cds=off -Xlog:cds+dynamic=off
TEST_JVMS := JDK_JAVA_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:SharedArchiveFile=$(abspath $(SPARK_CDS)) $(CDS_QUIET)"
# The tests' Spark processes import PySpark from the venv, where its bytecode is cached, not
# from pyspark.zip (scripts/spark-home.sh): a sixth less CPU and a fifth less time a pipeline
# test. The oldest-PySpark run keeps PySpark's own layout, which users have.
TEST_PYSPARK := SPARK_HOME=$(abspath $(SPARK_HOME_DIR))
# The fault matrix's smoke case (integration_tests/sink/test_fault_matrix.py).
SMOKE_CASE := test_b_crash_after_pre_commit_before_decision

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export SPARK_LOCAL_IP ?= 127.0.0.1
export TESTCONTAINERS_RYUK_DISABLED := true
# The wheel `make wheel` builds; the auto-registration test installs it into a throwaway venv.
export KAFKA_EOS_WHEEL := $(abspath dist/kafka_eos-$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)-py3-none-any.whl)

.PHONY: demo test properties venv spark-home venv-pyspark-oldest kafka-jars spark-kafka-jars s3a-jars registry-jars \
	docker-engine images check unit integration integration-pyspark-oldest test-faults-removed \
	test-faults-removed-subset power bench stop-docker clean

demo: venv kafka-jars
	@echo "==> kafka-eos demo (embedded Kafka + Spark local[*])"
	$(BIN)/kafka-eos demo

test: venv kafka-jars spark-kafka-jars s3a-jars registry-jars images check unit-beside-oldest-venv \
	integration chaos-short integration-pyspark-oldest test-faults-removed-subset
	@echo "==> all tests passed"

# `make test` builds the oldest PySpark's venv while the unit tests run: pip mostly waits on the
# network and the disk, the unit tests on the 2 cores. The other set-up steps stay out of the
# way: beside the unit tests the CDS archive's Spark job took 2 min 19 s instead of 57 s, and
# the two together no less than one after the other (2026-11-29).
.PHONY: unit-beside-oldest-venv
unit-beside-oldest-venv: venv
	@$(MAKE) --no-print-directory -j2 unit venv-pyspark-oldest

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(LOCK)
	@echo "==> Python venv and packages ($(VENV), pinned by $(LOCK))"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade pip
	@$(BIN)/pip install -q -c $(LOCK) -e '.[test]'
	@touch $@

spark-home: $(SPARK_HOME_DIR)/.made $(SPARK_CDS)

$(SPARK_HOME_DIR)/.made: $(VENV)/.installed scripts/spark-home.sh
	@echo "==> SPARK_HOME for the tests ($(SPARK_HOME_DIR))"
	@scripts/spark-home.sh $(VENV) $(SPARK_HOME_DIR)
	@touch $@

# The archive is written when the trainer's driver JVM exits (about 30 s, 170 MB).
$(SPARK_CDS): $(SPARK_HOME_DIR)/.made scripts/spark-cds.py
	@echo "==> class-data-sharing archive for the tests' Spark JVMs ($@)"
	@rm -f $@
	@JDK_JAVA_OPTIONS="-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit=$(abspath $@) $(CDS_QUIET)" \
		SPARK_HOME=$(abspath $(SPARK_HOME_DIR)) PYTHONPATH=$(CURDIR) \
		$(BIN)/python scripts/spark-cds.py > $@.log 2>&1 || { cat $@.log; exit 1; }
	@test -s $@ || { echo "no archive at $@"; cat $@.log; exit 1; }

venv-pyspark-oldest: $(OLDEST_VENV)/.installed

$(OLDEST_VENV)/.installed: pyproject.toml $(LOCK)
	@echo "==> Python venv with the oldest supported PySpark, $(PYSPARK_OLDEST) ($(OLDEST_VENV))"
	@test -x $(OLDEST_BIN)/python || $(PYTHON) -m venv $(OLDEST_VENV)
	@$(OLDEST_BIN)/pip install -q --upgrade pip
	@grep -v '^pyspark==' $(LOCK) > $(OLDEST_VENV)/constraints.txt
	@$(OLDEST_BIN)/pip install -q -c $(OLDEST_VENV)/constraints.txt -e '.[test]' \
		'pyspark==$(PYSPARK_OLDEST)'
	@touch $@

kafka-jars:
	@echo "==> Apache Kafka jars from Maven Central ($(KAFKA_VERSIONS))"
	@for v in $(KAFKA_VERSIONS); do docker/kafka/fetch-jars.sh $$v || exit 1; done

# Spark's own Kafka connector, which the migration test runs before kafka-eos.
spark-kafka-jars:
	@echo "==> Spark's Kafka connector jars from Maven Central"
	@scripts/spark-kafka-jars/fetch.sh

# hadoop-aws and the AWS SDK modules S3A loads: the fault matrix's case on S3 (moto).
s3a-jars:
	@echo "==> S3A jars from Maven Central"
	@scripts/s3a-jars/fetch.sh

# A real schema registry for the tests (kafka_eos/cluster/registry.py): Apicurio Registry's
# server, whose API at /apis/ccompat/v7 is Confluent's.
registry-jars:
	@echo "==> Apicurio Registry server from Maven Central"
	@scripts/registry/fetch.sh

# The chaos checker's second reader: Kafka's own Java consumer (kafka-console-consumer).
kafka-tools:
	@echo "==> Apache Kafka's command-line tools from Maven Central"
	@scripts/kafka-tools/fetch.sh

# Re-resolves $(LOCK) from pyproject.toml in a throwaway venv (newest versions within its
# ranges); commit it after `make test` passes on it.
.PHONY: lock
lock:
	@echo "==> $(LOCK) from pyproject.toml"
	@rm -rf .cache/lock-venv && $(PYTHON) -m venv .cache/lock-venv
	@.cache/lock-venv/bin/pip install -q --upgrade pip
	@.cache/lock-venv/bin/pip install -q -e '.[test]'
	@sed -n '/^#/p' $(LOCK) > $(LOCK).new
	@.cache/lock-venv/bin/pip freeze --exclude-editable >> $(LOCK).new
	@mv $(LOCK).new $(LOCK) && rm -rf .cache/lock-venv

# What users install (README, "Install"): dist/kafka_eos-<version>-py3-none-any.whl.
.PHONY: wheel
wheel: venv
	@echo "==> wheel ($(KAFKA_EOS_WHEEL))"
	@rm -rf dist build
	$(BIN)/pip wheel -q --no-deps . -w dist

docker-engine:
	@echo "==> Docker engine"
	@scripts/docker-engine.sh start

images: docker-engine kafka-jars
	@echo "==> local Kafka images (no registry)"
	@for v in $(KAFKA_VERSIONS); do docker/kafka/build.sh $$v || exit 1; done

check: venv
	@echo "==> ruff"
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: venv
	@echo "==> unit tests (no broker)"
	$(BIN)/python -m pytest tests -q -n $(PYTEST_WORKERS) --dist worksteal

# Not in `make test`: the unit tests with the property tests' long search, 20,000 random
# schedules per machine where `make test` draws 2,000 (the Hypothesis profiles in
# tests/conftest.py; about 15 min).
properties: venv
	@echo "==> unit tests, the property tests' deep search"
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest tests -q -n $(PYTEST_WORKERS) --dist worksteal

integration: venv spark-home kafka-jars spark-kafka-jars s3a-jars registry-jars kafka-tools images \
		wheel
	@echo "==> integration tests (real Kafka, real Spark)"
	$(TEST_JVMS) $(TEST_PYSPARK) $(BIN)/python -m pytest integration_tests -q -rA --durations=0 --durations-min=5 \
		--ignore=integration_tests/chaos --ignore=$(WIDE_QUERY) --deselect=$(TWO_EXECUTOR_JVMS) \
		-n $(PYTEST_WORKERS) --dist loadfile \
		--kafka-versions-must-run=$(subst $(empty) $(empty),$(comma),$(KAFKA_LABELS))

# On the oldest supported PySpark: the unit tests of the files that import PySpark or the Spark
# adapter (the rest is engine-neutral; with the dev profile's random schedules, since `unit`
# searches them with the CI profile's; without the seeded-bug tests, which measure the property
# machines' power with fixed seeds, the same on every PySpark), the conformance suite and the
# fault matrix's smoke case on the default Kafka version, one file per worker (about 2 min; the
# newest PySpark runs everything in `unit` and `integration`).
# Spark's Kafka connector matching PySpark 4.0 is fetched on first use
# (kafka_eos/spark_session.py).
SPARK_FACING_UNIT_TESTS = $(sort $(shell grep -rlE 'pyspark|connectors\.spark' tests --include='test_*.py'))
integration-pyspark-oldest: venv-pyspark-oldest kafka-jars images
	@echo "==> conformance and fault-matrix smoke case on PySpark $(PYSPARK_OLDEST)"
	HYPOTHESIS_PROFILE=dev $(OLDEST_BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal \
		-k "not seeded_bug" $(SPARK_FACING_UNIT_TESTS)
	$(TEST_JVMS) PYSPARK_PYTHON=$(abspath $(OLDEST_BIN)/python) $(OLDEST_BIN)/python -m pytest -q -rA \
		-n $(PYTEST_WORKERS) --dist loadfile \
		integration_tests/test_conformance.py integration_tests/sink/test_fault_matrix.py \
		-k "test_conformance or ($(SMOKE_CASE) and $(ONE_VERSION))"

# Each fault test, run with its fault removed, must fail on an assertion of its own file (a
# timeout or a harness error does not count); the summary names the assertion that caught
# each. On one version: what a missing fault leaves does not depend on the transactions
# protocol. The whole run (about 20 min) is not in `make test`; `test-faults-removed-subset`
# is: one of FAULT_SHARDS shards of the same tests (every FAULT_SHARDS-th in collection order,
# 30 s to 1.5 min), the day's (days since 1970 modulo FAULT_SHARDS) unless FAULT_SHARD=K is given,
# so that CI runs cover every fault test within FAULT_SHARDS days.
FAULT_TESTS := $(addprefix integration_tests/sink/,test_fault_matrix.py test_sink_failures.py \
	test_broker_kills.py test_sink_auth.py test_drop_in_defaults.py \
	test_decision_pruning.py test_wide_query.py test_skipped_commit_markers.py) \
	integration_tests/chaos/test_chaos.py
FAULTS_REMOVED := $(TEST_JVMS) $(TEST_PYSPARK) KAFKA_EOS_TEST_REMOVE_FAULTS=1 $(BIN)/python -m pytest \
	-p integration_tests.faults_removed $(FAULT_TESTS) -q -rA
# The tests labelled with the default Kafka version (not its -tv or -nv variants), and those with
# no version label.
ONE_VERSION := (kafka-$(firstword $(KAFKA_VERSIONS)) and not kafka-$(firstword $(KAFKA_VERSIONS))-) or not kafka-
FAULT_SHARDS := 12
FAULT_SHARD ?= $(shell echo $$(( $$(date +%s) / 86400 % $(FAULT_SHARDS) )))

test-faults-removed: venv spark-home kafka-jars images
	@echo "==> fault tests with their faults removed: each must fail"
	$(FAULTS_REMOVED) -k "$(ONE_VERSION)"

# The wrong-password test names no fault, and the chaos run takes 5 to 7 minutes (its checker's
# power is unit-tested in tests/test_chaos_checker.py): both are left to the whole run.
test-faults-removed-subset: venv spark-home kafka-jars images
	@echo "==> fault tests with their faults removed, shard $(FAULT_SHARD) of $(FAULT_SHARDS)" \
		"(FAULT_SHARD=K picks another): each must fail"
	$(FAULTS_REMOVED) -k "($(ONE_VERSION)) and not wrong_password and not short_chaos_run" \
		--faults-shard=$(FAULT_SHARD)/$(FAULT_SHARDS)

# Not in `make test`: the source's scale test at its done-when size, 1,000,000 records (`make
# test` runs it with 100,000), and the sink's wide query (128 partitions written by 16 tasks on
# executors in JVMs of their own, killed after a decision: about 2.5 min of a CI worker). Its
# protocol is the fault matrix's (c), which `make test` runs on each transactions protocol.
# Beside it, the query of two executor JVMs killed after some EndTxns (about 1.5 min of a CI
# worker): `make test` keeps the fault matrix's (d) on both versions, the executor kill on
# `local-cluster`, and the chaos run, whose executor is a JVM of its own and whose driver kills
# land mid-EndTxn too.
WIDE_QUERY := integration_tests/sink/test_wide_query.py
TWO_EXECUTOR_JVMS := integration_tests/sink/test_sink_failures.py::test_multi_process_spark_cluster
.PHONY: scale
scale: venv spark-home kafka-jars images
	@echo "==> the source at scale: 1,000,000 records, two restarts"
	KAFKA_EOS_SOURCE_SCALE_RECORDS=1000000 $(BIN)/python -m pytest -q -rA -s \
		integration_tests/source/test_source_scale.py
	@echo "==> the sink's wide query: 128 partitions, 16 tasks, a crash after the decision"
	$(TEST_JVMS) $(TEST_PYSPARK) $(BIN)/python -m pytest -q -rA $(WIDE_QUERY) $(TWO_EXECUTOR_JVMS)

# The chaos harness's short mode (integration_tests/chaos/test_chaos.py), alone after the other
# integration tests: its four brokers and local-cluster Spark take both cores for 5 to 7 minutes,
# and beside a pytest worker it slowed the whole integration run from 18 to 35 min (2026-11-28).
chaos-short: venv spark-home kafka-jars kafka-tools
	@echo "==> chaos, short mode (docs/reliability.md)"
	$(TEST_JVMS) $(TEST_PYSPARK) $(BIN)/python -m pytest integration_tests/chaos -q -rA -s

# Not in `make test`: the chaos harness's long mode (integration_tests/chaos/, docs/reliability.md):
# 200 faults over at least 1,000,000 records on each supported Kafka version, source and sink on
# one cluster (`make test` runs the short mode, on two); about an hour a version. Every version
# runs, and a failure on one is named at the end. CHAOS_SEED replays a run; reports land in
# .cache/chaos/, job logs in the temporary directory the run prints.
CHAOS_SEED ?= $(shell date +%Y%m%d)
.PHONY: chaos chaos-short kafka-tools
chaos: venv spark-home kafka-jars kafka-tools
	@echo "==> chaos, long mode, seed $(CHAOS_SEED), Kafka $(KAFKA_VERSIONS)"
	@mkdir -p .cache/chaos
	failed=""; for version in $(KAFKA_VERSIONS); do \
		$(TEST_JVMS) $(TEST_PYSPARK) $(BIN)/python -m integration_tests.chaos.run --mode long \
			--seed $(CHAOS_SEED) --kafka-version $$version \
			--report .cache/chaos/$$version.json || failed="$$failed $$version"; \
	done; \
	if [ -n "$$failed" ]; then echo "chaos failed on:$$failed (.cache/chaos/)"; exit 1; fi

# Not in `make test`: the property machines' power. For each seeded bug, how many of seeds 0 to
# POWER_SEEDS-1 find it within the suite's budget (about 10 min at 8 seeds, 2 processes);
# docs/testing.md reports a run.
POWER_SEEDS ?= 8
POWER_JOBS ?= 2
power: venv
	@echo "==> seeded bugs: how many of $(POWER_SEEDS) seeds find each"
	$(BIN)/python scripts/seeded_power.py --seeds $(POWER_SEEDS) --jobs $(POWER_JOBS)

# Not in `make test`: measurements, not tests. Each suite rewrites its own section of
# docs/benchmarks.md (about 10 min for the pipeline, 2 min for the source, 2 min for Avro, 60 min for the
# contenders, which set up Quix Streams and PyFlink in .cache/peers on first use: 1 GB, 1 min);
# run on an idle machine.
bench: venv kafka-jars spark-kafka-jars registry-jars
	@echo "==> benchmarks (docs/benchmarks.md)"
	@$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/kafka-eos bench --suite contenders --records 1000000 --sizes 100,1000 --repeats 3 \
		--output docs/benchmarks.md
	$(BIN)/kafka-eos bench --records 100000 --batches 10 --repeats 2 --output docs/benchmarks.md
	$(BIN)/kafka-eos bench --suite source --tasks 200 --triggers 20 --repeats 3 \
		--output docs/benchmarks.md
	$(BIN)/kafka-eos bench --suite avro --records 200000 --output docs/benchmarks.md

stop-docker:
	@scripts/docker-engine.sh stop

clean:
	rm -rf $(VENV) $(OLDEST_VENV) .cache .pytest_cache .hypothesis dist build
