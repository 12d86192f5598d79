# The image every jobaware component and service runs in. CPU-only torch; no secrets; runs as a non-root user.
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY constraints.txt pyproject.toml README.md ./
COPY jobaware jobaware
COPY components components
COPY pipelines pipelines
COPY serving serving
COPY adapters adapters
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -c constraints.txt .

FROM python:3.11-slim-bookworm
RUN groupadd --system --gid 10001 jobaware \
    && useradd --system --uid 10001 --gid jobaware --create-home --home-dir /home/jobaware jobaware
COPY --from=build /opt/venv /opt/venv
COPY data_contracts /app/data_contracts
# the real labelled scripts every `resource` training is scored on (GPL-3.0, see its LICENSE)
COPY data/real/scripts /app/data/real/scripts
ENV PATH=/opt/venv/bin:$PATH \
    JOBAWARE_RESOURCE_REAL=/app/data/real/scripts \
    PYTHONUNBUFFERED=1 \
    JOBAWARE_HOME=/home/jobaware/.jobaware \
    JOBAWARE_CONTRACTS=/app/data_contracts
WORKDIR /home/jobaware
USER 10001:10001
EXPOSE 3000
CMD ["jobaware", "serve", "failure", "--host", "0.0.0.0", "--port", "3000"]
