"""EG-Agent's memory (Rege et al., "Agentic Very Long Video Understanding"; release facebookresearch/egagent):
an entity graph of timestamped relationships, a 1-fps frame table with image-text vectors, and the transcript,
searched by a plan-and-execute loop. Restated from ``shared/spec/egagent.md`` (the E-* statements).

Modules import downward only: :mod:`.common` (time conventions) ← :mod:`.frames` (frame ranking, E-R2) and
:mod:`.graph` (the entity-graph table and its SQL ladder, E-F4 / E-R4).
"""
