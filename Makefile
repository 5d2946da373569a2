# A fresh clone needs only Python >= 3.11 and make: every target bootstraps .venv itself.
# Every test starts Python processes (workers, gateways, the CLI): with bytecode caching off
# (PYTHONDONTWRITEBYTECODE), each would compile all of toolhub and its libraries again, which
# costs a third of the suite's CPU. The caches go where Python puts them, in __pycache__.
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: install lint format typecheck test test-long test-valkey demo bench chaos conformance clean

# uv installs the same packages as pip in about a quarter of the time; pip when uv is unavailable.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv || true
	if [ -x $(VENV)/bin/uv ]; then \
		$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[dev]'; \
	else \
		$(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet -e '.[dev]'; \
	fi
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check toolhub toolhub_start.py workers tests bench examples
	$(VENV)/bin/ruff format --check toolhub toolhub_start.py workers tests bench examples

format: $(STAMP)
	$(VENV)/bin/ruff check --fix toolhub toolhub_start.py workers tests bench examples
	$(VENV)/bin/ruff format toolhub toolhub_start.py workers tests bench examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy toolhub/core
	$(VENV)/bin/mypy toolhub toolhub_start.py workers

# Test processes (pytest-xdist; a file's tests stay in one process). Most tests wait on real
# servers and workers rather than compute, so 4 processes on 2 cores take about half the time of
# one; `make test TEST_PROCESSES=0` runs everything in this process.
TEST_PROCESSES ?= 4
# Agent frameworks that each need a virtualenv of their own (Google ADK, LlamaIndex, smolagents:
# about 600 MB and several minutes to build cold, then a minute to run): run by `make
# conformance`, not `make test`, to keep CI's time.
LONG_CLIENTS := tests/mcp/test_agent_frameworks.py

# The type check runs beside the tests (it needs a core while they mostly wait on servers); its
# output is printed when the tests end, and either failing fails the target.
test: lint
	@$(MAKE) --no-print-directory typecheck > $(VENV)/typecheck.log 2>&1 & checking=$$!; \
	$(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadfile --durations=25 -m "not long" \
		$(LONG_CLIENTS:%=--ignore=%); tested=$$?; \
	wait $$checking; checked=$$?; cat $(VENV)/typecheck.log; \
	[ $$tested = 0 ] && [ $$checked = 0 ]

# The long scenarios (`@pytest.mark.long`: each has a bounded sibling in make test), the
# gateway fuzz and the property tests at their full sizes (tests/fuzz_size.py): run before
# merging a change to the distributed path.
FUZZ_FILES := tests/distributed/test_message_fuzz.py tests/toolset/test_properties.py \
	tests/toolset/test_strict_definitions.py
test-long: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadfile -m long
	TOOLHUB_FUZZ_EXAMPLES=20 $(PY) -m pytest -q tests/gateway/test_gateway_fuzz.py
	TOOLHUB_FUZZ_LONG=1 $(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadfile $(FUZZ_FILES)

demo: $(STAMP)
	$(VENV)/bin/toolhub demo

bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/run.py

# The official MCP conformance suite, every scenario on both transports, and the reference
# servers (make test runs a bounded subset of the stdio part).
conformance: $(STAMP)
	TOOLHUB_CONFORMANCE_FULL=1 $(PY) -m pytest -q tests/mcp/test_conformance.py $(LONG_CLIENTS) \
		tests/sources/test_reference_servers.py

chaos: $(STAMP)
	$(PY) bench/chaos.py

# The distributed and contract suites again, every Redis they start a valkey-server (make test
# runs the failover tests on both; this is the whole of it, about as long as make test).
test-valkey: $(STAMP)
	TOOLHUB_REDIS_SERVER="$$($(PY) -c 'from tests.valkey import valkey_server; print(valkey_server())')" \
		$(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadfile tests/distributed tests/contract

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
