# One image for every Millrace service: `docker run millrace <sub-command>`.
FROM python:3.11-slim-bookworm

# A JRE for spark-submit (backfills); nothing else from Debian.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/millrace
COPY pyproject.toml constraints.txt README.md ./
COPY millrace ./millrace
COPY statestore ./statestore
COPY computations ./computations
COPY injector ./injector
COPY spark_jobs ./spark_jobs
COPY sinks ./sinks
# The demo's computations, importable by nodes (deploy/compose.yaml runs the demo topology).
COPY examples ./examples
ENV PYTHONPATH=/opt/millrace
RUN pip install --no-cache-dir -c constraints.txt .

RUN useradd --create-home --uid 10001 millrace && mkdir -p /data && chown millrace /data
USER millrace
VOLUME ["/data"]

# Liveness of the image; services are probed over gRPC health (grpc_health_probe) or /metrics.
HEALTHCHECK --interval=30s --timeout=5s CMD ["millrace", "--version"]
ENTRYPOINT ["millrace"]
CMD ["--help"]
