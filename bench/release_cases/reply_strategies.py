"""Hypothesis strategies the ParaVT, Video-o3, LongVideo-R1 and VideoARM generators share (issue 60): the
fragments a model's reply and a tool call's arguments are made of — text over all of Unicode (no surrogates),
numbers with their bounds (NaN, infinities, huge integers), JSON values, and the strings a time or number reader
meets."""

from __future__ import annotations

from hypothesis import strategies as st

#: Fragments a model's reply is made of: tags, their broken forms, letters, numbers, unicode and whitespace.
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
SMALL_INT = st.integers(min_value=-5, max_value=20_000)
NUMBER = st.one_of(SMALL_INT, st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.floats(min_value=-10, max_value=5000), st.sampled_from([0, 1, -1, 10**400, 2**63, 1e308]))
JSON_SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT)
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                st.dictionaries(TEXT, inner, max_size=3)),
                          max_leaves=6)


def numeric_text() -> st.SearchStrategy[str]:
    """Strings a time or number reader meets: decimals, exponents, signs, underscores, clock forms, nan/inf,
    non-ASCII digits, blanks and garbage."""
    digits = st.integers(min_value=0, max_value=99).map(str)
    clock = st.lists(digits, min_size=1, max_size=4).map(":".join)
    return st.one_of(
        NUMBER.map(str), clock, TEXT,
        st.sampled_from(["", " ", "nan", "-inf", "Infinity", "1_000", "1e2", " 4.5 ", "٣", "１２", "12s", "1:2:3:4",
                         "::", "1:", ":5", "01:02.5", "00:00:07", "1e400", "0x10", "+3", "-2:30", "1 000",
                         "None", "true", "3.5.1", "½"]))
