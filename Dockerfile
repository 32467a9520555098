# migplan container image: the operator, the node agent and the CLI in one image.
# Build: docker build -t migplan:dev .
# Dependencies are installed with the same pins (constraints.txt) as scripts/lib.sh uses.

FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY planner/ planner/
COPY operator/ operator/
COPY profiles/ profiles/
RUN python -m venv /opt/migplan \
 && /opt/migplan/bin/pip install --no-cache-dir --disable-pip-version-check -c constraints.txt .

FROM python:3.11.14-slim-bookworm
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
