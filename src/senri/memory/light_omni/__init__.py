"""Light-Omni (Clare-Nie/Light-Omni @59f83fc) as senri reimplements it: a streaming omni memory.

The release streams a video through a patched Qwen2.5-Omni-7B in 1-s units cut by voice activity
(``stream``), writes one memory-adapter log per segment, merges short-term memory in levels of 8, archives
logs in batches to a vector index of episodic items and keeps semantic facts and face profiles
(``memory``); answering is one latent forward, one retrieval and one generation (``latent``, ``replies``).
Spec: shared/spec/omni_memory.md (L-*, LP*, K-12..K-19); release cases: tests/reference/release_cases/light_omni.

Everything here is pure (no model): the model calls go through :class:`senri.memory.light_omni.memory.MemoryModel`,
which the engine implements and the tests script.
"""
