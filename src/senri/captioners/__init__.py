"""Captioners, found by name through :data:`CAPTIONERS`: anything that turns a clip into text for the memory.

``perception`` measures (OCR, ego-motion, detections) and needs no GPU; ``vlm`` asks any backend that takes
images. The memory config's ``captioner`` names ``perception`` or a model config; adding a captioner is
one module implementing :class:`senri.captioners.base.Captioner` plus one registration line here.
"""

from senri.registry import Registry

CAPTIONERS = Registry("captioner")
CAPTIONERS.register("perception", "senri.captioners.perception:PerceptionCaptioner")
CAPTIONERS.register("vlm", "senri.captioners.vlm:BackendCaptioner")
