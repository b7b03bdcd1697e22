"""Where the repository's data folders are, for every module that reads them (the config and the prompt files,
the JSON schemas, the config sidecar beside an output). It imports nothing of senri, so the modules that need a
path depend on no stage."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "config"
SCHEMA_DIR = REPO_ROOT / "workflow" / "schemas"
CONFIG_SCHEMA = SCHEMA_DIR / "config.schema.json"


def sidecar_path(output: str | Path) -> Path:
    """Where a stage writes the resolved config it ran with: ``x.parquet`` → ``x.config.yaml``."""
    output = Path(output)
    return output / "config.yaml" if output.suffix == "" else output.with_suffix(".config.yaml")
