"""The reference data the conformance tests compare senri with, vendored under ``tests/reference/`` (see its
README): the papers' tables, the release cases, the benchmarks' real files and the spec's statement ids. It
ships with every clone, so these tests run everywhere; a missing file is a failure, never a skip."""

from __future__ import annotations

import json
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent / "reference"
SPEC = REFERENCE / "spec"


def reference_file(relative: str) -> Path:
    """The vendored file at ``relative`` (under ``tests/reference/``); a missing one fails the calling test."""
    path = REFERENCE / relative
    if not path.is_file():
        raise AssertionError(f"reference file {path} is missing: the conformance data ships in tests/reference/")
    return path


def release_cases(system: str) -> dict:
    """``release_cases/<system>/cases.json``: what the system's released code computed on fixed inputs."""
    return json.loads(reference_file(f"release_cases/{system}/cases.json").read_text(encoding="utf-8"))
