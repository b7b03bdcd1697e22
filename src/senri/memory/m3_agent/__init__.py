"""M3-Agent (ByteDance-Seed/m3-agent @0e3e419) as a senri memory system: a multimodal memory graph of face and
voice nodes and the episodic/semantic texts a memorizer writes about them, searched clip by clip by a controller.

shared/spec/omni_memory.md restates the release (M-*, MP*, K-*); the modules here follow it statement by
statement, and tests/test_m3_agent.py checks every release case in tests/reference/release_cases/m3_agent/:

* :mod:`.graph` — the graph (node ids, caps, edges, reinforce/weaken, equivalences → characters, truncation)
  and entity-tag parsing (M-C10, M-C11, M-C15..C18, M-F2);
* :mod:`.retrieval` — query expansion, restriction, clip scores, the normal and the name search, translation
  (M-R1..R7);
* :mod:`.perception` — faces (quality filters, HDBSCAN within a clip, mean-pairwise matching) and voices (the
  diarizer's segments, duration filter, cuts, matching) into graph nodes, and the memorizer's input and reply
  (M-C5..C9, M-C12, M-C13);
* :mod:`.control` — the controller's reply parse and its search turn, and the 5-round loop (M-L1..L4).
"""
