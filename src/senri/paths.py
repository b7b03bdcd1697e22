"""Where the repository's data folders are, for every module that reads them (the config and the prompt files,
the JSON schemas). It imports nothing of senri, so the modules that need a path depend on no stage."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "config"
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
CONFIG_SCHEMA = SCHEMA_DIR / "config.schema.json"
