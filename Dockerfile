# The image every jobaware component and service runs in. CPU-only torch; no secrets; runs as uid 10001;
# the root file system may be read-only (state only under JOBAWARE_HOME, scratch in /tmp).
# BASE_IMAGE: any Debian bookworm with python3 3.11 (the public python:3.11-slim-bookworm, or the base that
# `make image` builds from Debian's packages where no registry can be reached). Build with `make image`.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# Where the CPU torch wheel is found: PyTorch's CPU index page, or a local folder holding the wheel.
ARG TORCH_FIND_LINKS=https://download.pytorch.org/whl/cpu/torch/
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY constraints.txt pyproject.toml ./
# The dependencies first, in a layer that changes only with them (an empty package and README stand in)...
RUN mkdir jobaware components pipelines serving \
    && touch README.md jobaware/__init__.py components/__init__.py pipelines/__init__.py serving/__init__.py \
    && pip install --find-links "$TORCH_FIND_LINKS" torch==2.13.0+cpu \
    && pip install -c constraints.txt . \
    && pip uninstall --yes jobaware \
    && rm -rf build jobaware.egg-info jobaware components pipelines serving \
    && python3 -c "import torch; assert not torch.version.cuda, torch.version.cuda"
# ...then the project itself.
COPY README.md ./
COPY jobaware jobaware
COPY components components
COPY pipelines pipelines
COPY serving serving
COPY adapters adapters
RUN pip install --no-deps -c constraints.txt .

FROM ${BASE_IMAGE}
# The user exists in /etc/passwd without useradd (Debian's minbase has no `passwd` package).
RUN echo "jobaware:x:10001:10001:jobaware:/home/jobaware:/usr/sbin/nologin" >> /etc/passwd \
    && echo "jobaware:x:10001:" >> /etc/group \
    && mkdir -p /home/jobaware/.jobaware \
    && chown -R 10001:10001 /home/jobaware
COPY --from=build /opt/venv /opt/venv
COPY data_contracts /app/data_contracts
# the real labelled scripts every `resource` training is scored on (GPL-3.0, see its LICENSE)
COPY data/real/scripts /app/data/real/scripts
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/home/jobaware \
    JOBAWARE_RESOURCE_REAL=/app/data/real/scripts \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    JOBAWARE_HOME=/home/jobaware/.jobaware \
    BENTOML_HOME=/home/jobaware/.jobaware/bentoml \
    MPLCONFIGDIR=/tmp/matplotlib \
    NUMBA_CACHE_DIR=/tmp/numba \
    JOBAWARE_CONTRACTS=/app/data_contracts
WORKDIR /home/jobaware
USER 10001:10001
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/livez', timeout=4)"]
CMD ["jobaware", "serve", "failure", "--host", "0.0.0.0", "--port", "3000"]
