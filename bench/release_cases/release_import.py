"""How the ParaVT, Video-o3, LongVideo-R1 and VideoARM generators import a release's own modules from a local
checkout (issue 60): packages rooted at the checkout without running their ``__init__`` (which imports the whole
release), flat files loaded under a name, and stand-in modules for imports the recorded computation does not use.
Nothing here replaces a function whose output is recorded. Used only by the generators (never by senri)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any


def stub(name: str, **attrs: Any) -> types.ModuleType:
    """A stand-in module ``name`` (its parents made too) holding ``attrs``; a module already imported is kept
    and only given ``attrs``."""
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
    """Package ``name`` rooted at ``path`` without running its ``__init__``."""
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


def failure(exc: BaseException) -> dict:
    """A refusal recorded inside a larger outcome, as :func:`common.outcome` records a whole call's."""
    return {"raised": type(exc).__name__, "message": str(exc)[:200]}
