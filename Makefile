# The three newcomer commands: `make install`, `make demo`, `make test` (see README.md).
VENV ?= .venv
PYTHON ?= $(shell command -v python3.11 || command -v python3)
APT_PACKAGES = ffmpeg fonts-dejavu-core python3-venv
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install system-packages demo test clean

install: system-packages $(VENV)/.installed

# Debian packages, installed only when something is missing (so CI on a ready machine skips apt).
system-packages:
	@if ! command -v ffmpeg >/dev/null || ! command -v ffprobe >/dev/null \
	   || [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf ] \
	   || ! $(PYTHON) -c 'import ensurepip, venv' 2>/dev/null; then \
	  echo "installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES); \
	fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[dev]'
	touch $@

demo: install
	snakemake -c2

test: install
	python -m pytest

clean:
	rm -rf results .snakemake
