"""The direct-perception specialists' release rules as pure functions (shared/spec/direct_specialists.md).

One module per release: :mod:`.cambrian` (Cambrian-S-7B and the LFP variant's inputs and parsers, C-*, L-I*,
L-A1), :mod:`.lfp` (the LFP streaming memory's block policy, retrieval ranking and greedy loop, L-M*, L-D1),
:mod:`.internvideo3` (I-*) and :mod:`.videochat3` (V-*). Frame indices, sizes, token counts, prompt texts and answer
parsers are computed here, in senri's process, and tested against what the releases' own functions computed
(tests/reference/release_cases/{cambrian_s,internvideo3,videochat3}/); the model itself runs in a release worker
(:mod:`senri.backends.worker`). :mod:`senri.methods.specialist` puts them together.
"""
