# syntax=docker/dockerfile:1
# The agentcore worker: one process serving the conversation workflow and its activities on a task
# queue. Run as many as you like against one Temporal cluster (see docker-compose.yml). The same image
# runs the UI's codec server (`agentcore codec-server`).
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
# the PyPI package is zoneinfo's documented fallback. The extras: traces over OTLP (otel) and
# payload encryption (encryption), both off until their variables are set.
RUN --mount=type=cache,target=/root/.cache/pip \
    pip install ".[otel,encryption]" tzdata

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

# Prometheus metrics (Temporal SDK and agent) at :9464/metrics.
EXPOSE 9464

# The connection comes from TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / TEMPORAL_API_KEY / TEMPORAL_TLS_*
# (or a mounted profile file, TEMPORAL_CONFIG_FILE). On SIGTERM the worker stops polling, lets
# in-flight activities finish for --graceful-shutdown seconds (default 30) and exits 0.
STOPSIGNAL SIGTERM
CMD ["agentcore", "worker", "--metrics-port", "9464"]
