# migplan container image: the operator, the node agent and the CLI in one image.
# Build: scripts/build-image (buildah, no daemon; see README "Container image"), or
#   scripts/build-cel --copy build/cel
#   docker build --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt -t migplan:dev .
# migplan-cel (Kubernetes' CEL for DRA selectors, a static Go binary) is built from Go
# modules on the host by scripts/build-cel and copied in from build/cel/.
# Reproducible: the base is pinned by digest (the multi-architecture index of the tag, as
# published), and every Python package, the build backend included, by version and sha256
# (image-requirements.txt, made by scripts/lock-image from constraints.txt): pip installs
# exactly those files or fails. BASE may name another base with python3 and its venv module
# (scripts/build-image makes one from Debian's packages where no registry can be reached).
ARG BASE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${BASE} AS build
# The project's own operator/ folder must not shadow the standard library's operator module.
ENV PYTHONSAFEPATH=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY image-requirements.txt ./
# A CA bundle handed in as the build secret `ca` (for a TLS-intercepting proxy) is mounted
# for this step only: it is never written to a layer.
RUN --mount=type=secret,id=ca,target=/run/secrets/ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && python3 -m venv /opt/migplan \
 && /opt/migplan/bin/pip install --require-hashes --no-deps -r image-requirements.txt
COPY pyproject.toml README.md ./
COPY planner/ planner/
COPY operator/ operator/
COPY profiles/ profiles/
# Nothing is installed at run time, so pip leaves the final image, and so do the test suites
# numpy and pandas ship (55 MB). The bytecode stays: the image's files are read-only to its
# user, so without it every start would compile every module again.
RUN /opt/migplan/bin/pip install --no-deps --no-build-isolation --no-index . \
 && /opt/migplan/bin/pip uninstall --yes pip setuptools \
 && find /opt/migplan/lib/python3*/site-packages/pandas /opt/migplan/lib/python3*/site-packages/numpy \
      -depth -type d -name tests -exec rm -rf {} +

FROM ${BASE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="migplan" \
      org.opencontainers.image.description="MIG partition planner and reconfiguration operator for Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/migplan/migplan" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/migplan /opt/migplan
COPY build/cel/migplan-cel /opt/migplan/bin/migplan-cel
# The example cluster and plan, to try the planner in the image:
#   migplan preview /usr/share/migplan/examples/plan.yaml --cluster /usr/share/migplan/examples/cluster.yaml
COPY examples/ /usr/share/migplan/examples/
ENV PATH=/opt/migplan/bin:$PATH PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
# The operator runs as this unprivileged user; the node agent's DaemonSet overrides it where
# NVML needs privileges.
RUN groupadd --system --gid 65532 migplan \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent migplan
USER 65532:65532
ENTRYPOINT ["migplan"]
CMD ["--help"]
