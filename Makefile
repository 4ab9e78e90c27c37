# Assent: every target documents itself; `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

export UV_PYTHON_DOWNLOADS := never
# KAFKA_BROKERS=3 makes run, test, bench and up start a cluster of three Apache Kafka brokers (default: one).
export KAFKA_BROKERS
UV := $(shell command -v uv 2>/dev/null || echo python3 -m uv)
UV_VERSION := 0.13.8

SERVICES := $(shell sed -n 's/^name = "\(.*\)"/\1/p' services.toml)
# Each owner's contract package (services/<name>/contract, imported as <name>_contract), found by pattern.
CONTRACTS := $(patsubst services/%/contract,%_contract,$(wildcard services/*/contract))

.PHONY: help uv install run test test-cluster test-containers test-k8s screenshots test-unit test-integration test-coach-ts lint format bench bench-preload bench-compare bench-profile bench-start bench-history docs docs-serve up down status images k8s contracts deploy-tools service clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

uv: ## Install uv (the package manager) if the machine lacks it
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"

# Bytecode is compiled once here: where PYTHONDONTWRITEBYTECODE is set (many images and CI runners set it), every
# process would otherwise compile every module it imports, each time it starts (2.6 s of CPU per service, not 1.1).
install: uv ## Create .venv with every package pinned in uv.lock, compiled to bytecode
	@UV_COMPILE_BYTECODE=1 $(UV) sync --frozen --all-packages --quiet
	@$(UV) run --frozen --no-sync python -m compileall -q -j0 shared/src $(wildcard services/*/src services/*/contract/src) deploy/devstack/src cli/src >/dev/null

run: install ## Run the whole system on this machine with a demo workspace and coach turn (Ctrl-C stops it)
	@$(UV) run --frozen python -m assent_devstack.run

# Two workers (pytest-xdist), each with servers and services of its own, a file at a time: a file's tests share
# what they start. TEST_WORKERS=0 runs the suite in this one process.
TEST_WORKERS ?= 2

test: install system-packages ## Run the whole test suite; starts Kafka, PostgreSQL and Redis unless endpoints are given (TEST_WORKERS=2: processes side by side)
	@$(UV) run --frozen pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) $(ARGS)

system-packages: ## Install the Debian packages the suite needs (chromium, for the console's browser tests) if missing
	@bash .ci/system-packages

test-unit: install ## Run the unit tests only (no servers)
	@$(UV) run --frozen pytest shared/tests services

test-integration: install ## Run the integration tests only (real Kafka, PostgreSQL and Redis)
	@$(UV) run --frozen pytest tests

test-coach-ts: install ## The TypeScript coach (examples/coach-ts, KafkaJS) through a whole turn against the real services, after npm ci
	@cd examples/coach-ts && npm ci --no-audit --no-fund --silent
	@$(UV) run --frozen pytest tests/test_coach_ts.py

test-cluster: install ## The Kafka cluster's longer fault scenarios (three brokers of their own: the active controller killed, a broker paused 30 s, two down 20 s) and the single-broker figures to compare with
	@ASSENT_CLUSTER_SESSIONS=100 $(UV) run --frozen pytest -m kafka_cluster tests/test_kafka_cluster.py tests/test_kafka_single_broker.py $(ARGS)

# Every service's sources and its contract's, found by pattern: a new service needs no line here.
TYPED_PATH := $(subst $(eval) ,:,shared/src deploy/devstack/src cli/src $(wildcard services/*/src services/*/contract/src))

lint: install ## Check style and lint with ruff, read the types of shared/, the CLI, the devstack, every service and every contract with mypy (strict), check the Dockerfiles with hadolint
	@$(UV) run --frozen ruff check .
	@$(UV) run --frozen ruff format --check .
	@MYPYPATH=$(TYPED_PATH) $(UV) run --frozen mypy -p assent -p assent_cli -p assent_devstack $(addprefix -p ,$(SERVICES) $(CONTRACTS))
	@$(UV) run --frozen hadolint $(wildcard services/*/Dockerfile deploy/containers/images/*/Dockerfile)

format: install ## Format the code with ruff
	@$(UV) run --frozen ruff check --fix .
	@$(UV) run --frozen ruff format .

bench: install ## Measure the approval round against raw Kafka and PostgreSQL baselines (options: ARGS="--help")
	@$(UV) run --frozen python bench/approval_round.py $(ARGS)

bench-preload: install ## The benchmark, then again after loading a million resolved requests (costs stay flat)
	@$(UV) run --frozen python bench/approval_round.py --preload 1000000 $(ARGS)

# REF is checked before anything is installed: `make bench-compare` alone says how to call it.
ifneq ($(filter bench-compare,$(MAKECMDGOALS)),)
ifeq ($(strip $(REF)),)
$(error bench-compare needs the git ref to compare with: make bench-compare REF=<branch, tag or commit> [ARGS="--help"])
endif
endif

bench-compare: install ## The benchmark on this checkout and on REF (built in a worktree of its own) in turn, in blocks: each figure's ratio new/old (make bench-compare REF=<git ref>; options: ARGS="--help")
	@UV="$(UV)" $(UV) run --frozen python bench/compare.py "$(REF)" $(ARGS)

bench-profile: install ## The benchmark, then one more run with every service sampled by py-spy: flame graphs and top entries in bench/profiles/<time>/ (options: ARGS="--help")
	@$(UV) run --frozen python bench/approval_round.py --no-replicas --profile bench/profiles/$$(date -u +%Y%m%dT%H%M%SZ) $(ARGS)

bench-start: install ## Time make run's start-up: each service's time to ready and the total to the printed curl commands (options: ARGS="--help")
	@$(UV) run --frozen python bench/start_up.py $(ARGS)

bench-history: install ## A page of history with 10 million entries in one organisation against a nearly empty one, each filter and time range (options: ARGS="--entries 1000000", ARGS="--help")
	@$(UV) run --frozen python bench/history.py $(ARGS)

docs: install ## Build the documentation site (MkDocs, Material theme) into site/, strictly: a warning or a broken link fails
	@$(UV) run --frozen mkdocs build --strict

docs-serve: install ## Serve the documentation site on http://127.0.0.1:8000 with live reload
	@$(UV) run --frozen mkdocs serve

up: install ## Start Kafka, PostgreSQL and Redis in the background (endpoints in .devstack/env)
	@$(UV) run --frozen python -m assent_devstack up --state-dir .devstack

down: install ## Stop what `make up` started
	@$(UV) run --frozen python -m assent_devstack down --state-dir .devstack

status: install ## Show whether the servers of `make up` answer
	@$(UV) run --frozen python -m assent_devstack status --state-dir .devstack

images: install ## Build each service's image from a wheelhouse made here (needs a Docker engine; BASE_IMAGE=<image> builds on another base)
	@$(UV) run --frozen python deploy/images/build.py $(if $(BASE_IMAGE),--base-image $(BASE_IMAGE))

test-containers: install system-packages ## The integration suite with Kafka, PostgreSQL, Redis and every service in containers (Debian's Docker engine; options: ARGS=)
	@bash deploy/containers/test-suite.sh $(ARGS)

screenshots: install system-packages ## Run the console's browser tests and save each page's screenshot in docs/screenshots/
	@ASSENT_SCREENSHOTS=$(CURDIR)/docs/screenshots $(UV) run --frozen pytest tests/test_console.py

k8s: install ## Render the kustomize base (deploy/k8s/base) and the Helm chart's values from services.toml
	@$(UV) run --frozen python deploy/k8s/render.py

contracts: install ## Export the AsyncAPI documents, the JSON Schemas (contracts/) and the Kafka topics (deploy/kafka) from the code
	@$(UV) run --frozen python contracts/export.py

deploy-tools: ## Build helm, kube-score and a Kubernetes control plane once per machine (into ~/.cache/assent/tools)
	@bash deploy/tools/install.sh

test-k8s: install deploy-tools ## The chart and the base on a real API server (with kwok), and the deployer's Kubernetes target
	@$(UV) run --frozen pytest tests/test_deploy_manifests.py tests/test_k8s_cluster.py tests/test_kubernetes_target.py

service: install ## Write a new service with a sample kind, taken in everywhere: make service NAME=<name> [KIND=<kind>]
	@test -n "$(NAME)" || { echo "usage: make service NAME=<name> [KIND=<kind>]" >&2; exit 2; }
	@UV="$(UV)" $(UV) run --frozen python templates/new_service.py "$(NAME)" $(if $(KIND),--kind "$(KIND)")

clean: ## Remove local state (.run, .devstack, caches, the refs' worktrees of make bench-compare)
	@for tree in .bench/compare/*/; do [ ! -d "$$tree" ] || git worktree remove --force "$$tree"; done
	rm -rf .run .devstack .pytest_cache .ruff_cache .bench
