# One image for every Millrace service: `docker run millrace <sub-command>`.
# Two stages: `build` compiles the native core (native/, Rust) into the millrace wheel;
# the runtime stage installs that wheel and keeps no Rust toolchain and no compiler.
# tests/test_dockerfile.py replays both stages outside Docker.

FROM python:3.11-slim-bookworm AS build

# Rust from the official image, pinned (pyo3 0.30 needs rustc >= 1.85; Debian bookworm's
# is older), and the C compiler and libc headers rustc links with.
COPY --from=rust:1.95-slim-bookworm /usr/local/rustup /usr/local/rustup
COPY --from=rust:1.95-slim-bookworm /usr/local/cargo /usr/local/cargo
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:$PATH
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
# The cargo workspace and its lockfile (.dockerignore leaves out target/ and fuzz/).
COPY native ./native
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
RUN pip wheel --no-cache-dir --no-deps -w /wheels .


FROM python:3.11-slim-bookworm AS runtime

# A JRE for spark-submit (backfills); nothing else from Debian.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/millrace
COPY constraints.txt ./
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir -c constraints.txt /wheels/*.whl
# The demo's computations, importable by nodes (deploy/compose.yaml runs the demo topology).
# Only these: a package's sources here would shadow the installed one (PYTHONPATH comes
# first), and the sources lack the native module.
COPY examples ./examples
ENV PYTHONPATH=/opt/millrace

RUN useradd --create-home --uid 10001 millrace && mkdir -p /data && chown millrace /data
USER millrace
VOLUME ["/data"]

# The standard gRPC health check of the server this container runs, at
# $MILLRACE_HEALTH_ADDRESS (deploy/compose.yaml sets it per service; default 127.0.0.1:7000).
HEALTHCHECK --interval=30s --timeout=5s CMD ["millrace", "health", "--timeout", "3"]
ENTRYPOINT ["millrace"]
CMD ["--help"]
