# koordpy's container image: `koordpy run` on a slim Python base, as a non-root user.
#
#   docker build -t koordpy:0.1.0 .
#
# The base is pinned by its full version tag; pin it by digest as well
# (python:3.11.13-slim-bookworm@sha256:...) where images must be reproducible.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---- build: a wheel of koordpy, then a virtualenv with the locked dependencies
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /src
# the build backend at requirements-dev.lock's pins, so the wheel does not change with the day it is built
RUN pip install setuptools==84.2.1 wheel==0.48.0
COPY pyproject.toml README.md ./
COPY koordpy ./koordpy
COPY operators ./operators
RUN pip wheel --no-build-isolation --no-deps --wheel-dir /wheels .

COPY requirements.lock ./
# --no-deps: only what the lock pins is installed; `pip check` then fails the build
# if the lock misses a dependency or pins two that do not fit together
RUN python -m venv /opt/koordpy \
 && /opt/koordpy/bin/pip install --no-deps -r requirements.lock \
 && /opt/koordpy/bin/pip install --no-deps /wheels/koordpy-*.whl \
 && /opt/koordpy/bin/pip check \
 && /opt/koordpy/bin/pip uninstall --yes pip

# ---- runtime: the virtualenv on a clean base of the same image
FROM ${PYTHON_IMAGE}

RUN groupadd --system --gid 65532 koordpy \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin koordpy

COPY --from=build /opt/koordpy /opt/koordpy

# bytecode was compiled at install time; the root filesystem is read-only in the chart
ENV PATH=/opt/koordpy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# numeric, so that Kubernetes can check runAsNonRoot without a runAsUser
USER 65532:65532
WORKDIR /

# /metrics, /healthz and /readyz
EXPOSE 10259

ENTRYPOINT ["koordpy", "run"]
