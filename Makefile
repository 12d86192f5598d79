# Two entry points: `make run` (train, register, promote and serve on bundled data) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
export JOBAWARE_HOME ?= $(CURDIR)/.jobaware

.PHONY: run test test-fast fuzz venv bench clean image image-requirements test-containers

# The venv is built only when what it was installed from changed: its stamp holds a checksum of pyproject.toml
# and constraints.txt, and the folder the project is installed (editable) from. File times are no guide: a fresh
# clone makes every file new. Same checksum, another folder (a venv moved beside a fresh clone): only the project
# is installed again (`--no-deps`, seconds); another checksum: the venv is built.
STAMP := $(VENV)/.jobaware-installed
DEPS := $(shell cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)

venv:
	@installed="$$(cat $(STAMP) 2>/dev/null)"; \
	if [ "$${installed% *}" != "$(DEPS)" ]; then \
		echo "building $(VENV): pyproject.toml or constraints.txt changed"; \
		$(PYTHON) -m venv $(VENV) && \
		$(BIN)/pip install --quiet --upgrade pip && \
		$(BIN)/pip install --quiet -c constraints.txt -e '.[all,test]' && \
		echo "$(DEPS) $(CURDIR)" > $(STAMP); \
	elif [ "$${installed#* }" != "$(CURDIR)" ]; then \
		echo "installing the project from $(CURDIR) into $(VENV)"; \
		$(BIN)/pip install --quiet --no-deps -e . && echo "$(DEPS) $(CURDIR)" > $(STAMP); \
	fi

run: venv
	$(BIN)/jobaware demo

test: venv
	$(BIN)/python -m pytest -q --durations=25 tests

test-fast: venv  # the edit loop: everything but servers, pipelines and clusters
	$(BIN)/python -m pytest -q -m "not slow" tests

FUZZ_EXAMPLES ?= 100000
fuzz: venv  # the long run of the fuzz tests: FUZZ_EXAMPLES generated inputs per reader, per endpoint and mode,
	# per generator of requests that reach a model, and through the compiled cli_filter under ASan and UBSan
	JOBAWARE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -s tests/test_fuzz_readers.py \
		tests/test_conformance.py tests/jobaware/hold/test_generated_requests.py \
		tests/jobaware/similarity/test_generated_requests.py tests/adapters/slurm/test_plugins_hostile.py \
		-k "mutated or service_answers_400 or generated or fuzzed"

image: venv  # the project image with podman, on a Debian base built from Debian's packages where no registry answers;
	# BASE_IMAGE=NAME@sha256:DIGEST to choose the base (the Dockerfile's default names one by digest),
	# JOBAWARE_IMAGE=NAME:TAG to choose the tag
	$(BIN)/python -m jobaware.containers

image-requirements: venv  # requirements-image.txt: the image's packages, each pinned with its SHA-256 (pip's resolver
	# over pyproject.toml's dependencies, the pins of constraints.txt and requirements-image.in)
	$(BIN)/python -m jobaware.containers requirements

test-containers: image  # each pipeline step and each service in the image (`make test` runs them when the image is fresh)
	JOBAWARE_REQUIRE_PODMAN=1 $(BIN)/python -m pytest -q --durations=10 tests/test_containers.py

bench: venv
	$(BIN)/pip install --quiet -c constraints.txt -e '.[bench]'
	$(BIN)/python bench/ingest.py --jobs 1000000
	$(BIN)/python bench/service.py
	$(BIN)/python bench/soak.py  # each service under 10,000 mixed requests: latency, statuses, memory (issue 30)

clean:
	rm -rf $(VENV) .jobaware
