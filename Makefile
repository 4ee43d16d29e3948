# The book's two commands:  make book   and   make test   (see README.md)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MATHJAX_VERSION := 3.2.2
MATHJAX := .cache/mathjax/mathjax/es5/tex-mml-chtml.js
# OpenMP threads that wait for work sleep instead of spinning: on a loaded machine a spinning
# second thread turned a 6 ms training step into 11-160 ms (one PASSIVE run: 4.5-9 ms)
export OMP_WAIT_POLICY ?= PASSIVE
# pip's configured extra indexes that do not exist on every machine print noise; drop it
PIPQUIET := grep -v "is ignored: it is neither a file nor a directory" || true

.PHONY: book test chapter bench paper setup mathjax clean list help browser lab
.DEFAULT_GOAL := book

## make book: venv + install, execute changed chapters with papermill, build _build/html
book: setup
	$(BIN)/python -m tools.book build

## make test: library tests, every chapter executed, strict HTML build, browser check
test: setup browser
	$(BIN)/python -m pytest

## make chapter CH=01 ARGS="-p T 24": re-execute one chapter with other parameters
chapter: setup
	@test -n "$(CH)" || { echo 'usage: make chapter CH=01 ARGS="-p NAME VALUE ..."'; exit 2; }
	$(BIN)/python -m tools.book chapter $(CH) $(ARGS)

list: setup
	$(BIN)/python -m tools.book list

## make paper: list the paper-scale experiments; make paper EXP=icl ARGS="--steps N": run one
## (EXP=ch04, ch05, ch06: execute that chapter at scale="paper" and store what it glued)
paper: setup
	@if [ -z "$(EXP)" ]; then $(BIN)/python -m tools.paper list; \
	elif echo "$(EXP)" | grep -qE '^ch[0-9]+$$'; then $(BIN)/python -m tools.paper chapter $(EXP) $(ARGS); \
	else $(BIN)/python -m tools.paper run $(EXP) --progress $(ARGS); fi

## make bench: the speed benchmarks (ratios against the reference implementations)
bench: setup
	$(BIN)/python -m benchmarks.run $(ARGS)

setup: $(STAMP) $(MATHJAX)

# the Python version is checked before a venv is made; the stamp is written only after both
# installs succeeded (pip's exit status passes through the filter: pipefail)
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || { \
	  echo "make: Python 3.11 is required, $(PYTHON) is $$($(PYTHON) --version 2>&1); run make PYTHON=/path/to/python3.11"; exit 2; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@rm -f $@
	$(BIN)/python -m pip install --quiet --upgrade pip 2>&1 | { $(PIPQUIET); }
	$(BIN)/python -m pip install --quiet -e '.[test]' 2>&1 | { $(PIPQUIET); }
	@touch $@

# the browser check of make test needs Chromium: installed with apt-get where that is possible
browser:
	@[ -x "$${CHROMIUM:-/usr/bin/chromium}" ] || { \
	  if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: installing chromium (apt-get)"; apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	  else echo "make test needs Chromium: sudo apt-get install chromium (or set CHROMIUM=/path/to/chromium)"; exit 2; fi; }

## make lab: JupyterLab (installed on first use) to edit the chapters as notebooks
lab: setup
	@$(BIN)/python -c 'import jupyterlab' 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[test,edit]'
	$(BIN)/jupyter lab book/

## make help: this list
help:
	@grep -E '^## ' $(firstword $(MAKEFILE_LIST)) | sed 's/^## /  /'

# MathJax is served from the build (the book works offline): npm registry -> .cache/mathjax
mathjax: $(MATHJAX)
$(MATHJAX):
	@command -v npm >/dev/null || { echo "npm is needed to install MathJax (Debian: apt-get install npm)"; exit 2; }
	npm install --silent --no-save --no-audit --no-fund --prefix .cache/npm mathjax@$(MATHJAX_VERSION)
	rm -rf .cache/mathjax && mkdir -p .cache/mathjax/mathjax
	cp -r .cache/npm/node_modules/mathjax/es5 .cache/mathjax/mathjax/es5
	@test -f $@

clean:
	rm -rf _build book/[0-9][0-9]_*.ipynb
