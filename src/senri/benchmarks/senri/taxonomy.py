"""SENRI-Bench's taxonomy: its six task types, the two directions they fall into, and what each code means.

Only SENRI-Bench's own module reads these (its reader, its layout, its glossary) and the demo generator that
writes SENRI-format questions; the stages below ingest know a question's categories, never these codes.
"""

from __future__ import annotations

#: Task type code → direction. Event→Space (ES) ties an event to a place; Space→Event (SE) the reverse.
TASK_DIRECTION: dict[str, str] = {"L": "ES", "RR": "ES", "OC": "ES", "NP": "ES", "RER": "SE", "TER": "SE"}
TASK_TYPES: tuple[str, ...] = tuple(TASK_DIRECTION)
DIRECTIONS: tuple[str, ...] = ("ES", "SE")
#: What each task type and direction code means, for glossaries next to tables.
TASK_NAMES: dict[str, str] = {
    "L": "localization: where an event happened",
    "RR": "relation reasoning: spatial relations among entities and places at an event",
    "OC": "object counting: distinct entities in the context of an event",
    "NP": "navigation planning: recover or plan a route",
    "RER": "region-conditioned event retrieval: what happened at a place",
    "TER": "trajectory event retrieval: what happened along a route",
}
DIRECTION_NAMES: dict[str, str] = {"ES": "Event→Space: an event tied to a place",
                                   "SE": "Space→Event: a place or route tied to an event"}
