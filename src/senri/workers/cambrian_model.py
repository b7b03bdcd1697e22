"""Cambrian-S-7B and Cambrian-S-7B-LFP in their own environment (envs/cambrian_s.txt), loaded with the release's own
classes from the user's checkout (C-S1, L-S1). Run on CPU only on a tiny random checkpoint built from the release's
classes (``python bench/worker_envs.py``); bench/gpu_check.sh's C-G1 and L-G1 are the first runs on real weights.

**Standard mode** (C, and L with ``mode: standard``). senri sends the frames already padded to the grey square and
resized to 384² (C-I3; tested against the release cases), with the source size for the unpad crop, and the whole
ChatML prompt (C-P1); this adapter only rescales and normalises through the release's SigLIP processor, tokenises
the prompt with the release's ``tokenizer_image_token`` and calls the release model's ``generate`` as lmms-eval's
``cambrians`` class does: greedy, one beam, ``max_new_tokens`` from the request (C-D1).

**Stream mode** (L; the request's frames carry ``options.lfp``: the preset's W, τ, r, method, B, top-k). senri's
restatement of the release's predictive-sensing loop (``cambrians_vsr.py`` ``generate_until``; spec L-M1…L-M7,
L-D1) on the release's model, with the release's patched Qwen2 attention (``qwen2_monkey_patch.py``, imported
from the checkout's lmms-eval/) swapped in for the stream only:

- vision features in blocks of 128 frames: the tower's features and their projection, both interpolated
  bilinearly to √miv_token_len², both unpadded with the source aspect (L-I2);
- the prompt's tokens before ``<image>`` run once: block 0 (L-M2);
- each frame's grid + newline column runs against the sensory cache only; its surprise is 1 − the mean cosine
  between the LFP head's prediction from the previous frame (newline column dropped) and this frame's
  interpolated tower features, s_0 = 1 (L-M3);
- what the caches keep, pool and drop is decided by senri's :class:`StreamPolicy` (``senri/specialists/lfp.py``,
  the same code the CPU tests run against the release's own cases), whose ops are applied to every layer's
  key/value blocks here (L-M4…L-M6);
- the memory is built once per video (and per prompt prefix and preset) and reused by the video's questions
  (L-M9): each question gets fresh block-length lists, since the retrieval appends to them (L-M7);
- the question's tokens after ``<image>`` run on the memory with per-layer retrieval (top-k > 1), then senri's
  ``greedy_decode`` (L-D1: arg-max, 1.1 penalty on ids already out, pad id included, at most max_new_tokens).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

#: senri's own pure modules this adapter loads by file (standard library + numpy): part of its code identity
#: (senri.backends.worker.worker_code_digest reads this line).
SENRI_FILES = ("specialists/lfp.py",)


def load_policy():
    """senri's LFP block policy (``senri/specialists/lfp.py``), loaded by file: the worker environment has numpy
    but not senri."""
    name = "senri_lfp_policy"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[1] / SENRI_FILES[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


class CambrianS:
    def __init__(self, options: dict) -> None:
        import torch  # noqa: F401 - the release's environment has it
        from cambrian.mm_utils import get_model_name_from_path
        from cambrian.model.builder import load_pretrained_model

        model = options["model"]
        self.device = options.get("device", "cuda:0")
        self.tokenizer, self.model, self.processors, _ = load_pretrained_model(
            model, None, get_model_name_from_path(model), device_map=self.device,
            device="cuda" if self.device.startswith("cuda") else self.device)
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
        self._memory: tuple[tuple, dict] | None = None
        self.last_stream: dict = {}

    def info(self) -> dict:
        import cambrian
        import torch
        import transformers

        return {"transformers": transformers.__version__, "torch": torch.__version__,
                "release_package": cambrian.__file__, "model_class": type(self.model).__name__,
                "lfp_head": hasattr(self.model.get_model(), "nfp_head"),
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
        (message,) = request["messages"]
        frames = next(p["frames"] for p in message["content"] if isinstance(p, dict) and "frames" in p)
        prompt = "".join(p for p in message["content"] if isinstance(p, str))
        if frames.get("options", {}).get("lfp"):
            return self.generate_stream(frames, prompt, request["generation"])
        return self.generate_standard(frames, prompt, request["generation"])

    def generate_standard(self, frames: dict, prompt: str, generation: dict) -> dict:
        import torch
        from cambrian.constants import IMAGE_TOKEN_INDEX
        from cambrian.mm_utils import tokenizer_image_token

        tensors, sizes = self._visual(frames)
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

    # ------------------------------------------------------------------------------------------- stream (L)
    def _patched(self):
        """The release's patched attention and model forward on this model's instances for the stream's calls
        (L-M1), restored afterwards so a standard-mode request in the same worker runs the stock classes."""
        import contextlib
        import types

        from cambrian.model.language_model.cambrian_qwen2 import CambrianQwenModel
        from qwen2_monkey_patch import Qwen2SdpaAttention, cambrian_qwen2_forward

        model = self.model.get_model()

        @contextlib.contextmanager
        def patched():
            classes = [layer.self_attn.__class__ for layer in model.layers]
            for layer in model.layers:
                layer.self_attn.__class__ = Qwen2SdpaAttention
            model.forward = types.MethodType(cambrian_qwen2_forward, model)
            try:
                yield
            finally:
                del model.forward  # back to CambrianQwenModel.forward
                for layer, cls in zip(model.layers, classes):
                    layer.self_attn.__class__ = cls
                assert type(model).forward is CambrianQwenModel.forward

        return patched()

    def _features(self, frames: dict):
        """L-I2: the projected and the tower features of every frame, interpolated to the miv grid and unpadded
        with the source aspect, in blocks of 128 frames."""
        import math

        import torch
        import torch.nn.functional as F
        from cambrian.model.cambrian_arch import unpad_image

        (pixels,), _ = self._visual(frames)
        pixels = pixels.flatten(0, 1)
        side = int(math.sqrt(self.model.get_model().config.miv_token_len))
        projected, tower = [], []
        for start in range(0, pixels.size(0), 128):
            chunk = pixels[start:start + 128].half().to(self.device)
            vit = self.model.encode_images([chunk])[0]
            proj = self.model.get_model().mm_projector(vit)
            n = int(math.sqrt(proj.size(1)))
            proj = proj.unflatten(1, (n, n)).permute(0, 3, 1, 2)
            vit = vit.unflatten(1, (n, n)).permute(0, 3, 1, 2)
            if n != side:
                proj = F.interpolate(proj, size=(side, side), mode="bilinear", align_corners=False)
                vit = F.interpolate(vit, size=(side, side), mode="bilinear", align_corners=False)
            projected.append(proj.permute(0, 2, 3, 1))
            tower.append(vit.permute(0, 2, 3, 1))
        size = frames["source_wh"]
        return (unpad_image(torch.cat(projected), size), unpad_image(torch.cat(tower), size))

    def _stream(self, frames: dict, prefix_ids, settings: dict) -> dict:
        """L-M2…L-M6: the long-term memory of the video, per layer (keys before RoPE, values), with its blocks'
        lengths and modalities."""
        import torch

        policy_module = load_policy()
        started = time.monotonic()
        model = self.model
        visual, tower = self._features(frames)
        rows, cols = int(visual.size(1)), int(visual.size(2))
        newline = model.get_model().image_newline
        layers = model.config.num_hidden_layers

        def forward(embeds, past):
            return model(input_ids=None, inputs_embeds=embeds, attention_mask=None, position_ids=None,
                         past_key_values=past, use_cache=True, output_attentions=False, output_hidden_states=True,
                         return_dict=True)

        out = forward(model.get_input_embeddings()(prefix_ids), None)
        prefix = [tuple(kv) for kv in out.past_key_values]
        policy = policy_module.StreamPolicy((rows, cols), int(prefix_ids.size(1)), int(settings["window"]),
                                            float(settings["threshold"]), int(settings["ratio"]),
                                            str(settings["method"]), int(settings["budget"]))
        sensory = [[] for _ in range(layers)]
        memory = [[kv] for kv in prefix]

        def pool(kv):
            return tuple(policy_module.pool_block(x, rows, cols + 1, policy.ratio) for x in kv)

        def average(a, b):
            return ((a[0] + b[0]) / 2.0, (a[1] + b[1]) / 2.0)

        def apply(ops):
            for layer in range(layers):
                for op in ops:
                    policy_module.apply_op(op, sensory[layer], memory[layer], pool, average)

        surprises, calls, prediction = [], [], None
        for t in range(visual.size(0)):
            if t == 0:
                surprise = 1.0
            else:
                predicted = prediction.unflatten(1, (rows, cols + 1))[:, :, :-1]
                target = tower[t:t + 1].to(predicted.device)
                surprise = 1.0 - torch.cosine_similarity(predicted.flatten(1, 2), target.flatten(1, 2),
                                                         dim=-1).mean(1).item()
            past = [(torch.cat([prefix[i][0], *(kv[0] for kv in sensory[i])], dim=2),
                     torch.cat([prefix[i][1], *(kv[1] for kv in sensory[i])], dim=2)) for i in range(layers)]
            calls.append(int(past[0][0].size(2)))
            grid = torch.cat([visual[t:t + 1], newline[None, None, None, :].expand(1, rows, 1, -1)], dim=2)
            out = forward(grid.flatten(1, 2), past)
            prediction = model.get_model().nfp_head(out.hidden_states)
            for i, (before, after) in enumerate(zip(past, out.past_key_values)):
                seen = before[0].size(2)
                sensory[i].append((after[0][..., seen:, :].clone(), after[1][..., seen:, :].clone()))
            surprises.append(surprise)
            apply(policy.add_frame(surprise))
        apply(policy.finish())
        blocks = policy.memory
        return {"kv": [(torch.cat([kv[0] for kv in layer], dim=2), torch.cat([kv[1] for kv in layer], dim=2))
                       for layer in memory],
                "lengths": [b.length for b in blocks], "modalities": ["T" if b.is_text else "I" for b in blocks],
                "trace": {"frames": len(surprises), "grid_hw": [rows, cols], "prefix_tokens": int(prefix_ids.size(1)),
                          "memory_blocks": len(blocks), "memory_tokens": sum(b.length for b in blocks),
                          "first_surprises": [round(s, 6) for s in surprises[:8]],
                          # a short stream's every surprise and its layer-0 cache's block lengths (read from the
                          # tensors), for checks against the policy
                          **({"surprises": surprises, "lengths": [int(kv[0].size(2)) for kv in memory[0]]}
                             if len(surprises) <= 256 else {}),
                          "layers_agree": all([int(kv[0].size(2)) for kv in layer] == [b.length for b in blocks]
                                              for layer in memory),
                          "sensory_lengths_first": calls[:8], "stream_s": round(time.monotonic() - started, 3)}}

    def generate_stream(self, frames: dict, prompt: str, generation: dict) -> dict:
        import json

        import torch
        from cambrian.constants import IMAGE_TOKEN_INDEX
        from cambrian.mm_utils import tokenizer_image_token

        settings = frames["options"]["lfp"]
        input_ids = tokenizer_image_token(prompt, self.tokenizer, IMAGE_TOKEN_INDEX,
                                          return_tensors="pt").unsqueeze(0).to(self.device)
        at = int(torch.where(input_ids[0] == IMAGE_TOKEN_INDEX)[0][0])
        prefix_ids, question_ids = input_ids[:, :at], input_ids[:, at + 1:]
        key = (tuple(frames["paths"]), json.dumps(settings, sort_keys=True), tuple(prefix_ids[0].tolist()))
        policy_module = load_policy()
        with torch.inference_mode(), self._patched():
            reused = self._memory is not None and self._memory[0] == key
            if not reused:
                self._memory = (key, self._stream(frames, prefix_ids, settings))
            memory = self._memory[1]
            topk = int(settings.get("topk", 1))
            if topk > 1:
                for i, layer in enumerate(self.model.get_model().layers):
                    attention = layer.self_attn
                    attention.use_retrieval, attention.retrieval_topk = True, topk
                    attention.cache_modalities = list(memory["modalities"])
                    attention.cache_lengths = list(memory["lengths"])  # appended to by the retrieval (L-M7)
            out = self.model(input_ids=None, inputs_embeds=self.model.get_input_embeddings()(question_ids),
                             attention_mask=None, position_ids=None, past_key_values=list(memory["kv"]),
                             use_cache=True, output_attentions=False, output_hidden_states=True, return_dict=True)
            state = {"past": out.past_key_values}

            def step(_: int, previous: int):
                step_out = self.model(input_ids=torch.tensor([[previous]], device=self.device), inputs_embeds=None,
                                      attention_mask=None, position_ids=None, past_key_values=state["past"],
                                      use_cache=True, output_attentions=False, output_hidden_states=True,
                                      return_dict=True)
                state["past"] = step_out.past_key_values
                return step_out.logits[0, -1].float().cpu().numpy()

            pad = self.tokenizer.pad_token_id
            ids, _ = policy_module.greedy_decode(out.logits[0, -1].float().cpu().numpy(), step,
                                                 eos_id=self.tokenizer.eos_token_id,
                                                 pad_id=pad if pad is not None else self.tokenizer.eos_token_id,
                                                 max_new_tokens=int(generation["max_tokens"]),
                                                 penalty=float(generation.get("repetition_penalty") or 1.1))
        text = self.tokenizer.batch_decode([ids], skip_special_tokens=True)[0].strip()
        self.last_stream = dict(memory["trace"], memory_reused=reused)
        print(f"LFP stream: {json.dumps(self.last_stream)}", file=sys.stderr)
        return {"text": text, "prompt_tokens": int(input_ids.shape[-1]) - 1 + memory["trace"]["frames"],
                "completion_tokens": len(ids),
                "finish_reason": "length" if len(ids) >= int(generation["max_tokens"]) else "stop",
                "lfp": self.last_stream}
