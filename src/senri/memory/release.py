"""Reading a paper release's pickles without executing foreign code (WorldMM W-F4, MAGIC-Video G-F1/G-F3).

A pickle names the globals it calls; :class:`RestrictedUnpickler` resolves only numpy's array, dtype and
scalar constructors (under their numpy 1 ``numpy.core`` and numpy 2 ``numpy._core`` names alike; protocol 5's
``_frombuffer`` by a checked restatement) and plain containers, and refuses every other global (``os.system``, ``builtins.eval``, …). A release whose pickles hold
its own classes (MAGIC-Video's graph nodes and edges) names them in ``records`` — each becomes a plain
attribute bag, :class:`ReleaseRecord` — and its enums in ``enums`` — each becomes its value's string; nothing
of the release's code is imported.
"""

from __future__ import annotations

import importlib
import io
import pickle
from pathlib import Path
from typing import Any, Collection

import numpy as np

#: Plain containers and scalars a pickle may rebuild (``_codecs.encode`` is how protocol 2 writes bytes).
PLAIN = {("builtins", name) for name in ("dict", "list", "tuple", "set", "frozenset", "float", "int", "str",
                                         "bytes", "bool", "complex", "object")} | {
    ("collections", "OrderedDict"), ("_codecs", "encode")}
#: numpy's array constructors, by both module paths (numpy 2 moved ``numpy.core`` to ``numpy._core``).
NUMPY_MULTIARRAY = {"numpy.core.multiarray", "numpy._core.multiarray"}
NUMPY_CONSTRUCTORS = {"_reconstruct", "scalar"}
NUMPY_TYPES = {"ndarray", "dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
               "bool_"}


class ReleaseRecord:
    """A plain stand-in for a release's own record class (a dataclass of the release): attributes only."""


def _enum_value(value: Any) -> str:
    return str(value)


def _reconstructor(cls: type, base: type, state: Any) -> Any:
    """``copyreg._reconstructor`` for :class:`ReleaseRecord` only (how protocol 0/1 pickles rebuild objects)."""
    if cls is not ReleaseRecord or base is not object:
        raise pickle.UnpicklingError(f"copyreg._reconstructor of {cls!r} refused")
    return object.__new__(cls)


#: Where numpy's protocol-5 array reconstructor lives (numpy 1 and numpy 2): ``pickle.dumps(array, protocol=5)``
#: — the default of Python ≥ 3.14's pickle, so a release written there — names it instead of ``_reconstruct``.
NUMPY_NUMERIC = {"numpy.core.numeric", "numpy._core.numeric"}


def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
    """numpy's ``_frombuffer`` restated with its arguments checked: raw bytes, a plain dtype (no Python objects
    inside), a shape of whole numbers and a memory order — so the global cannot build anything but an array."""
    if not isinstance(buffer, (bytes, bytearray, memoryview, pickle.PickleBuffer)):
        raise pickle.UnpicklingError(f"_frombuffer of a {type(buffer).__name__} refused (bytes only)")
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise pickle.UnpicklingError(f"_frombuffer with dtype {dtype!r} refused (plain numeric dtypes only)")
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise pickle.UnpicklingError(f"_frombuffer with shape {shape!r} refused")
    if order not in ("C", "F"):
        raise pickle.UnpicklingError(f"_frombuffer with order {order!r} refused")
    data = buffer.raw() if isinstance(buffer, pickle.PickleBuffer) else buffer
    return np.frombuffer(data, dtype=dtype).reshape(shape, order=order).copy(order="K")


def _numpy_multiarray() -> Any:
    try:
        return importlib.import_module("numpy._core.multiarray")
    except ImportError:  # numpy 1
        return importlib.import_module("numpy.core.multiarray")


class RestrictedUnpickler(pickle.Unpickler):
    """Numpy arrays, dtypes and scalars, plain containers and the ``records`` / ``enums`` a caller names
    (``(module, class name)`` pairs of the release); any other global raises ``UnpicklingError``."""

    def __init__(self, file: Any, records: Collection[tuple[str, str]] = (),
                 enums: Collection[tuple[str, str]] = ()) -> None:
        super().__init__(file)
        self.records = set(records)
        self.enums = set(enums)

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.records:
            return ReleaseRecord
        if (module, name) in self.enums:
            return _enum_value
        if self.records and (module, name) == ("copyreg", "_reconstructor"):
            return _reconstructor
        if module in NUMPY_MULTIARRAY and name in NUMPY_CONSTRUCTORS:
            return getattr(_numpy_multiarray(), name)
        if module in NUMPY_NUMERIC and name == "_frombuffer":
            return _frombuffer
        if module == "numpy" and name in NUMPY_TYPES:
            return getattr(np, name)
        if (module, name) in PLAIN:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} refused (only numpy arrays, plain containers and "
                                     f"the release's named records load)")


def load_release_pickle(path: Path, records: Collection[tuple[str, str]] = (),
                        enums: Collection[tuple[str, str]] = ()) -> Any:
    """``path`` through :class:`RestrictedUnpickler`; ValueError naming the file when it refuses a global or
    the bytes are not a pickle."""
    try:
        return RestrictedUnpickler(io.BytesIO(Path(path).read_bytes()), records, enums).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError, ImportError) as exc:
        raise ValueError(f"{path}: not readable without executing foreign code ({exc})") from exc
