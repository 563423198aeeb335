# syntax=docker/dockerfile:1
# The agentcore worker: one process serving the conversation workflow and its activities on a task
# queue. Run as many as you like against one Temporal cluster (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Only what the package build needs (see .dockerignore); tests and benchmarks stay out of the image.
COPY pyproject.toml README.md worker.py ./
COPY agentcore ./agentcore
COPY workflows ./workflows
COPY activities ./activities

# tzdata: the slim image may lack the system zone database the clock tool reads through zoneinfo;
# the PyPI package is zoneinfo's documented fallback.
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install . tzdata

# A fixed non-root uid, so files on the shared sessions volume have one owner whichever worker wrote
# them. The mount points are created here, owned by that user: Docker copies a directory's ownership
# into a named volume when it first mounts it, so the volumes come up writable.
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin agentcore \
    && mkdir -p /sessions /data \
    && chown agentcore:agentcore /sessions /data
USER agentcore

# /app belongs to root, so everything the worker writes goes to the two volumes: sessions, and the
# data dir (the demo cellar, and the embedded dev server's database when no cluster is given).
ENV AGENTCORE_TASK_QUEUE=agentcore \
    AGENTCORE_SESSIONS_DIR=/sessions \
    AGENTCORE_DATA_DIR=/data \
    AGENTCORE_DEMO_DB=/data/cellar.sqlite3

# TEMPORAL_ADDRESS is left unset on purpose: without it the worker starts an embedded dev server
# inside the container (a self-contained smoke test of the image). Compose sets it to the cluster.
CMD ["python", "worker.py"]
