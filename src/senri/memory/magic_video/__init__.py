"""MAGIC-Video's persistent memory (lijiazheng0917/MAGIC-video, restated in ``shared/spec/memory_systems.md``), one
module per part: :mod:`.graph` (records, ids, the graph builder), :mod:`.search` (seeds, quotas, chains), :mod:`.build`,
:mod:`.release` (import of the release's layout) and :mod:`.store` (the :class:`MemoryStore`). Each imports only the
ones before it; this module imports none of them, so importing one part loads no other.
"""
