# hearth: `make run` serves on the embedded defaults, `make test` runs every test.
# Both create .venv on first use and reinstall when pyproject.toml or constraints.txt change.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-quick lint format bench

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/hearth serve --host $(HOST) --port $(PORT)

JS_STAMP := tests/js/node_modules/.installed

# The AI SDK client test runs under Node.js; without npm it is skipped (but required under CI=true).
$(JS_STAMP): tests/js/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix tests/js --no-audit --no-fund --loglevel=error && touch $(JS_STAMP); \
	else echo "npm not found: the AI SDK client test will be skipped"; fi

test: $(STAMP) $(JS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy app
	$(BIN)/pytest -n 2 --durations=25

test-quick: $(STAMP)
	$(BIN)/pytest -n 2 -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python bench/api_overhead.py
