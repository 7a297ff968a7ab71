# `make run` and `make test` do all the set-up: they create or reuse the lane's venv from its Python and lock file.
# The venv is rebuilt only when the lock or setup.py change (the stamp file records that); a venv outside the
# checkout (make test-current's, in its root) gets this checkout's editable install when it is used from another.
# Two lanes (lanes/pick chooses by the host and says why in one line; LANE=current|compat overrides):
#   current  TFX 1.21 / TF 2.21 on the system's Python 3.13 or 3.12, .venv-current, requirements-current.lock
#   compat   TFX 1.16 / TF 2.16 on Python 3.10 (hosts below glibc 2.38), .venv, requirements-compat.lock

ifneq ($(filter-out help clean,$(or $(MAKECMDGOALS),help)),)
LANE_PICKED := $(shell lanes/pick $(LANE))
ifeq ($(LANE_PICKED),)
$(error LANE=$(LANE) cannot run on this host (the line above says why))
endif
endif
override LANE := $(word 1,$(LANE_PICKED))
ifeq ($(LANE),current)
PYTHON ?= $(word 2,$(LANE_PICKED))
PY_VERSIONS := 3.12 3.13
VENV ?= .venv-current
else
PYTHON ?= python3.10
PY_VERSIONS := 3.10
VENV ?= .venv
endif
LOCK := requirements-$(or $(LANE),compat).lock
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed-$(word 1,$(shell printf '%s' '$(CURDIR)' | cksum))
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install venv system-deps run test test-image test-all test-fast test-current test-lane test-lanes lint docs bench bench-trainer bench-text bench-drift bench-serving bench-edge bench-tuning bench-transform-sample lock lock-compat lock-current clean help

help:
	@echo "make run        run the pipeline on the bundled Chicago taxi data (outputs under ./tfxflow_home)"
	@echo "make venv       set up the lane's venv (first time only) and print its folder: . \"\$$(make -s venv)/bin/activate\""
	@echo "make test       run every test (unit, integration, end-to-end; installs chromium for the page tests)"
	@echo "                but the step image's: make test-image (builds kubeflow/Dockerfile, runs the pipeline in it)"
	@echo "make test-all   both in one session, the image's runs filling the cores the long runs leave (CI)"
	@echo "make test-fast  run the unit tests only (no server, no TFX run: about 75 seconds)"
	@echo "make lint       ruff: lint rules and format check (settings in pyproject.toml)"
	@echo "make docs       the docs as a site in site/ (README.md, docs/, kubeflow/README.md; mkdocs.yml), built strictly"
	@echo "make bench      the whole pipeline as users run it vs. Google's taxi pipeline (3 cold runs each), re-runs, a run per\n                 task, one with the library patches off, 10x/40x/100x data; checks the goals (30-50 min); ARGS=\"--scale 1000\" adds 15M rows"
	@echo "make bench-trainer  Trainer throughput vs. Google's taxi trainer (prints a table, writes JSON)"
	@echo "make bench-text     text models: examples/s, tokens/s, FLOPs utilization, memory with/without recomputation,\n                     accuracy on Debian's package descriptions (about 15 min; ARGS=--gpu on a GPU machine),\n                     then fine-tuning MiniLM side by side with transformers on PyTorch, on the CPU (about\n                     15 min; VS_ARGS for benchmarks/text_vs_pytorch.py)"
	@echo "make bench-drift    the drift check's false refusals on resampled taxi data and its detection of real shifts"
	@echo "make bench-serving  the pushed model's latency and throughput by batch size; TF Serving batching parameters"
	@echo "make bench-edge     --tflite per task and a text model: TFLite sizes, agreement with the SavedModel, latency\n                     (about 5 min)"
	@echo "make bench-tuning   what --tune buys and costs on the taxi data: a poor learning rate and the defaults,\n                     each run untuned and tuned (about 10 min)"
	@echo "make bench-transform-sample  model quality with Transform's analysis on every training row vs. on a sample\n                     (--transform-max-rows), 3 seeds each on 20x data (about 8 min)"
	@echo "make test-current  the current lane (TFX 1.21) in a Debian 13 root where this host cannot run it (root)"
	@echo "make test-lanes    the same runs in both lanes, what they decide and make compared (LANE=compat)"
	@echo "make lock       re-resolve requirements.in into both lanes' locks (requirements-compat.lock, -current.lock)"

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
$(STAMP): $(LOCK) setup.py
	@test -x $(BIN)/python || $(if $(filter current,$(LANE)),$(PYTHON) -m venv $(VENV),$(MAKE_VENV))
	@$(BIN)/python -c 'import sys; v = "%d.%d" % sys.version_info[:2]; assert v in "$(PY_VERSIONS)".split(), v' \
	  || { echo "$(VENV) is not Python $(PY_VERSIONS) (the $(LANE) lane): remove it and run make again"; exit 1; }
	$(BIN)/python -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"
	$(BIN)/uv pip sync -q --compile-bytecode --python $(BIN)/python $(LOCK)
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps --reinstall-package tfxflow -e .
	@rm -f $(VENV)/.installed-* && touch $(STAMP)  # the editable install is this checkout's alone now

run: $(STAMP)
	$(BIN)/tfxflow run $(ARGS)

# The lane's venv folder (.venv or .venv-current), made first where missing: `. "$(make -s venv)/bin/activate"`
# puts `tfxflow` on the PATH in either lane.
venv:
	@$(MAKE) --no-print-directory LANE=$(LANE) install >&2  # set-up's output to stderr: stdout is the folder alone
	@echo $(abspath $(VENV))

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

docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not integration and not e2e" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.pipeline_benchmark $(ARGS)

bench-trainer: $(STAMP)
	$(BIN)/python -m benchmarks.trainer_throughput $(ARGS)

# The text benchmark's PyTorch reference (benchmarks/reference/torch_finetune.py) runs in its own Python 3.11 venv,
# made from the pinned requirements; the stamp's name is the file's checksum, so an edit re-installs.
TORCH_PYTHON ?= python3.11
TORCH_VENV := .venv-torch
TORCH_REQS := benchmarks/reference/requirements.txt
TORCH_STAMP := $(TORCH_VENV)/.installed-$(word 1,$(shell cksum < $(TORCH_REQS)))

$(TORCH_STAMP): $(TORCH_REQS)
	@test -x $(TORCH_VENV)/bin/python || $(TORCH_PYTHON) -m venv $(TORCH_VENV) \
	  || { echo "error: the PyTorch reference needs $(TORCH_PYTHON) (TORCH_PYTHON=... names another 3.11)" >&2; exit 1; }
	@$(TORCH_VENV)/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
	  || { echo "$(TORCH_VENV) is not Python 3.11: remove it and run make again"; exit 1; }
	$(TORCH_VENV)/bin/python -m pip install -q --disable-pip-version-check -r $(TORCH_REQS)
	@$(TORCH_VENV)/bin/python -c 'import torch; print("reference torch", torch.__version__)'
	@rm -f $(TORCH_VENV)/.installed-* && touch $@

bench-text: $(STAMP) $(TORCH_STAMP)
	$(BIN)/python -m benchmarks.text_benchmark $(ARGS)
	$(BIN)/python -m benchmarks.text_vs_pytorch --reference-python $(TORCH_VENV)/bin/python $(VS_ARGS)

bench-drift: $(STAMP)
	$(BIN)/python -m benchmarks.drift_calibration $(ARGS)

bench-serving: $(STAMP)
	$(BIN)/python -m benchmarks.serving_benchmark $(ARGS)

bench-edge: $(STAMP)
	$(BIN)/python -m benchmarks.edge_benchmark $(ARGS)

bench-tuning: $(STAMP)
	$(BIN)/python -m benchmarks.tuning_benchmark $(ARGS)

bench-transform-sample: $(STAMP)
	$(BIN)/python -m benchmarks.transform_sample $(ARGS)

# Both lanes' locks from one requirements.in (its markers choose per lane): compat for Python 3.10 on glibc 2.36,
# current for Python 3.12 and 3.13 on Linux (one lock for both: where they differ, a marker says so). The lock
# in place is the resolver's preference (-o): a changed requirement moves what it must and nothing else;
# `make lock UPGRADE=1` takes the newest of everything.
LOCK_FLAGS = --no-header --no-annotate --override requirements-overrides.txt $(if $(UPGRADE),--upgrade)
lock: lock-compat lock-current

lock-compat:
	$(BIN)/uv pip compile --python-version 3.10 --python-platform x86_64-manylinux_2_36 $(LOCK_FLAGS) \
	  requirements.in -o requirements-compat.lock
	sed -i '/^-e /d' requirements-compat.lock

lock-current:
	$(BIN)/uv pip compile --universal --python-version 3.12 $(LOCK_FLAGS) requirements.in -o requirements-current.lock
	sed -i '/^-e /d' requirements-current.lock

# The current lane where this host cannot run it (glibc < 2.38): in a Debian 13 root made with debootstrap from
# Debian's archive, kept under ~/.cache/tfxflow/lanes (about 5 minutes the first time), entered with chroot as
# root. It runs the unit tier and the tests marked current_lane (pytest.ini) with LANE=current.
# The lanes side by side (the compat lane's session; the current lane natively or in make test-current's root):
# the same three runs in each (tests/lane_record.py), what they decide and make compared (tests/test_lanes_agree.py).
test-lanes: $(STAMP)
	$(BIN)/python -m pytest -m lanes $(PYTEST_ARGS)

test-current:
	lanes/debian13 make LANE=current VENV=/opt/tfxflow/venv-current test-lane PYTEST_ARGS="$(PYTEST_ARGS)"

# The current lane's share of the suite, run where the lane runs (a Debian 13 host, or make test-current's root).
test-lane: $(STAMP)
	$(BIN)/python -m pytest -m "(not integration and not e2e and not image) or current_lane" $(PYTEST_ARGS)

clean:
	rm -rf .venv .venv-current .venv-torch tfxflow_home .pytest_cache
