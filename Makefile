# continuity.artemis — one entry point for set-up, the lab, the tests and the demo.
# Every target installs what it needs; a second run reuses .venv and the downloaded Artemis distribution.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT        := $(abspath .)
PYTHON      ?= python3
VENV        := $(ROOT)/.venv
PY          := $(VENV)/bin/python
BUILD       := $(ROOT)/build
COLL_ROOT   := $(BUILD)/collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/continuity/artemis
REQS        := requirements/controller.txt requirements/test.txt requirements/constraints.txt
STAMP       := $(VENV)/.installed
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export PATH := $(VENV)/bin:$(PATH)
export PYSPARK_PYTHON := $(PY)

.PHONY: help venv collection lint sanity unit test-lab test-integration test-pipeline test-agent \
        test-traffic molecule schemas plugin venv-oldest awx-collection ee-context test-plugin test lab-up lab-down demo bench build constraints system-deps clean pipeline-prepare

help:
	@echo "make demo   - set up everything, bring up the two-site lab and run a DR rehearsal"
	@echo "make test   - set up everything and run every test layer (what CI runs)"
	@echo "other: lab-up lab-down bench build lint sanity unit plugin test-lab test-integration"
	@echo "       test-pipeline test-agent test-traffic molecule pipeline-prepare constraints awx-collection ee-context clean"
	@echo "make record - record the unit tests' Jolokia answers from a private real lab (RECORD_VERSION=$(RECORD_VERSION))"

# --- environment --------------------------------------------------------------------------
# The tools are Python distributions (agent/, traffic/, pipeline/, lab/ each with a pyproject.toml), installed
# editable so the checkout's code runs.
TOOLS       := agent traffic pipeline lab
$(STAMP): $(REQS) $(TOOLS:%=%/pyproject.toml)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required, found " + sys.version' 
	@command -v java >/dev/null || { echo "Java 17+ is required (PySpark): apt-get install openjdk-17-jre-headless"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip wheel
	$(PY) -m pip install -q -r requirements/controller.txt -r requirements/test.txt -c requirements/constraints.txt \
	  -e ./agent -e ./traffic -e './pipeline[spark]' -e ./lab
	touch $@

# The tools import the collection's core as ansible_collections.continuity.artemis: the collection is installed
# where Python (and ansible-core's sys.path scan) finds `ansible_collections`, the venv's site-packages. For
# development that install is a link to this checkout, like `pip install -e` (docs/architecture.md). ansible-test
# needs the checkout under a path ending in ansible_collections/continuity/artemis as well: build/collections.
$(COLL_LINK):
	mkdir -p $(dir $@)
	ln -sfn $(ROOT) $@

$(VENV)/.collection-link: $(STAMP) scripts/link-collection.sh | $(COLL_LINK)
	bash scripts/link-collection.sh $(PY)
	touch $@

venv: $(STAMP) $(VENV)/.collection-link
collection: venv

constraints: $(STAMP)
	{ echo '# Exact versions the suite is tested with (pip freeze of a working .venv). Regenerate: make constraints'; \
	  $(PY) -m pip freeze --exclude-editable; } > requirements/constraints.txt

# The oldest ansible-core the collection claims (meta/runtime.yml requires_ansible) in its own venv, for
# tests/lab/test_oldest_ansible.py.
VENV_OLDEST := $(BUILD)/venv-oldest-ansible
$(VENV_OLDEST)/.installed: requirements/oldest-ansible.txt lab/pyproject.toml scripts/link-collection.sh
	test -x $(VENV_OLDEST)/bin/python || $(PYTHON) -m venv $(VENV_OLDEST)
	$(VENV_OLDEST)/bin/python -m pip install -q --upgrade pip
	$(VENV_OLDEST)/bin/python -m pip install -q -r requirements/oldest-ansible.txt -e ./lab
	bash scripts/link-collection.sh $(VENV_OLDEST)/bin/python
	touch $@
venv-oldest: $(VENV_OLDEST)/.installed

# --- tests --------------------------------------------------------------------------------
# awx.awx for extensions/awx (AWX as code) and its lint: from the hash-pinned wheel in requirements/awx.txt.
AWX_COLL := $(COLL_ROOT)/ansible_collections/awx/awx/MANIFEST.json
$(AWX_COLL): requirements/awx.txt scripts/awx_collection.py | $(STAMP)
	$(PY) scripts/awx_collection.py --dest $(COLL_ROOT)
	touch $@
awx-collection: $(AWX_COLL)

lint: venv awx-collection
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ansible-lint --profile production --offline

sanity: venv schemas system-deps
	bash tests/sanity/run.sh

# The broker.xml schemas of the supported versions, from the Artemis jars on Maven Central (sha512 pinned).
schemas: venv
	$(PY) -m continuity_lab.schemas --out $(BUILD)/schemas --downloads $(BUILD)/downloads

# Two pytest-xdist workers: the unit tests are CPU-bound and share nothing (902 tests: 101 s against 150 s in one
# process, 2026-11-27, benchmarks/README.md).
UNIT_WORKERS ?= 2
unit: venv schemas awx-collection
	bash tests/run-pytest.sh unit -n $(UNIT_WORKERS) tests/unit

test-lab: venv plugin venv-oldest
	bash tests/run-pytest.sh lab tests/lab

# The integration layer: its composition (what runs alone, the queue of the rest over two slots, longest first)
# lives in tests/integration/run-queue.sh, which says why. Measured: benchmarks/README.md ("make test", "The
# integration layer in streams", "Where the fault suites' CPU goes").
test-integration: venv system-deps plugin pipeline-prepare
	ALSO_QUEUE="$(ALSO_QUEUE)" bash tests/integration/run-queue.sh

test-pipeline: venv system-deps pipeline-prepare
	bash tests/run-pytest.sh pipeline tests/pipeline

# The driver JVM's class data sharing archive (~/.cache/continuity-pipeline; docs/pipeline.md): written once per
# JVM and PySpark installation, mapped by every later pipeline run (the demo's, the tests', the benchmarks').
# Without it runs only start slower, so a failure here warns and goes on (test_class_archive.py still fails).
pipeline-prepare: venv
	PYSPARK_PYTHON=$(PY) $(PY) -m continuity_pipeline prepare --quiet || \
	  echo "warning: no class archive was written (above); pipeline runs work without it, only slower"

test-agent: venv system-deps plugin
	bash tests/run-pytest.sh agent tests/agent

test-traffic: venv plugin
	bash tests/run-pytest.sh traffic tests/traffic

molecule: venv plugin
	bash tests/molecule.sh

# The continuity broker plugin (Java 17, Maven; dependencies cached in build/m2): build the jar and run its JUnit
# tests against embedded Artemis brokers.
plugin:
	mvn -B -q -f plugin/pom.xml -Dmaven.repo.local=$(BUILD)/m2 package

test-plugin: plugin

# Every layer. Side by side first: lint, sanity, the plugin's build, the unit and the pipeline layers (nothing in them
# is timed; sanity's first run mostly waits on pip, which left the 2 cores half idle for ~3-4 min while unit and the
# pipeline layer, 1.74 and 1.76 cores alone, ran later by themselves; -O prints each target's output whole when it
# ends). Then one after the other: the lab and traffic layers (the WAN link's latencies and the traffic tool's rates
# are measured), integration (its own queue) with the agent layer and molecule as the queue's last streams (alone
# they kept the 2 cores half idle: 1.00 and 1.31 cores for ~190 and ~160 s). The first step built the plugin and ran
# its JUnit suite: the others take it as made (-o plugin) instead of running it again.
test:
	$(MAKE) --no-print-directory -j5 -O lint sanity test-plugin unit test-pipeline
	$(MAKE) --no-print-directory -o plugin test-lab test-traffic
	$(MAKE) --no-print-directory -o plugin test-integration ALSO_QUEUE="agent tests/agent;molecule: bash tests/molecule.sh"
	@echo "make test: every layer passed"

# --- lab: real Apache Artemis (Maven Central, cached in build/downloads) deployed by the collection ---------
lab-up: venv plugin
	bash lab/lab-up.sh

lab-down: venv
	bash lab/lab-down.sh

# Raw Jolokia exchanges of a private lab (its own root, a free port block; stopped afterwards) for the unit tests:
# tests/unit/fixtures/recorded/<version>/ (docs/lab.md, "Recorded answers").
RECORD_VERSION ?= $(or $(LAB_ARTEMIS_VERSION),2.44.0)
.PHONY: record
record: venv plugin
	$(PY) -m continuity_lab.record --version $(RECORD_VERSION) \
	  --out $(ROOT)/tests/unit/fixtures/recorded/$(RECORD_VERSION)

# --- the main job ------------------------------------------------------------------------
demo: venv plugin pipeline-prepare
	bash scripts/demo.sh

bench: venv plugin pipeline-prepare
	bash benchmarks/run.sh

build: venv
	mkdir -p $(BUILD)/galaxy
	$(VENV)/bin/ansible-galaxy collection build --force --output-path $(BUILD)/galaxy .

# The execution environment's build context (extensions/ee/execution-environment.yml next to the tarball), for
# `ansible-builder build -f build/ee/execution-environment.yml -c build/ee/context` on a machine with podman/docker.
ee-context: build
	rm -rf $(BUILD)/ee && mkdir -p $(BUILD)/ee
	cp extensions/ee/execution-environment.yml $(BUILD)/galaxy/continuity-artemis-$$($(PY) -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])').tar.gz $(BUILD)/ee/
	$(VENV)/bin/ansible-builder create -f $(BUILD)/ee/execution-environment.yml -c $(BUILD)/ee/context

# Debian packages the tests use: Chromium opens the HTML report, promtool (package prometheus) checks the
# alert rules, the agent role test runs the agent with the system python3, and ansible-test sanity runs shellcheck.
SYSTEM_PACKAGES := chromium prometheus python3-prometheus-client python3-yaml shellcheck
system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "as root: apt-get install$$missing"; exit 1; fi; \
	  echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

clean:
	bash lab/lab-down.sh 2>/dev/null || true
	rm -rf $(BUILD) .pytest_cache .ruff_cache
