"""Cambrian-S-7B in its own environment (envs/cambrian_s.txt), loaded with the release's own classes from the user's
checkout (C-S1). NEVER RUN ON A GPU here: bench/gpu_check.sh's C-G1 is its first real run.

senri sends the frames already padded to the grey square and resized to 384² (C-I3; tested against the release
cases), with the source size for the unpad crop, and the whole ChatML prompt (C-P1); this adapter only rescales
and normalises through the release's SigLIP processor, tokenises the prompt with the release's
``tokenizer_image_token`` and calls the release model's ``generate`` as lmms-eval's ``cambrians`` class does:
greedy, one beam, ``max_new_tokens`` from the request (C-D1). Processed frames are kept per video, so the video's
other questions reuse them (S2).

The LFP streaming loop (L-M1…L-M7 on the patched attention) is not written for the model yet: a request whose
frames carry an ``lfp`` option is refused with an error (senri's block policy, senri.specialists.lfp, is
written and tested; wiring it to the release's KV caches needs the GPU check L-G1). ``mode: standard`` runs the LFP
weights through this path.
"""

from __future__ import annotations


class CambrianS:
    def __init__(self, options: dict) -> None:
        import torch  # noqa: F401 - the release's environment has it
        from cambrian.mm_utils import get_model_name_from_path
        from cambrian.model.builder import load_pretrained_model

        model = options["model"]
        self.device = options.get("device", "cuda:0")
        self.tokenizer, self.model, self.processors, _ = load_pretrained_model(
            model, None, get_model_name_from_path(model), device_map=self.device)
        config = self.model.config
        config.video_max_frames = int(options.get("max_frames", 128))
        config.video_fps = 1
        config.video_force_sample = False
        config.add_time_instruction = False
        config.miv_token_len = int(options.get("miv_token_len", 64))
        config.si_token_len = 729
        config.image_aspect_ratio = "anyres"
        config.anyres_max_subimages = 9
        self.model.eval()
        self.model.to(self.device)
        self._video: tuple[tuple[str, ...], list, list] | None = None

    def info(self) -> dict:
        import cambrian
        import transformers

        return {"transformers": transformers.__version__, "release_package": cambrian.__file__,
                "generation_config": self.model.generation_config.to_dict()}

    def _visual(self, frames: dict):
        import torch
        from PIL import Image

        paths = tuple(frames["paths"])
        if self._video is None or self._video[0] != paths:
            images = [Image.open(p).convert("RGB") for p in paths]
            tensors = [torch.stack([processor.preprocess(images, return_tensors="pt")["pixel_values"]])
                       for processor in self.processors]
            width, height = frames["source_wh"]
            self._video = (paths, tensors, [(width, height, len(paths))])
        return self._video[1], self._video[2]

    def generate(self, request: dict) -> dict:
        import torch
        from cambrian.constants import IMAGE_TOKEN_INDEX
        from cambrian.mm_utils import tokenizer_image_token

        (message,) = request["messages"]
        frames = next(p["frames"] for p in message["content"] if isinstance(p, dict) and "frames" in p)
        if frames.get("options", {}).get("lfp"):
            raise RuntimeError("the LFP streaming memory is not wired to the release model yet (GPU check L-G1); "
                               "run method.cambrian_s_lfp.mode=standard")
        prompt = "".join(p for p in message["content"] if isinstance(p, str))
        tensors, sizes = self._visual(frames)
        generation = request["generation"]
        input_ids = tokenizer_image_token(prompt, self.tokenizer, IMAGE_TOKEN_INDEX, return_tensors="pt")
        with torch.inference_mode():
            output = self.model.generate(
                inputs=input_ids.unsqueeze(0).to(self.device), images=[t.half().to(self.device) for t in tensors],
                image_sizes=sizes, use_cache=True, do_sample=False, temperature=0, top_p=None, num_beams=1,
                max_new_tokens=int(generation["max_tokens"]))
        text = self.tokenizer.batch_decode(output, skip_special_tokens=True)[0].strip()
        new = int(output.shape[-1])
        return {"text": text, "prompt_tokens": int(input_ids.shape[-1]), "completion_tokens": new,
                "finish_reason": "length" if new >= int(generation["max_tokens"]) else "stop"}
