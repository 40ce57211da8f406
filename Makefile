# Every target bootstraps what it needs on a fresh machine: uv (through pip when missing),
# then .venv synced exactly to uv.lock.
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
VENV := .venv
STAMP := $(VENV)/.synced-stamp
PYTEST_ARGS ?=
# MkDocs for the documentation site (mkdocs.yml), without its notice about a successor.
MKDOCS := NO_MKDOCS_2_WARNING=1 DO_NOT_TRACK=1 $(VENV)/bin/mkdocs
# The Dagster instance (run history, schedules, the pools that serialise runs on one account).
DAGSTER_HOME := $(CURDIR)/dagster_home

.PHONY: run test test-fast test-deploy lint format sync bench dagster notebook docs clean

$(STAMP): pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --locked
	@# The project's own modules compiled too (uv compiles the dependencies): every process,
	@# `tourneylake run` and each test's subprocess, starts without compiling them again.
	$(VENV)/bin/python -m compileall -q tourneylake assets pipelines
	@# The dbt manifest (`dbt parse`, offline, into the user's cache: tourneylake.tables.models)
	@# that Dagster's model assets and the docs read; parsed again once a file of sql/ is newer.
	DO_NOT_TRACK=1 $(VENV)/bin/python -m tourneylake.tables.models
	@touch $@

sync: $(STAMP)

# The last three nights (one Dagster run each): enough history for every chart of the notebook.
run: $(STAMP)
	DAGSTER_HOME=$(DAGSTER_HOME) $(VENV)/bin/tourneylake run --sandbox --watchlist watchlist.yaml --nights 3
	$(VENV)/bin/tourneylake query example

# pytest's exit code 5 (no tests collected) is non-zero, so it fails the target as it should.
# The deployment's tests (marked deploy) take minutes of their own: `make test-deploy`.
test: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup -m "not deploy" $(PYTEST_ARGS)

# The deployment run for real (marked deploy): a night on Celery workers with Redis, PostgreSQL
# and S3, a worker killed mid-night, the store's outages ridden out or failed cleanly, and the
# shards on a PostgreSQL state killed or cut off mid-night.
test-deploy: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup -m deploy $(PYTEST_ARGS)

# The inner loop: everything but the subprocess and end-to-end tests (marked slow).
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup -m "not slow" $(PYTEST_ARGS)

# ruff (lint and format), mypy (pyproject.toml's [tool.mypy]), and the documentation site built
# with warnings as errors: a broken link or anchor, or a reference that cannot be generated, fails.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(MKDOCS) build --strict --quiet

# The documentation site (mkdocs.yml), served on loopback with live reload.
docs: $(STAMP)
	$(MKDOCS) serve --dev-addr 127.0.0.1:8000

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The benchmarks' own environment (the project plus dlt and the bench server's packages): a
# sync of .venv (`make test`) would remove them under a running benchmark.
BENCH_VENV := .venv-bench
bench: $(STAMP)
	UV_PROJECT_ENVIRONMENT=$(BENCH_VENV) $(UV) sync --locked --group bench
	$(BENCH_VENV)/bin/python -m benchmarks.run

# JupyterLab (the `notebook` dependency group) on notebooks/ (player, watchlist, bill), over the
# warehouse `make run` built: each notebook finds ./data from notebooks/, where the kernel starts.
# JupyterLab refuses to run as root unless told (a container's root user).
notebook: $(STAMP)
	$(UV) sync --locked --group notebook
	$(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/player.ipynb

# workspace.yaml names the code locations and their `defs`; the warning filter hides Dagster's
# notice that `dagster dev` has a successor in the `dg` tool (which this project does not use).
dagster: $(STAMP)
	DAGSTER_HOME=$(DAGSTER_HOME) PYTHONWARNINGS='ignore:Function `dev_command` is superseded' $(VENV)/bin/dagster dev -w workspace.yaml

clean:
	rm -rf data site
	find dagster_home -mindepth 1 ! -name dagster.yaml -exec rm -rf {} +
