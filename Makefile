# `make run` and `make test` do all the set-up: they create or reuse .venv from python3.10 and the lock file.
# The venv is rebuilt only when requirements.lock or setup.py change (the stamp file records that).

PYTHON ?= python3.10
VENV ?= .venv
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install system-deps run test test-image test-all test-fast lint bench bench-trainer bench-text bench-drift bench-serving bench-transform-sample lock clean help

help:
	@echo "make run        run the pipeline on the bundled Chicago taxi data (outputs under ./tfxflow_home)"
	@echo "make test       run every test (unit, integration, end-to-end; installs chromium for the page tests)"
	@echo "                but the step image's: make test-image (builds kubeflow/Dockerfile, runs the pipeline in it)"
	@echo "make test-all   both in one session, the image's runs filling the cores the long runs leave (CI)"
	@echo "make test-fast  run the unit tests only (no server, no TFX run: about 75 seconds)"
	@echo "make lint       ruff: lint rules and format check (settings in pyproject.toml)"
	@echo "make bench      the whole pipeline as users run it vs. Google's taxi pipeline (3 cold runs each), re-runs, a run per\n                 task, 100x data; checks the goals (25-45 min); ARGS=\"--scale 1000\" adds 15M rows"
	@echo "make bench-trainer  Trainer throughput vs. Google's taxi trainer (prints a table, writes JSON)"
	@echo "make bench-text     text models: examples/s, tokens/s, FLOPs utilization, memory with/without recomputation,\n                     accuracy on Debian's package descriptions (about 15 min; ARGS=--gpu on a GPU machine)"
	@echo "make bench-drift    the drift check's false refusals on resampled taxi data and its detection of real shifts"
	@echo "make bench-serving  the pushed model's latency and throughput by batch size; TF Serving batching parameters"
	@echo "make bench-transform-sample  model quality with Transform's analysis on every training row vs. on a sample\n                     (--transform-max-rows), 3 seeds each on 20x data (about 8 min)"
	@echo "make lock       re-resolve requirements.in into requirements.lock"

install: $(STAMP)

# The venv's Python: $(PYTHON) where the machine has it; else uv installs Python 3.10 (`uv python install`, with the
# uv pinned above: the one on the PATH, else one from PyPI in a scratch folder) and says so. Where the download
# cannot happen, one line says what to install, and no half-made venv or scratch folder is left.
define MAKE_VENV
if $(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then \
  $(PYTHON) -m venv $(VENV); \
else \
  echo "$(PYTHON) is not on this machine: installing Python 3.10 with uv (uv python install 3.10)"; \
  scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT && \
  uv=$$(command -v uv || true) && \
  if [ -z "$$uv" ]; then \
    { python3 -m venv "$$scratch/uv" && "$$scratch/uv/bin/python" -m pip install -q --disable-pip-version-check \
      "uv==$(UV_VERSION)"; } >"$$scratch/log" 2>&1 && uv="$$scratch/uv/bin/uv" || \
    { echo "error: $(PYTHON) is not on this machine and uv could not be installed to get it ($$(tail -n 1 "$$scratch/log")):" \
      "install Python 3.10 (pyenv install 3.10, or your system's python3.10 package), then run make again" >&2; exit 1; }; \
  fi && \
  if ! "$$uv" python install 3.10 >"$$scratch/log" 2>&1; then \
    echo "error: $(PYTHON) is not on this machine and uv could not download it ($$(grep -m1 -o 'Failed to download.*' \
      "$$scratch/log" || head -n 1 "$$scratch/log"): $$(tail -n 1 "$$scratch/log" | sed 's/^ *cause: //')):" \
      "install Python 3.10 (pyenv install 3.10, or your system's python3.10 package), then run make again" >&2; \
    exit 1; \
  fi && \
  { "$$("$$uv" python find 3.10)" -m venv $(VENV) || { rm -rf $(VENV); exit 1; }; }; \
fi
endef

# setup.py lists the packages; a new package folder needs a re-install of the editable project.
# --compile-bytecode: every process that imports TensorFlow, TFX and Beam would otherwise compile their sources
# again (about 7 s each) where PYTHONDONTWRITEBYTECODE is set or site-packages is read-only.
$(STAMP): requirements.lock setup.py
	@test -x $(BIN)/python || $(MAKE_VENV)
	@$(BIN)/python -c 'import sys; assert sys.version_info[:2] == (3, 10), "need Python 3.10, got " + sys.version' \
	  || { echo "$(VENV) is not Python 3.10: remove it and install python3.10 (pyenv: see .python-version)"; exit 1; }
	$(BIN)/python -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"
	$(BIN)/uv pip sync -q --compile-bytecode --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps --reinstall-package tfxflow -e .
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/tfxflow run $(ARGS)

# What the tests start besides Python, from Debian's packages, installed once where missing: headless Chromium
# renders the run page (tests/browser.py); PostgreSQL's server binaries and openssl make the team MLflow servers
# (tests/helpers.py's PostgresServer, TlsFiles); buildah and debootstrap build the step image (tests/image.py).
SYSTEM_PACKAGES = $(if $(shell command -v chromium),,chromium) \
  $(if $(shell command -v initdb || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null),,postgresql) \
  $(if $(shell command -v openssl),,openssl) \
  $(if $(shell command -v buildah),,buildah) \
  $(if $(shell command -v debootstrap),,debootstrap)

system-deps:
	@test -z "$(strip $(SYSTEM_PACKAGES))" || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(strip $(SYSTEM_PACKAGES)); \
	  else echo "the tests need Debian's $(strip $(SYSTEM_PACKAGES)): sudo apt-get install -y $(strip $(SYSTEM_PACKAGES))"; \
	    exit 1; fi; }

test: $(STAMP) system-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The step image (kubeflow/Dockerfile) built on a stand-in base and the compiled pipeline run in it: root,
# buildah and debootstrap; the first build downloads the lock's packages (minutes), later ones reuse its layers.
test-image: $(STAMP) system-deps
	$(BIN)/python -m pytest -m image $(PYTEST_ARGS)

# Every test of both in one pytest session (what .ci/run runs): the image's tests run after the session's other
# tests and before those that wait for the pool of long runs, so its two runs use the cores the pool leaves.
test-all: $(STAMP) system-deps
	$(BIN)/python -m pytest -m "image or not image" $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not integration and not e2e" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.pipeline_benchmark $(ARGS)

bench-trainer: $(STAMP)
	$(BIN)/python benchmarks/trainer_throughput.py --out benchmarks/results/trainer-$$(date +%Y%m%d).json

bench-text: $(STAMP)
	$(BIN)/python -m benchmarks.text_benchmark $(ARGS)

bench-drift: $(STAMP)
	$(BIN)/python -m benchmarks.drift_calibration $(ARGS)

bench-serving: $(STAMP)
	$(BIN)/python -m benchmarks.serving_benchmark $(ARGS)

bench-transform-sample: $(STAMP)
	$(BIN)/python -m benchmarks.transform_sample $(ARGS)

lock:
	$(BIN)/uv pip compile --python-version 3.10 --python-platform x86_64-manylinux_2_36 --no-header --no-annotate \
	  --override requirements-overrides.txt requirements.in | grep -v '^-e ' > requirements.lock

clean:
	rm -rf $(VENV) tfxflow_home .pytest_cache
