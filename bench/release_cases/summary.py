"""Print the per-system table of the generated release cases (tests/reference/generated/README.md's table) from
the case files' own ``meta``, so the README's counts are derived, never kept by hand:
``python bench/release_cases/summary.py`` (the suite checks that the README holds this table)."""

from __future__ import annotations

import json
from pathlib import Path

GENERATED = Path(__file__).resolve().parents[2] / "tests" / "reference" / "generated"

#: system folder → (its name, the command that checks every case)
SYSTEMS = {
    "egagent": ("EG-Agent", "python bench/generated_cases.py egagent"),
    "worldmm": ("WorldMM", "python bench/generated_cases.py worldmm"),
    "magic_video": ("MAGIC-Video", "python bench/generated_cases.py magic_video"),
    "paravt": ("ParaVT", "python bench/release_cases/check_seekers.py --system paravt"),
    "video_o3": ("Video-o3", "python bench/release_cases/check_seekers.py --system video_o3"),
    "longvideo_r1": ("LongVideo-R1", "python bench/release_cases/check_seekers.py --system longvideo_r1"),
    "videoarm": ("VideoARM", "python bench/release_cases/check_seekers.py --system videoarm"),
}


def counts(system: str) -> dict[str, int]:
    """Cases per kind, as the generator recorded them in the file's ``meta``."""
    meta = json.loads((GENERATED / system / "cases.json").read_text(encoding="utf-8"))["meta"]
    return {str(kind): int(n) for kind, n in meta["counts"].items()}


def commit(system: str) -> str:
    meta = json.loads((GENERATED / system / "cases.json").read_text(encoding="utf-8"))["meta"]
    return str(meta["commit"])[:7]


def table() -> str:
    """The README's table: one row per system, its commit, cases per kind, the total and the full check."""
    lines = ["| system | release commit | cases per kind | cases | every case |", "|---|---|---|---:|---|"]
    total = 0
    for system, (name, command) in SYSTEMS.items():
        per_kind = counts(system)
        total += sum(per_kind.values())
        kinds = ", ".join(f"`{kind}` {n:,}" for kind, n in sorted(per_kind.items()))
        lines.append(f"| {name} | `{commit(system)}` | {kinds} | {sum(per_kind.values()):,} | `{command}` |")
    lines.append(f"| **all** | | | **{total:,}** | |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
