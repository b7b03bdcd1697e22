"""Every generated differential case (``tests/reference/generated/<system>/``) through its conformance test,
with the counts per kind: pass, or the named deviation the test checked.

    python bench/generated_cases.py [egagent worldmm magic_video]

The suite reads a deterministic sample of each kind (``tests/release_generated.py``: SAMPLE per kind); this
runs the same test functions on every case (``SENRI_GENERATED_CASES=all``) and fails on the first case that
differs. To regenerate the cases see ``tests/reference/generated/README.md``."""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]
#: Each system's conformance module for its generated cases.
MODULES = {"egagent": "test_egagent_generated_cases", "worldmm": "test_worldmm_generated_cases",
           "magic_video": "test_magic_video_generated_cases"}


class _TmpFactory:
    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=name, dir=self.root))
        return path


def run(system: str, root: Path) -> None:
    os.environ["SENRI_GENERATED_CASES"] = "all"
    import release_generated

    module = importlib.import_module(MODULES[system])
    fixtures = {"tmp_path_factory": _TmpFactory(root), "tmp_path": Path(tempfile.mkdtemp(dir=root))}
    for name in ("cases", "graph_table"):  # the modules' fixtures, called as pytest would
        if hasattr(module, name):
            wanted = inspect.signature(getattr(module, name).__wrapped__).parameters
            fixtures[name] = getattr(module, name).__wrapped__(**{k: fixtures[k] for k in wanted})
    start = time.perf_counter()
    for name, test in sorted(vars(module).items()):
        if name.startswith("test_") and callable(test):
            wanted = inspect.signature(test).parameters
            test(**{k: fixtures[k] for k in wanted})
    took = time.perf_counter() - start
    kinds = sorted({k for s, k, _ in release_generated.TALLY if s == system})
    print(f"{system}: {sum(n for (s, _, _), n in release_generated.TALLY.items() if s == system)} cases, "
          f"{took:.1f} s")
    for kind in kinds:
        outcomes = {o: n for (s, k, o), n in release_generated.TALLY.items() if s == system and k == kind}
        print(f"  {kind:<28} " + ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("systems", nargs="*", help=f"any of {', '.join(MODULES)} (default: all)")
    args = parser.parse_args()
    unknown = set(args.systems) - set(MODULES)
    if unknown:
        parser.error(f"unknown system {sorted(unknown)}: one of {', '.join(MODULES)}")
    with tempfile.TemporaryDirectory() as tmp:
        for system in args.systems or list(MODULES):
            run(system, Path(tmp))


if __name__ == "__main__":
    main()
