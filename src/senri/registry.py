"""Lazy registries: a name maps to ``"module:object"`` and is imported only when asked for.

Lazy import keeps heavy optional dependencies (torch, vllm) out of every process that does not use them,
and adding a method, backend, captioner or detector is one module plus one :meth:`Registry.register` line.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any, Iterator


def import_target(target: str) -> Any:
    """The object a ``"module:object"`` target names, imported now: what a config gives for a pluggable thing of
    one's own (a memory system's store, a text encoder) without a registry line. Raises ImportError or
    AttributeError; callers name their config key."""
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class RegistryError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; show it plainly.
        return str(self.args[0])


class Registry:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._targets: dict[str, str] = {}

    def register(self, name: str, target: str) -> None:
        """Register ``name`` → ``"package.module:attribute"`` without importing it."""
        if ":" not in target:
            raise ValueError(f"{self.kind} {name!r}: target must be 'module:object', got {target!r}")
        if name in self._targets and self._targets[name] != target:
            raise ValueError(f"{self.kind} {name!r} is already registered as {self._targets[name]!r}")
        self._targets[name] = target

    def names(self) -> list[str]:
        return sorted(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def target(self, name: str) -> str:
        try:
            return self._targets[name]
        except KeyError:
            close = difflib.get_close_matches(name, self._targets, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise RegistryError(
                f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or 'none'}.{hint}"
            ) from None

    def load(self, name: str) -> Any:
        """Import and return the registered object; import failures name the registry entry."""
        module_name, _, attribute = self.target(name).partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(
                f"{self.kind} {name!r} needs {module_name!r}, which failed to import: {exc}"
            ) from exc
        try:
            return getattr(module, attribute)
        except AttributeError:
            raise ImportError(f"{self.kind} {name!r}: {module_name!r} has no attribute {attribute!r}") from None
