"""A video's memory: the caption hierarchy and its cache (:mod:`senri.memory.hierarchy`), retrieval over
text (:mod:`senri.memory.retrieval`), and the persistent-memory interface every memory system implements
(:mod:`senri.memory.store`: the ``captions`` store over the caption hierarchy, WorldMM, MAGIC-Video).

Import from the submodules; this package module stays empty so importing one part loads no other.
"""
