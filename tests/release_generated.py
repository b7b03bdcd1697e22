"""Generated differential cases (``tests/reference/generated/<system>/cases.json``, made by
``bench/release_cases/<system>.py`` from each release's own functions on Hypothesis-drawn inputs).

The suite reads a deterministic sample of each kind (every n-th case, ``SAMPLE`` per kind); ``bench/
generated_cases.py`` sets ``SENRI_GENERATED_CASES=all`` and reads every case. Each conformance test books every
case it read in :data:`TALLY` as ``pass`` or ``deviation:<name>`` (a named, tested deviation), so the bench can
print the counts per kind and a test can check that every sampled case was booked."""

from __future__ import annotations

import json
import os
from collections import Counter

from reference import reference_file

#: Cases per kind the suite reads (a few hundred per system, seconds); ``SENRI_GENERATED_CASES=all``: every case.
SAMPLE = 60
TALLY: Counter = Counter()


def generated_cases(system: str) -> dict:
    """The system's generated case file (a missing file fails the test: the data ships with the repository)."""
    return json.loads(reference_file(f"generated/{system}/cases.json").read_text(encoding="utf-8"))


def sample(cases: list[dict], size: int = SAMPLE) -> list[dict]:
    """Every n-th case so that about ``size`` are read (all of them under ``SENRI_GENERATED_CASES=all``)."""
    if os.environ.get("SENRI_GENERATED_CASES") == "all" or len(cases) <= size:
        return list(cases)
    step = len(cases) / size
    return [cases[int(n * step)] for n in range(size)]


def book(system: str, kind: str, outcome: str = "pass") -> None:
    """One case read: ``pass`` or ``deviation:<name>``."""
    TALLY[(system, kind, outcome)] += 1
