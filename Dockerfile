# loadaware: one image for every component. The first argument picks it:
#   loadaware extender | annotator | descheduler | policy check FILE | explain pod|node
#   | report | simulate | capture | demo
# Build: docker build -t loadaware:0.1.0 .
# tests/deploy/test_dockerfile.py runs this build stage's install commands (every RUN
# after the first COPY) in a clean virtualenv and checks the native helpers load.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# gcc builds the extender's native helpers (app/extender/_verdict_index.c, _pod_demand.c).
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
ENV VENV=/opt/loadaware \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# constraints.txt pins every runtime dependency (regenerate with scripts/lock).
COPY constraints.txt pyproject.toml setup.py README.md ./
COPY app ./app
# The virtualenv gets no pip of its own: the base image's pip installs into it
# (--python), so the runtime image carries no package installer, and making the
# virtualenv skips unpacking a second pip (~4 of the ~12 CPU-s this stage takes).
RUN python -m venv --without-pip "$VENV"
RUN python -m pip --python "$VENV/bin/python" install -c constraints.txt . \
    && python -m pip --python "$VENV/bin/python" check
# The C helpers are optional for pip, not for the image: fail the build without them.
# -I keeps /src off sys.path, so this imports the installed package.
RUN "$VENV/bin/python" -I -c "from app.extender.index import implementation_of, new_verdict_index; assert implementation_of(new_verdict_index('native')) == 'native'; import app.extender._pod_demand" \
    && "$VENV/bin/loadaware" --help > /dev/null

FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="loadaware" \
      org.opencontainers.image.description="Load-aware scheduling for Kubernetes: node annotator, scheduler extender, real-load descheduler and simulator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
# The same path as in the build stage: the virtualenv's scripts name its python.
COPY --from=build /opt/loadaware /opt/loadaware
ENV PATH=/opt/loadaware/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# A numeric non-root UID and GID, matching runAsUser in deploy/. The root file system
# can be read-only: nothing is written at run time.
USER 65532:65532
# Exec form: no shell at run time; `loadaware` is the virtualenv's console script.
ENTRYPOINT ["loadaware"]
CMD ["--help"]
