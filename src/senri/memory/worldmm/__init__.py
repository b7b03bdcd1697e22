"""WorldMM's persistent memory (wgcyeo/WorldMM, restated in ``shared/spec/memory_systems.md``), one module per part:
:mod:`.common` (times, ids, text vectors), :mod:`.index` (HippoRAG graph, semantic PageRank), :mod:`.build`,
:mod:`.release` (import/export of the release's layout) and :mod:`.store` (the :class:`MemoryStore`). Each imports
only the ones before it; this module imports none of them, so importing one part loads no other.
"""
