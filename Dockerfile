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
COPY dataflow ./dataflow
COPY engine ./engine
COPY deployment ./deployment
COPY delivery ./delivery
COPY node ./node
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

# The standard gRPC health check of the server this container runs, at
# $MILLRACE_HEALTH_ADDRESS (deploy/compose.yaml sets it per service; default 127.0.0.1:7000).
HEALTHCHECK --interval=30s --timeout=5s CMD ["millrace", "health", "--timeout", "3"]
ENTRYPOINT ["millrace"]
CMD ["--help"]
