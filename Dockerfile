# syntax=docker/dockerfile:1
#
# slurm-bridge: one image for every component. The command picks the component:
#   slurm-bridge scheduler  --config /etc/slurm-bridge/config.yaml
#   slurm-bridge controller --config /etc/slurm-bridge/config.yaml
#   slurm-bridge admission  --config /etc/slurm-bridge/config.yaml
#
# Build:   docker build -t slurm-bridge:0.1.0 .
#
# The base image is pinned by tag. For bit-for-bit reproducible builds pin it by digest as
# well (the tag stays for humans, the digest wins):
#   docker buildx imagetools inspect python:3.11.14-slim-trixie   # prints "Digest: sha256:..."
#   docker build --build-arg PYTHON_IMAGE=python:3.11.14-slim-trixie@sha256:<digest> .
# Runtime dependencies are pinned exactly by deploy/constraints.txt; build tools by the
# ARGs below. The final stage has no compiler, no pip, no setuptools: only the interpreter
# and a virtualenv with the installed wheels. It runs as uid 65532 and never writes outside
# /tmp, so it works with readOnlyRootFilesystem (the Helm chart mounts an emptyDir there).

ARG PYTHON_IMAGE=python:3.11.14-slim-trixie

# ---------------------------------------------------------------------------- builder
FROM ${PYTHON_IMAGE} AS builder
ARG PIP_VERSION=25.3
ARG SETUPTOOLS_VERSION=80.9.0
ARG WHEEL_VERSION=0.45.1
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m pip install "pip==${PIP_VERSION}" "setuptools==${SETUPTOOLS_VERSION}" "wheel==${WHEEL_VERSION}"
WORKDIR /src
COPY deploy/constraints.txt deploy/constraints.txt
COPY pyproject.toml README.md ./
COPY bridge bridge
COPY scheduler scheduler
COPY controller controller
COPY admission admission
# (sandbox/ is not copied: the sandboxes are their own distribution, slurm-bridge-sandbox)
# The project's wheel (what the tests build and install: pip wheel . --no-deps), then the
# wheels of its pinned dependencies; then a virtualenv without pip that holds them all.
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && pip wheel --wheel-dir /wheels --constraint deploy/constraints.txt /wheels/slurm_bridge-*.whl \
 && python -m venv --without-pip /opt/slurm-bridge \
 && pip --python /opt/slurm-bridge/bin/python install --no-index --find-links /wheels \
        --constraint deploy/constraints.txt --compile slurm-bridge \
 && /opt/slurm-bridge/bin/slurm-bridge version

# ------------------------------------------------------------------------------ final
FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="slurm-bridge" \
      org.opencontainers.image.description="A Kubernetes scheduler whose decisions come from Slurm" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="python:3.11-slim"
# No package managers for Python in the runtime image: the app lives in its own venv.
RUN python -m pip uninstall --yes pip setuptools wheel \
 && rm -rf /root/.cache
COPY --from=builder /opt/slurm-bridge /opt/slurm-bridge
ENV PATH=/opt/slurm-bridge/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
WORKDIR /tmp
USER 65532:65532
EXPOSE 8080 8081 9443
ENTRYPOINT ["slurm-bridge"]
CMD ["--help"]
