"""What every generator of this folder shares: drawing a fixed, derandomized list of Hypothesis examples, the
outcome of calling a release function ("value" or "raised X"), and writing the case file.

A case is ``{"input": ..., "output": ...}``; ``output`` is ``{"value": ...}`` or ``{"raised": "TypeName",
"message": first 200 characters}``. Case files are JSON (NaN and Infinity as Python's json writes them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / "tests" / "reference" / "generated"
#: Where the release checkouts live (outside the repository): ``<SRC>/<system>``, at the commit each generator names.
SRC = Path("/work/wt/_src")


def examples(strategy: Any, n: int) -> list[Any]:
    """``n`` examples of ``strategy`` (fewer if it runs dry), the same list on every run: derandomized, no
    example database, generation only (no shrinking); duplicates (by their JSON text) dropped."""
    from hypothesis import HealthCheck, Phase, given, settings

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


def outcome(fn: Callable[[], Any]) -> dict:
    """What a release call gave: ``{"value": v}`` or ``{"raised": name, "message": ...}``."""
    try:
        return {"value": fn()}
    except Exception as exc:  # the release raising is an outcome we record
        return {"raised": type(exc).__name__, "message": str(exc)[:200]}


def jsonable(value: Any) -> Any:
    """numpy scalars and arrays, tuples and paths as JSON values (floats stay floats, NaN stays NaN)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, Path):
        return str(value)
    return value


def write_cases(system: str, release: dict, kinds: dict[str, list[dict]]) -> Path:
    """``tests/reference/generated/<system>/cases.json``: the release's name and commit, the versions that made
    the cases, and the cases of each kind (stable key order, one case per line so diffs stay readable)."""
    import hypothesis
    import numpy

    path = GENERATED / system / "cases.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"system": system, **release, "python": sys.version.split()[0], "hypothesis": hypothesis.__version__,
            "numpy": numpy.__version__, "counts": {k: len(v) for k, v in kinds.items()}}
    lines = ["{", f'"meta": {json.dumps(head, sort_keys=True)},', '"kinds": {']
    for k, (kind, cases) in enumerate(kinds.items()):
        lines.append(f"{json.dumps(kind)}: [")
        lines.extend(json.dumps(jsonable(c), sort_keys=True, ensure_ascii=False) + ("," if n < len(cases) - 1 else "")
                     for n, c in enumerate(cases))
        lines.append("]" + ("," if k < len(kinds) - 1 else ""))
    lines += ["}", "}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(path.read_text(encoding="utf-8"))
    return path


def kept_kinds(system: str, regenerated: dict[str, list[dict]], order: list[str]) -> dict[str, list[dict]]:
    """The kinds to write when only some are regenerated (``--kinds``): the regenerated ones, and every other
    kind of ``order`` as the existing case file holds it (Hypothesis' derandomized draws are not guaranteed the
    same across machines and versions, so a kind nobody asked to regenerate is not redrawn)."""
    path = GENERATED / system / "cases.json"
    existing = json.loads(path.read_text(encoding="utf-8"))["kinds"] if path.is_file() else {}
    missing = [k for k in order if k not in regenerated and k not in existing]
    if missing:
        raise SystemExit(f"{path}: kinds {missing} are neither regenerated nor stored; regenerate them (--kinds)")
    return {k: regenerated[k] if k in regenerated else existing[k] for k in order}


def release_functions(path: Path, names: list[str], scope: dict[str, Any], owner: str | None = None) -> dict:
    """The release's functions (or classes) ``names`` (methods of class ``owner`` when given), compiled from their
    source text in the checkout file ``path`` with ``scope`` as their globals: for a module whose imports
    (clients, model loaders) the functions do not use. Nothing is changed in the text; a name not found raises."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = tree.body
    if owner is not None:
        body = next(node.body for node in tree.body if isinstance(node, ast.ClassDef) and node.name == owner)
    found = {node.name: node for node in body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names}
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"{path}: {missing} not found" + (f" in class {owner}" if owner else ""))
    module = ast.Module(body=[found[n] for n in names], type_ignores=[])
    namespace = dict(scope)
    exec(compile(module, str(path), "exec"), namespace)  # noqa: S102 - the release's own source, its checkout
    return {n: namespace[n] for n in names}
