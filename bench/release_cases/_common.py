"""Shared plumbing of the differential-case generators (issue 60): load a release's own modules from a local
checkout with stand-ins only for imports the recorded computation does not use, draw inputs with Hypothesis
(derandomized: the same inputs on every run), record each call's outcome (its value, or the exception it
raised) and write the cases as data under ``tests/reference/generated/<system>/cases.json``.

No release code is copied into the repository: the generators import it from ``--src`` (a checkout at the
pinned commit, outside the repository) and store only inputs and outputs.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import sys
import types
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "reference" / "generated"
SRC = Path("/work/wt/_src")


def stub(name: str, **attrs: Any) -> types.ModuleType:
    """A stand-in module ``name`` (its parents made too) holding ``attrs``; kept if already real."""
    if name in sys.modules:
        module = sys.modules[name]
    else:
        module = types.ModuleType(name)
        module.__path__ = []  # importable as a package too
        sys.modules[name] = module
        if "." in name:
            parent, _, child = name.rpartition(".")
            setattr(stub(parent), child, module)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


def package(name: str, path: Path) -> types.ModuleType:
    """Package ``name`` rooted at ``path`` without running its ``__init__`` (which imports the whole release)."""
    module = stub(name)
    module.__path__ = [str(path)]
    return module


def load_file(name: str, path: Path) -> types.ModuleType:
    """The module at ``path`` imported as ``name`` (a flat file outside any package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Anything:
    """A stand-in class for names a module imports for code paths the generators never run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Anything()

    def __getattr__(self, name: str) -> Any:
        return Anything()


def draw(strategy: st.SearchStrategy, n: int) -> list[Any]:
    """``n`` draws of ``strategy`` (duplicates removed), the same on every run: Hypothesis derandomized, no
    example database, generation only."""
    drawn: list[Any] = []
    seen: set[str] = set()

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: Any) -> None:
        key = json.dumps(value, sort_keys=True, default=repr)
        if key not in seen:
            seen.add(key)
            drawn.append(value)

    collect()
    return drawn


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: tuples become lists; NaN and infinities stay floats (Python's json writes NaN /
    Infinity and reads them back); anything else JSON cannot hold becomes its repr under ``{"repr": …}``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    return {"repr": repr(value)}


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``{"value": …}`` or ``{"raised": "<ExceptionClass>", "message": …}``."""
    try:
        return {"value": jsonable(function(*args, **kwargs))}
    except Exception as exc:  # noqa: BLE001 - every refusal is an outcome to record
        return {"raised": type(exc).__name__, "message": str(exc)[:300]}


def write(system: str, release: dict[str, str], kinds: dict[str, list[dict[str, Any]]]) -> Path:
    """``tests/reference/generated/<system>/cases.json`` (one case a line inside each kind, so diffs stay
    readable); prints the counts."""
    path = OUT / system / "cases.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["{", f' "system": {json.dumps(system)},', f' "release": {json.dumps(release, sort_keys=True)},',
             ' "kinds": {']
    names = sorted(kinds)
    for k, kind in enumerate(names):
        lines.append(f'  {json.dumps(kind)}: [')
        cases = kinds[kind]
        for i, case in enumerate(cases):
            text = json.dumps(case, sort_keys=True, ensure_ascii=False)
            lines.append(f"   {text}{',' if i < len(cases) - 1 else ''}")
        lines.append(f"  ]{',' if k < len(names) - 1 else ''}")
    lines += [" }", "}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for kind in names:
        print(f"{system:14s} {kind:28s} {len(kinds[kind]):6d}")
    return path


# ------------------------------------------------------------------------------------------ shared strategies
#: Fragments a model's reply is made of: tags, their broken forms, letters, numbers, unicode and whitespace.
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
SMALL_INT = st.integers(min_value=-5, max_value=20_000)
NUMBER = st.one_of(SMALL_INT, st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.floats(min_value=-10, max_value=5000), st.sampled_from([0, 1, -1, 10**400, 2**63, 1e308]))
JSON_SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT)
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                st.dictionaries(TEXT, inner, max_size=3)),
                          max_leaves=6)


def numeric_text() -> st.SearchStrategy[str]:
    """Strings a time or number reader meets: decimals, exponents, signs, underscores, clock forms, nan/inf,
    non-ASCII digits, blanks and garbage."""
    digits = st.integers(min_value=0, max_value=99).map(str)
    clock = st.lists(digits, min_size=1, max_size=4).map(":".join)
    return st.one_of(
        NUMBER.map(str), clock, TEXT,
        st.sampled_from(["", " ", "nan", "-inf", "Infinity", "1_000", "1e2", " 4.5 ", "٣", "１２", "12s", "1:2:3:4",
                         "::", "1:", ":5", "01:02.5", "00:00:07", "1e400", "0x10", "+3", "-2:30", "1 000",
                         "None", "true", "3.5.1", "½"]))
