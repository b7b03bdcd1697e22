"""Image-text clip embeddings for MAGIC-Video's visual memory (G-C5) and its visual seeds (G-R2).

The release embeds each 30-s clip with VLM2Vec-V2.0 (a Qwen2-VL tuned for retrieval: 16 frames, the last
token's final hidden state, L2-normalised, instruction "Represent the given video.") and each query with the
same model, text only. This is that recipe for any image-text-to-text model transformers loads from a local
folder (the ``embedder`` model config's ``path``): the clip's frames go in as images with the instruction,
the query as text, and the vector is the last token's final hidden state, L2-normalised. Real VLM2Vec weights
are a model config away; the tests build a tiny random LLaVA on the spot (``tests/tiny_vlm.py``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

log = logging.getLogger(__name__)

CLIP_INSTRUCTION = "Represent the given video."
QUERY_INSTRUCTION = "Find a video that matches: "


class ClipEmbedder:
    """Last-token embeddings of clips (frames + instruction) and queries (text) from one local model."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        if not config.get("path"):
            raise ValueError("memory_system.magic_video.models.embedder: the model config needs 'path' (a local "
                             "model folder transformers can load, e.g. VLM2Vec-V2.0)")
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.torch = torch
        self.config = dict(config)
        device = str(config.get("device", "auto"))
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        dtype_name = str(config.get("dtype", "auto"))
        path = str(Path(config["path"]).expanduser())
        self.processor = AutoProcessor.from_pretrained(path)
        self.model = AutoModelForImageTextToText.from_pretrained(
            path, dtype="auto" if dtype_name == "auto" else getattr(torch, dtype_name)).to(self.device).eval()

    def _last_token(self, images: Sequence[Any], text: str) -> np.ndarray:
        content = [{"type": "image"} for _ in images] + [{"type": "text", "text": text}]
        prompt = self.processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                    add_generation_prompt=False)
        inputs = self.processor(text=[prompt], images=list(images) or None, return_tensors="pt").to(self.device)
        with self.torch.inference_mode():
            hidden = self.model(**inputs, output_hidden_states=True).hidden_states[-1]
        mask = inputs["attention_mask"][0]
        last = int(mask.nonzero().max())  # the prompt's last real token
        vector = hidden[0, last].float()
        return self.torch.nn.functional.normalize(vector, dim=-1).cpu().numpy()

    def embed_clip(self, frames: Sequence[np.ndarray]) -> np.ndarray:
        from PIL import Image

        return self._last_token([Image.fromarray(f) for f in frames], CLIP_INSTRUCTION)

    def embed_query(self, query: str) -> np.ndarray:
        return self._last_token([], QUERY_INSTRUCTION + query)


def clip_vectors(embedder: ClipEmbedder, video: Path, spans: Sequence[tuple[float, float]], n_frames: int = 16,
                 short_side: int | None = 360) -> np.ndarray:
    """One vector per clip span: ``n_frames`` frames spread evenly over the span (their midpoints), decoded
    from ``video``. A clip none of whose frames decodes raises (a visual memory with silent holes would seed
    the wrong clips)."""
    from senri.decode import read_frames

    out = []
    for start, end in spans:
        step = (end - start) / n_frames
        times = [start + step * (k + 0.5) for k in range(n_frames)]
        frames = [f.image for f in read_frames(video, times, short_side=short_side) if f.image is not None]
        if not frames:
            raise ValueError(f"{video}: no frame of the clip {start:g}-{end:g} s decodes")
        out.append(embedder.embed_clip(frames))
    return np.stack(out).astype(np.float32) if out else np.zeros((0, 1), dtype=np.float32)
