# The book's two commands:  make book   and   make test   (see README.md)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MATHJAX_VERSION := 3.2.2
MATHJAX := .cache/mathjax/mathjax/es5/tex-mml-chtml.js
# hover previews of cross-references (sphinx-tippy): tippy.js and Popper, served from the build
TIPPY_VERSION := 6.3.7
POPPER_VERSION := 2.11.8
TIPPY := .cache/tippy/tippy-bundle.umd.min.js
# OpenMP threads that wait for work sleep instead of spinning: on a loaded machine a spinning
# second thread turned a 6 ms training step into 11-160 ms (one PASSIVE run: 4.5-9 ms)
export OMP_WAIT_POLICY ?= PASSIVE
# pip's configured extra indexes that do not exist on every machine print noise; drop it
PIPQUIET := grep -v "is ignored: it is neither a file nor a directory" || true

.PHONY: book test chapter bench paper setup mathjax clean list help browser lab notebook pdf
.DEFAULT_GOAL := book

## make book [J=N]           execute the chapters whose inputs changed (N at once; default: the
##                           number of cores), build _build/html
book: setup
	$(BIN)/python -m tools.book build $(if $(J),-j $(J))

## make test                 library tests, every chapter executed, strict HTML build, browser check
test: setup browser
	$(BIN)/python -m pytest

## make pdf                  the whole book as one PDF, offline (_build/pdf/rnnbook.pdf; after make book)
pdf: book browser
	$(BIN)/python -m tools.pdf

## make chapter CH=N ARGS="-p NAME VALUE ..."   re-execute one chapter with other parameters
##                           (ARGS=--parameters lists them with their ranges; ARGS=--dry-run only checks)
chapter: setup
	@test -n "$(CH)" || { echo 'usage: make chapter CH=N ARGS="-p NAME VALUE ..."  (make list: the chapters)'; exit 2; }
	$(BIN)/python -m tools.book chapter $(CH) $(ARGS)

## make list                 the chapters and their titles
list: setup
	@$(BIN)/python -m tools.book list

## make paper [EXP=NAME|chNN] [ARGS=...]   the paper-scale runs: list them, or run one and store it
paper: setup
	@if [ -z "$(EXP)" ]; then $(BIN)/python -m tools.paper list; \
	elif echo "$(EXP)" | grep -qE '^ch[0-9]+$$'; then $(BIN)/python -m tools.paper chapter $(EXP) $(ARGS); \
	else $(BIN)/python -m tools.paper run $(EXP) --progress $(ARGS); fi

## make bench [ARGS="--quick SUBJECT ..."]   speed ratios of the fast paths against their references
bench: setup
	$(BIN)/python -m benchmarks.run $(ARGS)

setup: $(STAMP) $(MATHJAX) $(TIPPY)

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

## make lab / make notebook  edit the chapters as notebooks (JupyterLab / Jupyter Notebook)
# Installed into .venv on first use (the `edit` extra).  The server's root is the repository
# (book/jupytext.toml keeps the .md round trip exact wherever a server starts) and it opens
# book/; as root Jupyter needs --allow-root, which these targets pass.  ARGS goes to Jupyter.
JUPYTER_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
EDIT_EXTRA = @$(BIN)/python -c 'import jupyterlab, notebook' 2>/dev/null || { \
	echo "make: installing JupyterLab and Jupyter Notebook into $(VENV) (pip, the 'edit' extra)"; \
	$(BIN)/python -m pip install --quiet -e '.[test,edit]' 2>&1 | { $(PIPQUIET); }; }
lab: setup
	$(EDIT_EXTRA)
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/book $(JUPYTER_ROOT) $(ARGS)

notebook: setup
	$(EDIT_EXTRA)
	$(BIN)/jupyter notebook --ServerApp.root_dir="$(CURDIR)" --JupyterNotebookApp.default_url=/tree/book $(JUPYTER_ROOT) $(ARGS)

## make help                 this list, then examples
help:
	@grep -E '^## ' $(firstword $(MAKEFILE_LIST)) | sed 's/^## /  /'
	@echo; echo 'Examples (each runs as written; tests/test_book_tool.py runs them):'
	@echo '  make chapter CH=1 ARGS="-p T_realize 16"'
	@echo '  make chapter CH=07 ARGS="-p seed 3 -p max_len 12"'
	@echo '  make chapter CH=12 ARGS=--parameters'
	@echo '  make paper'
	@echo '  make bench ARGS="--quick gated"'

# MathJax is served from the build (the book works offline): npm registry -> .cache/mathjax
mathjax: $(MATHJAX)
$(MATHJAX):
	@command -v npm >/dev/null || { echo "npm is needed to install MathJax (Debian: apt-get install npm)"; exit 2; }
	npm install --silent --no-save --no-audit --no-fund --prefix .cache/npm mathjax@$(MATHJAX_VERSION)
	rm -rf .cache/mathjax && mkdir -p .cache/mathjax/mathjax
	cp -r .cache/npm/node_modules/mathjax/es5 .cache/mathjax/mathjax/es5
	@test -f $@

# the hover previews' two scripts, from the npm registry like MathJax (the book works offline)
$(TIPPY):
	@command -v npm >/dev/null || { echo "npm is needed to install tippy.js (Debian: apt-get install npm)"; exit 2; }
	npm install --silent --no-save --no-audit --no-fund --prefix .cache/npm tippy.js@$(TIPPY_VERSION) @popperjs/core@$(POPPER_VERSION)
	rm -rf .cache/tippy && mkdir -p .cache/tippy
	cp .cache/npm/node_modules/tippy.js/dist/tippy-bundle.umd.min.js .cache/npm/node_modules/@popperjs/core/dist/umd/popper.min.js .cache/tippy/
	@test -f $@

clean:
	rm -rf _build book/[0-9][0-9]_*.ipynb
