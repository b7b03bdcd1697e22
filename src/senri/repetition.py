"""Telling a reply that ran into a repetition loop from one that was merely long.

A small model cut at its token limit has usually not run out of room: it repeats one phrase until any limit
stops it. Retrying such a reply with a higher limit (WorldMM's builder resends, a caption's limit) only buys a
longer loop, so the callers check the reply's end first.
"""

from __future__ import annotations


def looping(text: str, min_words: int = 24, max_period: int = 64) -> bool:
    """Whether ``text`` ends in a repetition loop: its last words repeat with some period of 1…``max_period``
    words for at least ``min_words`` words and at least two full periods beyond the first ("the door the door
    the door …", a sentence said over and over), leaving out a last word the cut left unfinished. A caption cut at its
    token limit this way is retried; a WorldMM builder reply is not resent with a higher limit."""
    words = text.lower().split()
    if len(words) > 1 and text and not text[-1].isspace():
        words = words[:-1]  # a reply cut at its limit usually ends mid-word: its last word is not a repeat yet
    for period in range(1, min(max_period, len(words) // 3) + 1):
        run = 0
        for k in range(len(words) - 1, period - 1, -1):
            if words[k] != words[k - period]:
                break
            run += 1
        if run >= max(min_words, 2 * period):
            return True
    return False
