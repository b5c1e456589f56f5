# Ferry's two commands: `make demo` and `make test`. Both run `make setup` first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JARS := .dev/jars
MVN := mvn -B -q -f deploy/pom.xml
COPY_DEPS := org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies -DincludeScope=runtime

.PHONY: setup jars fleet-prereqs demo test lint unit integration e2e fleet up down status clean

setup: $(BIN)/.installed $(JARS)/.fetched fleet-prereqs

# docker.io, debootstrap and prometheus for the fleet tier (only what is missing).
fleet-prereqs:
	scripts/fleet-prereqs.sh

# Re-runs only when the package's metadata changed.
$(BIN)/.installed: setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# Re-runs only when the pinned Maven file changed; a second run downloads nothing.
$(JARS)/.fetched: deploy/pom.xml
	rm -rf $(JARS)/kafka $(JARS)/zookeeper $(JARS)/spark
	$(MVN) -P kafka $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/kafka
	$(MVN) -P zookeeper $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/zookeeper
	$(MVN) -P spark $(COPY_DEPS) -DoutputDirectory=$(CURDIR)/$(JARS)/spark
	touch $@

demo: setup
	$(BIN)/python scripts/demo.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy common controller worker pipeline bench fleet
	$(BIN)/lint-imports

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
	$(BIN)/ferry dev up
down:
	$(BIN)/ferry dev down
status:
	$(BIN)/ferry dev status

clean: down
	rm -rf .dev $(VENV)
