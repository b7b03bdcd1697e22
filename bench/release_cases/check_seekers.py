"""Every generated case of ParaVT, Video-o3, LongVideo-R1 and VideoARM through senri (issue 60), counted per kind.

    python bench/release_cases/check_seekers.py [--system paravt] [--show 3]

Reads tests/reference/generated/<system>/cases.json, runs each case through the adapters of
tests/generated_seekers.py and prints, per system and kind, how many cases pass, how many are named
deviations (by name) and how many fail (the first ``--show`` failures printed). Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]

from generated_seekers import ADAPTERS, generated, verdict  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", action="append", choices=sorted(ADAPTERS))
    parser.add_argument("--show", type=int, default=3)
    args = parser.parse_args()
    failed = 0
    for system in args.system or list(ADAPTERS):
        kinds = generated(system)["kinds"]
        missing = set(ADAPTERS[system]) ^ set(kinds)
        if missing:
            print(f"{system}: kinds without adapter or without cases: {sorted(missing)}")
            failed += 1
        for kind in sorted(kinds):
            started, counts, shown = time.perf_counter(), collections.Counter(), 0
            for case in kinds[kind]:
                try:
                    counts[verdict(system, kind, case)] += 1
                except AssertionError as exc:
                    counts["FAIL"] += 1
                    if shown < args.show:
                        print(f"  FAIL {exc}"[:600])
                        shown += 1
            failed += counts["FAIL"]
            deviations = ", ".join(f"{k[len('deviation:'):]} {v}" for k, v in sorted(counts.items())
                                   if k.startswith("deviation:"))
            print(f"{system:13s} {kind:22s} cases {len(kinds[kind]):5d}  pass {counts['pass']:5d}  "
                  f"deviation {sum(v for k, v in counts.items() if k.startswith('deviation:')):4d}"
                  f"{' (' + deviations + ')' if deviations else ''}  fail {counts['FAIL']:4d}  "
                  f"{time.perf_counter() - started:6.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
