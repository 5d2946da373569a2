# syntax=docker/dockerfile:1
#
# One image for every toolhub component: workers, the HTTP gateway and Flower.
# The command picks the component (see compose/docker-compose.yml and helm/toolhub):
#   toolhub worker --queues toolhub.fast --concurrency 8
#   toolhub serve --host 0.0.0.0 --port 8000
#   celery --app workers.app:app flower --port=5555      (auth from FLOWER_BASIC_AUTH)
#
# Build:  docker build -t toolhub:0.1.0 .
# The base image is pinned to an exact tag; pin it by digest as well in your registry mirror
# (python:3.11.13-slim-bookworm@sha256:...) for fully reproducible builds.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---------------------------------------------------------------------------------------------
# builder: compilers live here only. Builds the toolhub wheel and a self-contained venv.
# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

# Bytecode is compiled here (pip's default): the runtime root filesystem is read-only.
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Toolchain for any dependency that ships no wheel for this platform (it never reaches the
# final stage).
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY pyproject.toml README.md ./
COPY toolhub ./toolhub
COPY workers ./workers
COPY toolhub_start.py ./

# Build the wheel first (no editable install, no source tree in the final image), then
# install it with the extras every component needs, plus Flower.
RUN pip wheel --no-deps --wheel-dir /dist . \
 && pip install "$(ls /dist/toolhub-*.whl)[gateway,mcp,otel]" "flower==2.0.1" \
 && python -c "import toolhub, workers, celery, flower" \
 && toolhub --help > /dev/null

# ---------------------------------------------------------------------------------------------
# runtime: no compilers, non-root, tini as PID 1.
# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="toolhub" \
      org.opencontainers.image.description="toolhub workers, gateway and Flower" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

# tini reaps the zombies left by tool subprocesses and forwards signals, so a SIGTERM from
# the orchestrator reaches Celery and starts its soft shutdown.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 toolhub \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/toolhub --create-home \
        --shell /usr/sbin/nologin toolhub \
 && mkdir -p /workspace /etc/toolhub \
 && chown 10001:10001 /workspace

COPY --from=builder /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/toolhub \
    TOOLHUB_WORKSPACE=/workspace \
    TOOLHUB_HEARTBEAT_FILE=/tmp/toolhub-worker.heartbeat \
    TOOLHUB_METRICS_PORT=9100 \
    TOOLHUB_LOG_FORMAT=json

USER 10001:10001
WORKDIR /workspace

# 8000 gateway, 5555 Flower, 9100 worker Prometheus metrics.
EXPOSE 8000 5555 9100

ENTRYPOINT ["tini", "--"]
CMD ["toolhub", "serve", "--host", "0.0.0.0", "--port", "8000"]
