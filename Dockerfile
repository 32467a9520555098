# migplan container image: the operator, the node agent and the CLI in one image.
# Build: docker build -t migplan:dev .
# Reproducible: the base is pinned by digest (the multi-architecture index of the tag, as
# published; the build machines here cannot pull from registries, so it was not re-checked
# here), and every Python package, the build backend included, by version and sha256
# (image-requirements.txt, made by scripts/lock-image from constraints.txt): pip installs
# exactly those files or fails.
ARG BASE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${BASE} AS build
# The project's own operator/ folder must not shadow the standard library's operator module.
ENV PYTHONSAFEPATH=1
WORKDIR /src
COPY image-requirements.txt ./
RUN python -m venv /opt/migplan \
 && /opt/migplan/bin/pip install --no-cache-dir --disable-pip-version-check \
      --require-hashes --no-deps -r image-requirements.txt
COPY pyproject.toml README.md ./
COPY planner/ planner/
COPY operator/ operator/
COPY profiles/ profiles/
RUN /opt/migplan/bin/pip install --no-cache-dir --disable-pip-version-check \
      --no-deps --no-build-isolation --no-index .

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="migplan" \
      org.opencontainers.image.description="MIG partition planner and reconfiguration operator for Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/migplan/migplan" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/migplan /opt/migplan
ENV PATH=/opt/migplan/bin:$PATH PYTHONUNBUFFERED=1
# The operator runs as this unprivileged user; the node agent's DaemonSet overrides it where
# NVML needs privileges.
RUN useradd --system --uid 65532 --no-create-home migplan
USER 65532
ENTRYPOINT ["migplan"]
CMD ["--help"]
