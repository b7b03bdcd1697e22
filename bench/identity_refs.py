"""Reference vectors for senri's Resemblyzer voice stand-in (src/senri/memory/identity/resemblyzer_voice.py),
computed by Resemblyzer 0.1.4's OWN code: ``VoiceEncoder.embed_utterance`` on ``audio.normalize_volume`` of the
synthetic voices of tests/identity_fixtures.py, plus its mel frames' shape and partial slices. Written to
tests/reference/generated/identity/resemblyzer.json; tests/test_identity_standins.py compares senri's mel and
encoder (which read only the package's pretrained.pt) against it.

Needs Resemblyzer's own dependencies, which senri's runtime does not (the ``identity-refs`` extra):
    pip install -e '.[identity-refs]'      # librosa 0.11.0, webrtcvad-wheels 2.0.14.post1
    python bench/identity_refs.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests/reference/generated/identity/resemblyzer.json"
CASES = (("low", 3.0, 1), ("high", 2.3, 2), ("low", 7.1, 3), ("high", 4.0, 4))


def main() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from identity_fixtures import voice
    from resemblyzer import VoiceEncoder, __file__ as package_file, audio

    encoder = VoiceEncoder("cpu", verbose=False)
    cases = []
    for speaker, seconds, seed in CASES:
        samples = voice(speaker, seconds, seed)
        normalized = audio.normalize_volume(samples, -30, increase_only=True)
        _, mel_slices = encoder.compute_partial_slices(len(normalized), 1.3, 0.75)
        mels = audio.wav_to_mel_spectrogram(normalized)
        embedding = encoder.embed_utterance(normalized)
        cases.append({"speaker": speaker, "seconds": seconds, "seed": seed, "mel_shape": list(mels.shape),
                      "mel_frame_sums": [round(float(v), 6) for v in mels.sum(axis=1)[:5]],
                      "partial_slices": [[int(s.start), int(s.stop)] for s in mel_slices],
                      "embedding": [round(float(v), 7) for v in embedding]})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"source": "resemblyzer 0.1.4 (PyPI), librosa 0.11.0",
                               "package": str(Path(package_file).parent.name), "cases": cases}, indent=1) + "\n")
    print(f"{OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
