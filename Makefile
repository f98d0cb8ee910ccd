# The two commands: `make test` and `make serve`. Everything else is set up by them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-shuffled test-leaks check serve lint typecheck unit bench bench-quick docs clean

# The venv's packages are installed by uv, from the package index (through uv's cache), in
# a fraction of pip's time: uv is put into the venv by the interpreter's own pip, and pip
# by uv with the rest (tests install into venvs of their own with it), so that the venv is
# made without pip (its ensurepip took 4 s of CPU); an interpreter without a pip that can
# install into another environment (pip 22.3 or later) gets the venv's own pip for it. Where
# uv cannot be had, pip installs everything, as before.
EXTRAS := .[test,all,docs]
UV_IN_VENV := --quiet --disable-pip-version-check uv
$(STAMP): pyproject.toml
	$(PYTHON) -m venv --without-pip $(VENV)
	{ { $(PYTHON) -m pip --python $(BIN)/python install $(UV_IN_VENV) 2>/dev/null \
	      || { $(BIN)/python -m ensurepip --default-pip >/dev/null \
	           && $(BIN)/python -m pip install $(UV_IN_VENV); }; } \
	    && $(BIN)/uv pip install --quiet --python $(BIN)/python pip -e '$(EXTRAS)'; } \
	  || { echo 'uv could not install the packages: pip installs them'; \
	       $(BIN)/python -m ensurepip --upgrade --default-pip >/dev/null \
	       && $(BIN)/python -m pip install --quiet --upgrade pip \
	       && $(BIN)/python -m pip install --quiet -e '$(EXTRAS)'; }
	touch $(STAMP)

# The suite runs on TEST_WORKERS processes (pytest-xdist). Tests that bind the fixed port-80
# addresses hold one lock while they run (tests/conftest.py), and what is costly to make (the
# corpus survey, the manual, the wheel and its venv) is made once a run by the first worker
# that needs it, whatever the schedule: any number of workers is safe. Most tests wait
# (sites with delays, worker processes, browsers), so six workers on two cores keep both
# busy where two leave one idle much of the time (fresh clones, quiet: four workers 5:03
# wall, pytest 288 s; six 4:43, pytest 266 s, every test passing).
TEST_WORKERS ?= 6

# Bytecode is written during the tests, whatever PYTHONDONTWRITEBYTECODE says: hundreds of
# `python -m polite` processes would otherwise each compile polite anew, and each worker
# rewrite every test module's asserts anew. The modules are collected once (their rewritten
# bytecode kept) before the workers start, so they read it. mypy runs beside the suite,
# which mostly waits, its findings shown at the end; either failing fails the target. Each
# module goes whole to one worker (--dist loadfile), the longest first (RUN_FIRST in
# tests/conftest.py), so that their waiting overlaps the rest. The collection runs no test,
# so it is spared the search for exceptions raised where objects were freed (a full garbage
# collection of every module collected, twice: 8 % of its CPU).
#
# mypy's cache is kept for the user's other clones too (MYPY_CACHE, beside uv's cache): a
# fresh clone starts from a copy of it and checks in a second what took 15 s of CPU (mypy
# hashes each source, and checks anew what differs from the cache's), and its cache, once
# checked, replaces the kept one whole.
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/polite/mypy

# The collection before the workers start, in two processes, each given every other test
# module: rewriting their asserts is most of its time on a fresh clone (8 s of 12 here), and
# mypy, from its kept cache, leaves the other core idle meanwhile (12.4 s in one process,
# 8.1 s in two).
collect = $(BIN)/pytest -q --collect-only -p no:unraisableexception \
	  $$(find tests -name 'test_*.py' | sort | awk 'NR % 2 == $(1)') >/dev/null
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP)
	$(BIN)/ruff check src tests bench docs/hooks
	@mkdir -p test-artifacts
	@test -d .mypy_cache || test ! -d '$(MYPY_CACHE)' || cp -R '$(MYPY_CACHE)' .mypy_cache
	{ $(BIN)/mypy && { mkdir -p '$(dir $(MYPY_CACHE))'; kept="$(MYPY_CACHE).$$$$"; \
	    cp -R .mypy_cache "$$kept" && rm -rf '$(MYPY_CACHE)' \
	    && mv -T "$$kept" '$(MYPY_CACHE)' || rm -rf "$$kept"; }; } \
	  >test-artifacts/mypy.txt 2>&1 & typing=$$!; \
	  $(call collect,1) & half=$$!; $(call collect,0); collected=$$?; wait $$half \
	  && test $$collected -eq 0 && $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
	       --durations=25 $(TEST_OPTIONS); tested=$$?; \
	  wait $$typing; typed=$$?; echo "mypy:"; cat test-artifacts/mypy.txt; \
	  test $$tested -eq 0 && test $$typed -eq 0

# make test with the modules, and the tests in each, in a shuffled order (the seed is in the
# header; SEED=N runs that order again): no test may depend on what ran before it.
test-shuffled: TEST_OPTIONS = --shuffle $(if $(SEED),--shuffle-seed=$(SEED))
test-shuffled: test

# make test failing the test that leaves a socket, file or transport open (the garbage is
# collected after each test, so slower; FRAMES=N also shows where each was made). Without
# it, what a test leaves open is noticed whenever the collector runs, in a later test.
test-leaks: TEST_OPTIONS = --leaks $(if $(FRAMES),--leak-frames=$(FRAMES))
test-leaks: test

# The manual, from docs/ and the code's own parsers, OpenAPI document and docstrings, into
# site/ (open site/index.html, or serve it: python -m http.server -d site). Strict: a broken
# link, a name that no longer exists or any warning fails the build. The tests build it too.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# The politeness service on loopback, state in an embedded SQLite file beside the project.
# ARGS go after these options, so they add to them or replace them:
# make serve ARGS='--allow-private --port 8081'.
serve: $(STAMP)
	$(BIN)/polite serve --host 127.0.0.1 --port 8080 --store sqlite:///polite.sqlite $(ARGS)

# The inner loop, in under a minute: ruff, mypy and the pure core's tests (parsers, decisions,
# policies), leaving out the long ones (`slow`: whole corpora, memory bounds).
check: $(STAMP)
	$(BIN)/ruff check src tests bench docs/hooks
	$(BIN)/mypy
	$(BIN)/pytest -q -n 2 -m 'not slow' tests/core

lint: $(STAMP)
	$(BIN)/ruff check src tests bench docs/hooks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

# Before a change lands: the crawl, proxy, robots.txt and service benches on the working tree
# and on BASE (default: the merge base with main), alternately in one run; prints each
# figure's ratio after / before with its spread. Say in the change what moved.
bench-quick: $(STAMP)
	$(BIN)/python bench/quick.py $(if $(BASE),--base $(BASE))

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,all,bench]'
	$(BIN)/python bench/robots_vs_peers.py
	$(BIN)/python bench/serve_decisions.py
	$(BIN)/python bench/proxy_vs_peers.py
	$(BIN)/python bench/dashboard_overhead.py
	$(BIN)/python bench/tls_vs_mitmproxy.py
	$(BIN)/python bench/sitemaps_vs_peers.py
	$(BIN)/python bench/html_links.py
	$(BIN)/python bench/crawl_vs_scrapy.py
	$(BIN)/python bench/survey_vs_advertools.py
	$(BIN)/python bench/frontier_redis_memory.py
	$(BIN)/python bench/site_middleware.py
	$(BIN)/python bench/integrations_vs_scrapy.py
	$(BIN)/python bench/crawl_workers_redis.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
