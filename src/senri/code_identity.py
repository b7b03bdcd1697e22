"""The code a stage's job runs, derived from the source: what its command imports inside ``senri``, followed
to the end, plus the data files those modules name (issue 59).

A hand-kept list of each stage's files drifted (the report's list lacked the scorers it runs, so a fixed scorer
left finished tables "up to date"). Here nothing is listed: a stage's job is its command's handler in
:mod:`senri.cli` (``cmd_<command>``), and its code is the closure of that handler's imports over the package:

- every import inside ``senri`` a module makes, at its top or inside a function (a lazy import runs when the job
  runs), except under ``if TYPE_CHECKING:`` (never executed); importing ``senri.a.b`` also runs the
  ``__init__`` of ``senri`` and ``senri.a``;
- the targets of the registries whose every entry the stage may load (``"senri.benchmarks.mlvu:MLVU"``
  strings: benchmarks, scorers, captioners, detectors, embedders);
- the data files named by module-level path constants of those modules (``Path(__file__).parent /
  "published"``: the published CSVs; ``SCHEMA_DIR / "questions.schema.json"``; the release workers' scripts a
  job runs in another environment), a folder counting as every file in it.

What is left out on purpose is named once, with its reason, in :data:`NOT_STAGE_CODE`, :data:`PER_JOB_REGISTRIES`
and :func:`_is_config_data`. Everything is read once per process (planning 9,000 jobs asks for a digest per
rule and per method × model, not per job).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "senri"
PACKAGE_DIR = Path(__file__).resolve().parent

#: Modules that are never part of a stage's code, with the reason.
NOT_STAGE_CODE: dict[str, str] = {
    "senri.cli": "the command line's wiring (argument parsing, error printing): a new subcommand or option must "
                 "not rerun every finished stage; each handler's own imports are the stage's entry",
    "senri.__main__": "`python -m senri` only calls the command line",
}

#: Registries whose entry a job selects by name from its own config; a job's digest adds the selected entry's
#: code (:func:`job_files`), so editing the vLLM backend does not rerun llama.cpp runs and editing WorldMM does
#: not rerun the runs over the captions. The key is the module that holds the registrations.
PER_JOB_REGISTRIES: dict[str, str] = {
    "senri.methods": "the answer job's method (its implementation); DEVIATIONS reads the same modules",
    "senri.backends": "the answer or build job's model backend",
    "senri.memory.store": "the memory system a store job builds or a memory method reads",
}

#: Stages whose command is not their name with "-" for "_" (``senri analyze`` runs the richness stage).
STAGE_COMMANDS: dict[str, tuple[str, ...]] = {
    "richness": ("analyze",),
}

_REGISTERED = re.compile(rf"^({PACKAGE}(?:\.\w+)+):\w+$")


@dataclass(frozen=True)
class ModuleSource:
    """What one package module contributes: its file, the package modules it imports (anywhere but under
    ``TYPE_CHECKING``), the modules its ``"module:object"`` registry strings name, and the data files its
    module-level path constants name."""

    name: str
    path: Path
    imports: frozenset[str]
    registered: frozenset[str]
    data: tuple[Path, ...]


def module_path(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of package module ``name`` (``senri.a.b`` → ``a/b.py`` or ``a/b/__init__.py``), None when the
    name is not a module of the package (an object imported from a module, a third-party name)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = package_dir.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py") if len(parts) > 1 else None, base / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def _parents(name: str) -> list[str]:
    """``senri.a.b`` → ``senri``, ``senri.a``: the packages whose ``__init__`` an import of it runs."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _executed_nodes(tree: ast.AST):
    """Every node of ``tree`` except what sits under ``if TYPE_CHECKING:`` (its ``else`` still runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may load (``from a import b``: ``a`` and, if it is a module,
    ``a.b``), relative imports resolved against ``module``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[:len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]


def _path_ops(node: ast.expr) -> list | None:
    """A top-level path expression as a chain of steps (JSON-able): ``["file"]`` or ``["name", X]`` first, then
    ``["parent"]``, ``["parents", n]`` and ``["div", "literal"]``; ``.resolve()`` is no step. Anything else:
    None (not a path constant)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Path":
        return [["file"]] if len(node.args) == 1 and isinstance(node.args[0], ast.Name) \
            and node.args[0].id == "__file__" else None
    if isinstance(node, ast.Name):
        return [["name", node.id]]
    inner, step = None, None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "resolve":
        inner = _path_ops(node.func.value)
    elif isinstance(node, ast.Attribute) and node.attr == "parent":
        inner, step = _path_ops(node.value), ["parent"]
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents" \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
        inner, step = _path_ops(node.value.value), ["parents", node.slice.value]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) \
            and isinstance(node.right.value, str):
        inner, step = _path_ops(node.left), ["div", node.right.value]
    if inner is None:
        return None
    return [*inner, step] if step else inner


def module_facts(text: str, name: str, is_package: bool) -> dict:
    """What the code identity needs of one module's source, as JSON-able data: every dotted name its imports may
    load (``imports``), its ``"senri.x:Object"`` strings (``registered``), its top-level ``from senri.x import
    NAME as ALIAS`` (``from_imports``: alias → [module, name]), its top-level path constants (``paths``: name →
    steps, :func:`_path_ops`) and what each top-level function imports (``functions``: the cli's handlers).
    Which names are package modules is decided later, against the files present."""
    tree = ast.parse(text)
    imports: set[str] = set()
    registered: set[str] = set()
    for node in _executed_nodes(tree):
        imports.update(_imported_names(node, name, is_package))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _REGISTERED.match(node.value):
            registered.add(node.value.partition(":")[0])
    from_imports: dict[str, list[str]] = {}
    paths: dict[str, list] = {}
    functions: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = sorted({t for n in _executed_nodes(node) for t in _imported_names(n, name, is_package)})
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            from_imports.update({a.asname or a.name: [node.module, a.name] for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            ops = _path_ops(node.value)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and ops is not None and ops != [["name", target.id]]:
                    paths[target.id] = ops
    return {"imports": sorted(imports), "registered": sorted(registered), "from_imports": from_imports,
            "paths": paths, "functions": functions}


class _FactsCache:
    """:func:`module_facts` kept on disk by content (this module's source and the module's): planning a workflow
    parses no unchanged file twice, across processes (every Snakemake start, every cluster job: 0.5 CPU-s of
    parsing against 0.03 s). A file that cannot be read or written only costs a parse."""

    #: Entries kept: a few checkouts' worth of versions of every module.
    capacity = 4000

    def __init__(self) -> None:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        self.path = base / "senri" / "code_identity.json"
        try:
            self.entries: dict[str, dict] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.added = 0

    def facts(self, path: Path, name: str) -> dict:
        data = path.read_bytes()
        key = hashlib.sha256(_SELF_DIGEST + data).hexdigest()
        if key not in self.entries:
            self.entries[key] = module_facts(data.decode("utf-8"), name, path.name == "__init__.py")
            self.added += 1
        return self.entries[key]

    def save(self) -> None:
        if not self.added:
            return
        keep = dict(list(self.entries.items())[-self.capacity:])  # the newest: old checkouts' files age out
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(keep))
            tmp.replace(self.path)
            self.added = 0
        except OSError:
            pass


_SELF_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).digest()


class _PackageSources:
    """The package's modules as the code identity sees them, each read once per process."""

    def __init__(self, package_dir: Path, cache: _FactsCache | None = None) -> None:
        self.package_dir = package_dir
        self.cache = cache or _FactsCache()

    @functools.cache
    def facts(self, name: str) -> tuple[Path, dict] | None:
        path = self.locate(name)
        return None if path is None else (path, self.cache.facts(path, name))

    def locate(self, name: str) -> Path | None:
        """A package module's file; for a module outside the package (a ``module:Class`` store or method of
        one's own), the file Python would import. Only such a root is located outside the package: the closure
        follows imports inside the package alone."""
        path = module_path(name, self.package_dir)
        if path is not None or name.split(".")[0] == PACKAGE:
            return path
        spec = importlib.util.find_spec(name)
        return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None

    def is_module(self, name: str) -> bool:
        return module_path(name, self.package_dir) is not None

    @functools.cache
    def own_paths(self, name: str) -> dict[str, Path]:
        """The module's own top-level names bound to a path."""
        found = self.facts(name)
        if found is None:
            return {}
        path, facts = found
        own: dict[str, Path] = {}
        for target, ops in facts["paths"].items():
            value = self._evaluate(name, path, ops, own)
            if value is not None:
                own[target] = value
        return own

    def _evaluate(self, module: str, file: Path, ops: list, bound: dict[str, Path]) -> Path | None:
        (kind, *args), *steps = ops
        value = file if kind == "file" else bound.get(args[0]) or self.lookup(module, args[0], own=False)
        for step, *arg in steps:
            if value is None:
                return None
            value = value.parent if step == "parent" else value.parents[arg[0]] if step == "parents" \
                else value / arg[0]
        return value

    def lookup(self, module: str, name: str, own: bool = True, hops: int = 0) -> Path | None:
        """The path ``name`` is bound to in ``module``: its own binding, or the one it imports (re-exports
        followed a few hops)."""
        if own and name in self.own_paths(module):
            return self.own_paths(module)[name]
        found = self.facts(module)
        home = found[1]["from_imports"].get(name) if found else None
        if home is None or hops >= 8 or not self.is_module(home[0]):
            return None
        return self.lookup(home[0], home[1], hops=hops + 1)

    @functools.cache
    def source(self, name: str) -> ModuleSource:
        found = self.facts(name)
        if found is None:
            raise ImportError(f"{name!r} is not a module of the {PACKAGE} package under {self.package_dir}")
        path, facts = found
        imports = {target for target in facts["imports"] if self.is_module(target)}
        imports |= {p for target in list(imports) for p in _parents(target)}
        registered = {target for target in facts["registered"] if self.is_module(target)}
        data = sorted({f for p in self.own_paths(name).values() for f in self._data_files(p)})
        return ModuleSource(name, path, frozenset(imports - {name}), frozenset(registered), tuple(data))

    def _data_files(self, path: Path) -> list[Path]:
        """The data files a path constant names: the file, or every file under the folder (scripts a job runs in
        another interpreter, such as the release workers, included), except the package's own roots and config
        (:func:`_is_config_data`)."""
        path = Path(os.path.normpath(path))  # not resolve(): a linked data folder is named where the code sees it
        if path in {self.package_dir, *self.package_dir.parents} or _is_config_data(path, self.package_dir):
            return []
        if path.is_file():
            return [path]
        if path.is_dir():
            return [f for f in sorted(path.rglob("*")) if f.is_file() and f.suffix != ".pyc"
                    and "__pycache__" not in f.parts and not _is_config_data(f, self.package_dir)]
        return []

    @functools.cache
    def closure(self, roots: tuple[str, ...]) -> tuple[str, ...]:
        """Every package module that importing ``roots`` (and, for a registry outside
        :data:`PER_JOB_REGISTRIES`, loading any of its entries) can run, excluding :data:`NOT_STAGE_CODE`."""
        seen: set[str] = set()
        todo = [*roots, *(p for r in roots for p in _parents(r))]
        while todo:
            name = todo.pop()
            if name in seen or name in NOT_STAGE_CODE:
                continue
            seen.add(name)
            source = self.source(name)
            todo.extend(source.imports)
            if name not in PER_JOB_REGISTRIES:
                todo.extend(source.registered)
        self.cache.save()
        return tuple(sorted(seen))

    def files(self, modules) -> list[Path]:  # noqa: ANN001 - any iterable of module names
        """The source and data files of ``modules``, sorted, each once."""
        return sorted({p for m in modules for p in (self.source(m).path, *self.source(m).data)})

    @functools.cache
    def file_digest(self, path: Path) -> bytes:
        return hashlib.sha256(path.read_bytes()).digest()

    def digest(self, modules) -> str:  # noqa: ANN001 - any iterable of module names
        root = self.package_dir.parents[1]
        hasher = hashlib.sha256()
        for path in self.files(modules):
            name = path.relative_to(root) if path.is_relative_to(root) else path.name  # a module of one's own
            hasher.update(str(name).encode() + b"\0" + self.file_digest(path))
        return hasher.hexdigest()[:16]

    @functools.cache
    def command_imports(self, command: str) -> tuple[str, ...]:
        """The package modules the handler of ``senri <command>`` imports (``cmd_<command>`` in the cli)."""
        handler = f"cmd_{command.replace('-', '_')}"
        found = self.facts("senri.cli")
        if found is None or handler not in found[1]["functions"]:
            raise KeyError(f"senri.cli has no handler {handler} for the command {command!r}")
        return tuple(sorted(n for n in found[1]["functions"][handler] if self.is_module(n)))


def _is_config_data(path: Path, package_dir: Path) -> bool:
    """Config is not code: the config folder (its files, prompt files and chat templates are hashed into each
    job's own config slice, one prompt family at a time) and the config schema (what a config may say, checked
    before any job runs; a job changes only through the slice it is given)."""
    root = package_dir.parents[1]
    return path.is_relative_to(root / "config") or path == root / "workflow" / "schemas" / "config.schema.json"


@functools.cache
def _sources(package_dir: Path) -> _PackageSources:
    return _PackageSources(package_dir)


def stage_modules(stage: str, package_dir: Path = PACKAGE_DIR) -> tuple[str, ...]:
    """The package modules a stage's job runs (without a method, backend or store it selects)."""
    sources = _sources(package_dir)
    commands = STAGE_COMMANDS.get(stage, (stage.replace("_", "-"),))
    return sources.closure(tuple(sorted({m for c in commands for m in sources.command_imports(c)})))


def module_closure(roots: tuple[str, ...], package_dir: Path = PACKAGE_DIR) -> tuple[str, ...]:
    """The package modules importing ``roots`` can run (a method's, a backend's or a store's module)."""
    return _sources(package_dir).closure(tuple(sorted(roots)))


def modules_digest(modules: tuple[str, ...] | list[str] | set[str], package_dir: Path = PACKAGE_DIR) -> str:
    """A short content hash of the source and data files of ``modules``, each named by its path relative to the
    repository (a move is a change; modification times are not: a fresh clone reruns nothing)."""
    return _sources(package_dir).digest(modules)
