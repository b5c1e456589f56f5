# Ferry's two commands: `make demo` and `make test`. `make test` runs `make setup` first (everything
# the tests use); `make demo` installs only what it runs: the package and the local stack's jars.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JARS := .dev/jars
MVN := mvn -B -q -f deploy/pom.xml
COPY_DEPS := org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies -DincludeScope=runtime
NATIVE_COPY := bench/native/build/ferry-native-copy
COPY_CORE := worker/copying/native/build/libferry-copy-core.so
# helm for the chart's tests (deploy/helm/ferry), built from its Go module (no other download).
HELM_VERSION := v3.19.0
HELM := .dev/bin/helm

REGISTRY := $(JARS)/registry
REGISTRY_REPO := $(JARS)/registry-m2
REGISTRY_MVN := mvn -B -q -s deploy/registry/settings.xml
REGISTRY_SOURCES := deploy/registry/pom.xml deploy/registry/settings.xml \
	$(shell find deploy/registry/config-index-deployment -type f -not -path '*/target/*' 2>/dev/null)

.PHONY: setup jars registry native fleet-prereqs demo test lint unit integration e2e fleet up down status clean

setup: $(BIN)/.installed $(JARS)/.fetched $(REGISTRY)/.built $(NATIVE_COPY) $(COPY_CORE) fleet-prereqs $(HELM)

# docker.io, debootstrap and prometheus for the fleet tier (only what is missing).
fleet-prereqs:
	scripts/fleet-prereqs.sh

# helm, built once per version through the Go module proxy (a few minutes the first time; the Go
# caches keep the modules): the marker names the version, so changing HELM_VERSION rebuilds it.
$(HELM): .dev/bin/.helm-$(HELM_VERSION)
.dev/bin/.helm-$(HELM_VERSION):
	mkdir -p .dev/bin
	GOBIN=$(CURDIR)/.dev/bin GOFLAGS=-mod=mod go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	rm -f .dev/bin/.helm-*
	touch $@

# Re-runs only when the package's metadata changed.
$(BIN)/.installed: setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# Re-runs only when the pinned Maven file changed; a second run downloads nothing.
$(JARS)/.fetched: deploy/pom.xml
	rm -rf $(JARS)/kafka $(JARS)/zookeeper $(JARS)/spark $(JARS)/kafka-3.9 $(JARS)/kafka-2.8
	$(MVN) -P kafka $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/kafka
	$(MVN) -P zookeeper $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/zookeeper
	$(MVN) -P spark $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	$(MVN) -P kafka-3.9 $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-3.9
	$(MVN) -P kafka-2.8 $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/kafka-2.8
	touch $@

# The local schema registry (Apicurio Registry 2.4.2.Final, re-packaged; see deploy/registry/pom.xml).
# Re-runs only when its build files changed; a second run builds and downloads nothing.
registry: $(REGISTRY)/.built
$(REGISTRY)/.built: $(REGISTRY_SOURCES)
	rm -rf $(REGISTRY) $(REGISTRY_REPO)
	$(REGISTRY_MVN) -f deploy/registry/config-index-deployment/pom.xml deploy \
		-Ddeployment.build.dir=$(CURDIR)/$(JARS)/registry-deployment-build \
		-DaltDeploymentRepository=ferry-local::default::file://$(CURDIR)/$(REGISTRY_REPO)
	$(REGISTRY_MVN) -f deploy/registry/pom.xml package \
		-Dregistry.build.dir=$(CURDIR)/$(REGISTRY) -Dregistry.local.repo=file://$(CURDIR)/$(REGISTRY_REPO)
	touch $@

# `ferry bench`'s native system: the ceiling's copy loop in C against the wheel's librdkafka. Only the
# benchmark uses it; rebuilt when its source or the installed packages (the library it links) changed.
native: $(NATIVE_COPY)
$(NATIVE_COPY): bench/native/copy.c scripts/build-native-copy.sh $(BIN)/.installed
	scripts/build-native-copy.sh $(BIN)/python $@

# The worker's native copy core (worker/copying/core.py): the copy loop's per-record work in C over the
# wheel's librdkafka. A worker without it copies in Python (worker.copy_core: auto).
$(COPY_CORE): worker/copying/native/copy_core.c scripts/build-native-copy.sh $(BIN)/.installed
	scripts/build-native-copy.sh $(BIN)/python $@ worker/copying/native/copy_core.c

# The demo runs neither a schema registry nor the fleet, so it sets up neither.
demo: $(BIN)/.installed $(JARS)/.fetched $(COPY_CORE)
	$(BIN)/python scripts/demo.py

# docs/configuration.md is generated from common/config/: a stale one fails here.
lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy ferry
	$(BIN)/lint-imports
	$(BIN)/python scripts/config_docs.py --check

test: lint
	$(BIN)/pytest

unit: setup
	$(BIN)/pytest -m unit
integration: setup
	$(BIN)/pytest -m integration
e2e: setup
	$(BIN)/pytest -m e2e
fleet: setup
	$(BIN)/pytest -m fleet

up: setup
	$(BIN)/ferry dev up --registries
down:
	$(BIN)/ferry dev down
status:
	$(BIN)/ferry dev status

clean: down
	rm -rf .dev $(VENV) bench/native/build worker/copying/native/build
