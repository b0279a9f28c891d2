# Two commands do all the set-up on a fresh machine: `make load-test` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PLAN ?= default
# Empty means the version pinned in loadtests/binaries/cache.py.
KUBE_VERSION ?=
KUBE_FLAG := $(if $(KUBE_VERSION),--kube-version $(KUBE_VERSION),)
FROM ?=
TO ?=
# load-test in CI: OUT=DIR (the results folder), REPEAT=N (runs of the plan), BASELINE=DIR (an earlier run of
# the same plan to gate on: exit 1 on a regression as on a failed SLO). With BASELINE and no REPEAT, the plan runs
# as often as a significance test needs to be able to decide (stats.samples_needed at the default alpha: 4).
OUT ?=
REPEAT ?=
BASELINE ?=
GATE_REPEAT = $$($(BIN)/python -c 'from loadtests.config.plan import REGRESSION_DEFAULTS as d; from loadtests.analysis.stats import samples_needed; print(samples_needed(d["alpha"]))')
RUN_FLAGS := $(if $(OUT),--out $(OUT),) $(if $(REPEAT),--repeat $(REPEAT),$(if $(BASELINE),--repeat $(GATE_REPEAT),)) $(if $(BASELINE),--baseline $(BASELINE),)

.PHONY: setup venv lock protos binaries browser loadbalancer postgresql load-test capacity lessons test unit-test quick-test lint benchmark upgrade-rehearsal report clean-clusters clientgo-bench

venv: $(VENV)/.installed

# The Python packages are locked: requirements.lock has the exact version of every package the suite passes with
# (pip and setuptools, the build backend, too) and the sha256 of each file PyPI has for it; requirements-otava.lock
# has Apache Otava's. The venv is built from nothing whenever a lock or pyproject.toml changes, as on a fresh
# machine, so nothing a lock dropped stays installed; `make lock` refreshes the locks.
LOCK := requirements.lock
OTAVA_LOCK := requirements-otava.lock

$(VENV)/.installed: pyproject.toml $(LOCK) $(OTAVA_LOCK)
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	@echo "installing the Python packages pinned in $(LOCK) into $(VENV) (quiet; it takes a while the first time)"
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	@# the project itself, editable: built by the locked setuptools (--no-build-isolation: no build backend
	@# fetched from the index) and with its dependencies already there from the lock (--no-deps)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r $(OTAVA_LOCK)
	@touch $@

# `make lock`: the newest versions pyproject.toml's ranges allow (its dependencies, the dev extra and the build
# backend, and pip), with the hashes of all their files, resolved by uv in a throw-away venv for CPython 3.11 on
# Linux x86_64 (this project's machines); prints the pins that changed. KEEP=1 keeps the current pins and only
# resolves what pyproject.toml added or dropped. Then `make test` (which installs the new lock) and commit both
# locks. `loadtest history` finds change points with Apache Otava's E-divisive code, which needs only numpy and
# scipy; Otava's own requirements (BigQuery, Postgres and Slack clients, an exact numpy) would clash with the
# kubernetes client's, so it is locked and installed without them, at the version OTAVA names.
UV := uv==0.13.9
OTAVA := apache-otava==0.8.0
LOCK_TARGET := --python-version 3.11 --python-platform x86_64-unknown-linux-gnu
# $(call pins,FILE): a lock's name==version lines, the names normalized (PEP 503), sorted
pins = grep -o -E '^[A-Za-z0-9._-]+==[^ ]+' $(1) | awk -F== '{n = tolower($$1); gsub(/[-_.]+/, "-", n); print n "==" $$2}' | sort
LOCK_FLAGS := $(LOCK_TARGET) --generate-hashes --custom-compile-command 'make lock' --quiet $(if $(KEEP),,--upgrade)
lock:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/venv"; "$$tmp/venv/bin/pip" install --quiet --disable-pip-version-check '$(UV)'; \
	for f in $(LOCK) $(OTAVA_LOCK); do if [ -f "$$f" ]; then cp "$$f" "$$tmp/$$f"; fi; done; \
	tools=$$($(PYTHON) -c 'import tomllib; print("pip", *tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")'); \
	printf '%s\n' "$$tools" | "$$tmp/venv/bin/uv" pip compile pyproject.toml - --extra dev $(LOCK_FLAGS) -o "$$tmp/$(LOCK)"; \
	echo '$(OTAVA)' | "$$tmp/venv/bin/uv" pip compile - --no-deps --no-annotate $(LOCK_FLAGS) -o "$$tmp/$(OTAVA_LOCK)"; \
	for f in $(LOCK) $(OTAVA_LOCK); do \
	  if [ -f "$$f" ]; then $(call pins,"$$f") > "$$tmp/before"; else : > "$$tmp/before"; fi; \
	  $(call pins,"$$tmp/$$f") > "$$tmp/after"; \
	  if cmp -s "$$tmp/before" "$$tmp/after"; then echo "$$f: no pin changed"; \
	  else echo "$$f: pins changed (- before, + now)"; diff "$$tmp/before" "$$tmp/after" | sed -n 's/^< /  - /p; s/^> /  + /p'; fi; \
	  cp "$$tmp/$$f" "$$f"; \
	done

# `make protos`: Python modules of Kubernetes's own .proto definitions (meta/v1, runtime, schema, intstr, resource,
# core/v1 and the API groups a node's agents use) at the pinned release, and Prometheus's metrics.proto (the protobuf
# form of /metrics), from Go's module cache, into loadtests/kube/pb/ (committed: a fresh clone needs
# neither). The protoc that writes them comes with the grpcio-tools that loadtests/kube/pb/generate.py names,
# installed in a throw-away venv, so the project's own venv and locks are untouched.
protos:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tools=$$(sed -n 's/^GRPCIO_TOOLS = "\(.*\)".*/\1/p' loadtests/kube/pb/generate.py); \
	$(PYTHON) -m venv "$$tmp/venv"; "$$tmp/venv/bin/pip" install --quiet --disable-pip-version-check "$$tools"; \
	PYTHONPATH=. "$$tmp/venv/bin/python" -m loadtests.kube.pb.generate

binaries: venv
	$(BIN)/loadtest setup $(KUBE_FLAG)

# $(call from_debian,COMMAND,PACKAGE,WHAT FOR[,ELSEWHERE]): Debian's package where the command is missing (from
# PATH, and from the paths ELSEWHERE names, where given) and we may install it (root, apt-get), else one line
# saying what to install and why; an install that fails (no package index reachable) is one line too, not a failed
# setup.
define from_debian
@{ command -v $(1) || $(if $(4),ls $(4),false); } >/dev/null 2>&1 || { \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
    echo "installing $(2) ($(3))"; \
    (apt-get install -y -qq $(2) >/dev/null 2>&1 || \
     (apt-get update -qq >/dev/null && apt-get install -y -qq $(2) >/dev/null)) || \
    echo "$(2) not installed: apt-get failed (no package index reachable?); install it by hand ($(3))"; \
  else echo "$(1) not found: install Debian's $(2) package ($(3))"; fi; }
endef

# Headless Chromium checks that reports render.
browser:
	$(call from_debian,chromium,chromium,report rendering tests)

# HAProxy in front of several apiservers (target.topology.apiservers > 1, loadtest up --apiservers N), as
# kubeadm's HA guide uses it.
loadbalancer:
	$(call from_debian,haproxy,haproxy,control planes with more than one apiserver)

# PostgreSQL's server for the run index's tests (tests/postgres.py starts its own in a temporary folder and skips,
# saying so, without one); Debian keeps initdb and postgres in /usr/lib/postgresql/<major>/bin, off PATH.
postgresql:
	$(call from_debian,initdb,postgresql,the run index's PostgreSQL tests,/usr/lib/postgresql/*/bin/initdb)

setup: venv binaries loadbalancer postgresql

load-test: setup
	$(BIN)/loadtest run --plan $(PLAN) $(KUBE_FLAG) $(RUN_FLAGS)

# The largest scale this machine's control plane holds under the default load, and what breaks past it.
capacity: setup
	$(BIN)/loadtest capacity --plan capacity $(KUBE_FLAG) $(if $(MAX_NODES),--max-nodes $(MAX_NODES),)

# Every lesson of the field reports at the default (medium) scale: each variant 3 times on a fresh control plane
# (a verdict needs the runs' own noise), then lesson.html per lesson. SCALE=small for a quick look; LESSON=name for
# one; REPEAT=N runs of each variant (1 shows the effect, without a verdict).
SCALE ?= medium
LESSON ?= all
lessons: setup
	$(BIN)/loadtest lesson $(LESSON) --scale $(SCALE) $(KUBE_FLAG) $(if $(OUT),--out $(OUT),) $(if $(REPEAT),--repeat $(REPEAT),)

# The suite runs on TEST_WORKERS processes (2 by default, one per core of the 2-core machine it is budgeted on);
# a test file's tests stay on one worker, so a module's shared control plane is started once. The files are handed
# out longest first, as the last recorded suite run timed them (tests/conftest.py), so both workers end together.
TEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder,)
test: setup browser
	$(BIN)/loadtest setup --previous $(KUBE_FLAG)
	$(BIN)/pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The quick tier: pure functions on recorded data (no process started, no browser, no control plane).
unit-test: venv
	$(BIN)/pytest $(PYTEST_PARALLEL) tests/unit -m "not cli and not integration"

# Quick feedback before a commit: every test of tests/unit (the CLI and browser ones too), then one end-to-end
# run of the smoke plan on a real control plane.
quick-test: setup browser
	$(BIN)/pytest $(PYTEST_PARALLEL) tests/unit tests/integration/test_run.py::test_smoke_plan_promql \
		tests/integration/test_run.py::test_smoke_plan_end_to_end

lint: venv
	$(BIN)/ruff check loadtests tests benchmarks

benchmark: setup
	$(BIN)/python benchmarks/node_ramp.py

upgrade-rehearsal: venv
	@test -n "$(FROM)" -a -n "$(TO)" || { echo "usage: make upgrade-rehearsal FROM=v1.36.3 TO=v1.37.2 [PLAN=...] [REPEAT=4]"; exit 2; }
	$(BIN)/loadtest setup --kube-version $(FROM)
	$(BIN)/loadtest setup --kube-version $(TO)
	$(BIN)/loadtest rehearse --plan $(PLAN) --from $(FROM) --to $(TO) $(if $(REPEAT),--repeat $(REPEAT),)

# the load against client-go, side by side (benchmarks/client_cost.py); ARGS: e.g. --quick
clientgo-bench: setup
	$(BIN)/python -c 'from benchmarks.client_cost import build; build()'
	flock /tmp/bench.lock $(BIN)/python benchmarks/client_cost.py $(ARGS)
