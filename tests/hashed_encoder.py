"""Deterministic text vectors for the memory systems' tests: hashed word counts, so cosine similarity is word
overlap and every ranking a test expects is known in advance.

A module of its own (not conftest) because Snakemake jobs import it too: a DAG test names
``hashed_encoder:HashedWords`` as WorldMM's ``text_embedder`` (with ``tests/`` on the jobs' path), and its store
and answer jobs then load neither torch nor MiniLM, which cost each of them seconds."""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

import numpy as np

from senri.memory.worldmm.common import TextEncoder


def hashed_words(texts: Sequence[str], dim: int) -> np.ndarray:
    """Hashed word counts in ``dim`` bins, L2-normalised, one row per text."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


class HashedWords(TextEncoder):
    """:func:`hashed_words` in 512 bins as a WorldMM text encoder (``text_embedder: hashed_encoder:HashedWords``)."""

    name = "hashed-words-test"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return hashed_words(list(texts), 512)
