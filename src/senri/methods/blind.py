"""``blind``: question and options only, no visual input — the papers' no-visual-input baseline.

It measures what a model gets right from language priors alone; a method that does not beat it is not
using the video.
"""

from __future__ import annotations

from senri.methods.prompted import PromptedChoice


class Blind(PromptedChoice):
    approach = "baseline"
    uses_model = True
