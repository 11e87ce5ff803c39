# hearth: the API server, its Alembic migrations and the default provider/MCP configuration.
#
# The image keeps the repository layout under /srv/hearth, because hearth finds `alembic.ini`
# and `migrations/` relative to its own package (app/core/db/migrate.py) and reads
# `config/*.yaml` relative to the working directory. The package is therefore installed in
# editable mode: the code that runs is the copy in /srv/hearth, not one in site-packages.
#
#   docker build -t hearth .
#   docker run -p 8000:8000 -e HEARTH_SECRET_KEY=... -v hearth-data:/data hearth
#
# On its own the image keeps SQLite and uploads in the /data volume; docker-compose.yml adds
# PostgreSQL.

FROM python:3.11-slim

ARG PIP_NO_CACHE_DIR=1
ARG PIP_DISABLE_PIP_VERSION_CHECK=1

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HEARTH_DATA_DIR=/data \
    HEARTH_DATABASE_URL=sqlite+aiosqlite:////data/hearth.db

RUN useradd --system --create-home --home-dir /home/hearth --shell /usr/sbin/nologin hearth \
    && mkdir -p /data \
    && chown hearth:hearth /data

WORKDIR /srv/hearth

# Dependencies first, in a layer of their own: it is rebuilt only when pyproject.toml or the
# pinned versions in constraints.txt change, not on every source edit. The wildcard lets the
# build go on (unpinned) in a tree that has no constraints file.
COPY pyproject.toml constraints.tx[t] ./
RUN set -eu; \
    if [ -f constraints.txt ]; then pins="-c constraints.txt"; else pins=""; fi; \
    python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt; \
    pip install $pins -r /tmp/requirements.txt; \
    rm /tmp/requirements.txt

COPY alembic.ini README.m[d] ./
COPY migrations ./migrations
COPY config ./config
COPY app ./app
RUN set -eu; \
    if [ -f constraints.txt ]; then pins="-c constraints.txt"; else pins=""; fi; \
    pip install $pins --no-deps -e .

VOLUME ["/data"]
EXPOSE 8000
USER hearth

# Liveness only (the process answers); docker-compose.yml checks /readyz, which needs the
# database. slim has no curl, so the probe is Python's own urllib. The start period covers the
# schema migration `hearth serve` runs before it listens.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

CMD ["hearth", "serve", "--host", "0.0.0.0", "--port", "8000"]
