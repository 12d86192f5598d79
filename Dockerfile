# The image every jobaware component and service runs in. CPU-only torch; no secrets; runs as uid 10001;
# the root file system may be read-only (state only under JOBAWARE_HOME, scratch in /tmp).
# BASE_IMAGE: any Debian bookworm with python3 3.11, named by digest so that a build takes the base it was written
# for: by default the public python:3.11-slim-bookworm (its multi-platform index, as Docker Hub served it on
# 2024-04-25: refresh it with `podman pull python:3.11-slim-bookworm` and `podman image inspect --format
# '{{.Digest}}'`, or skopeo inspect); where no registry can be reached, `make image` builds a base from Debian's
# packages and labels it with what pins it (k8s/README.md). Build with `make image`.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:6d2502238109c929569ae99355e28890c438cb11bc88ef02cd189c173b3db07c

FROM ${BASE_IMAGE} AS build
# Where the CPU torch wheel is found: PyTorch's CPU index page, or a local folder holding the wheel.
ARG TORCH_FIND_LINKS=https://download.pytorch.org/whl/cpu/torch/
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# The dependencies first, in a layer that changes only with them: every package pinned and checked against its
# SHA-256 (requirements-image.txt, written by `make image-requirements`), none resolved or fetched beside them...
COPY requirements-image.txt ./
RUN pip install --require-hashes --no-deps --find-links "$TORCH_FIND_LINKS" -r requirements-image.txt \
    && python3 -c "import torch; assert not torch.version.cuda, torch.version.cuda"
# ...then the project itself, built with the setuptools just installed: no index, no build environment fetched.
COPY pyproject.toml DESCRIPTION.md LICENSE NOTICE ./
COPY jobaware jobaware
RUN pip install --no-deps --no-build-isolation --no-index . \
    && pip check

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
LABEL org.opencontainers.image.base.name="${BASE_IMAGE}"
# The user exists in /etc/passwd without useradd (Debian's minbase has no `passwd` package).
RUN echo "jobaware:x:10001:10001:jobaware:/home/jobaware:/usr/sbin/nologin" >> /etc/passwd \
    && echo "jobaware:x:10001:" >> /etc/group \
    && mkdir -p /home/jobaware/.jobaware \
    && chown -R 10001:10001 /home/jobaware
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/home/jobaware \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    JOBAWARE_HOME=/home/jobaware/.jobaware \
    BENTOML_HOME=/home/jobaware/.jobaware/bentoml \
    MPLCONFIGDIR=/tmp/matplotlib \
    NUMBA_CACHE_DIR=/tmp/numba
WORKDIR /home/jobaware
USER 10001:10001
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/livez', timeout=4)"]
CMD ["jobaware", "serve", "failure", "--host", "0.0.0.0", "--port", "3000"]
