"""InternVideo3-8B and VideoChat3-4B in their own environment (envs/hf457.txt: transformers 4.57.x): the checkpoint's
own remote code through ``AutoModelForCausalLM`` + ``AutoProcessor`` with ``trust_remote_code`` (I-S1, V-S1).
NEVER RUN ON A GPU here: bench/gpu_check.sh's I-G1 and V-G1 are its first real runs.

senri sends the frames already at their final size (I: 262,144 px per frame at factor 32; V: JPEG q75 round trip
and the two-stage resize), so the processor runs with ``do_resize=False`` and ``do_sample_frames=False``, and the
video metadata the release gives: I the true rate and source indices (stamps index / rate), V placeholder
metadata at the reported rate (frames 0…n−1, V-I4). The message is one user turn of the request's parts in order
(V: an empty text, the video, the LVBench text; I: the video, the MCQ text), no system turn. Generation: greedy
with ``do_sample=False`` when the request's temperature is 0 (I-D1, D5), else the release's sampling settings
without ``do_sample`` (V-D1: the checkpoint's generation_config decides). The frames are loaded once per video.
"""

from __future__ import annotations


class HFVideoModel:
    def __init__(self, options: dict) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoProcessor

        model, revision = options["model"], options.get("revision")
        dtype = options.get("dtype", "bfloat16")
        self.processor = AutoProcessor.from_pretrained(model, revision=revision, trust_remote_code=True)
        self.model, loading = AutoModelForCausalLM.from_pretrained(
            model, revision=revision, trust_remote_code=True,
            torch_dtype=dtype if dtype == "auto" else getattr(torch, dtype),
            attn_implementation=options.get("attn_implementation", "sdpa"), device_map=options.get("device_map", "auto"),
            output_loading_info=True)
        # V-G1: a checkpoint loaded under the wrong transformers comes up with missing keys and an untied head
        self.missing_keys = sorted(loading.get("missing_keys", []))
        self.model.eval()
        self._video: tuple[tuple[str, ...], list] | None = None

    def info(self) -> dict:
        import transformers

        head, embed = self.model.get_output_embeddings(), self.model.get_input_embeddings()
        return {"transformers": transformers.__version__, "model_class": type(self.model).__name__,
                "generation_config": self.model.generation_config.to_dict(), "missing_keys": self.missing_keys,
                "lm_head_tied": bool(head is not None and embed is not None
                                     and head.weight.data_ptr() == embed.weight.data_ptr())}

    def _frames(self, frames: dict) -> list:
        from PIL import Image

        paths = tuple(frames["paths"])
        if self._video is None or self._video[0] != paths:
            self._video = (paths, [Image.open(p).convert("RGB") for p in paths])
        return self._video[1]

    def generate(self, request: dict) -> dict:
        import torch

        content, videos, metadata = [], [], []
        (message,) = request["messages"]
        for part in message["content"]:
            if isinstance(part, str):
                content.append({"type": "text", "text": part})
                continue
            frames = part["frames"]
            videos.append(self._frames(frames))
            n = len(frames["paths"])
            if frames.get("options", {}).get("placeholder_metadata"):
                metadata.append({"fps": frames["rate"], "frames_indices": list(range(n)), "total_num_frames": n})
            else:
                metadata.append({"fps": frames["rate"], "frames_indices": frames["indices"],
                                 "total_num_frames": (max(frames["indices"]) + 1) if frames["indices"] else n})
            content.append({"type": "video"})
        chat = [{"role": message["role"], "content": content}]
        text = self.processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        inputs = self.processor(text=[text], videos=videos, video_metadata=metadata, do_sample_frames=False,
                                do_resize=False, return_tensors="pt").to(self.model.device)
        generation = request["generation"]
        kwargs = {"max_new_tokens": int(generation["max_tokens"])}
        if generation["temperature"] > 0:
            kwargs.update(temperature=generation["temperature"], top_p=generation["top_p"])
            if generation.get("top_k") is not None:
                kwargs["top_k"] = generation["top_k"]
            torch.manual_seed(int(generation.get("seed") or 0))
        else:
            kwargs["do_sample"] = False
        if generation.get("repetition_penalty") is not None:
            kwargs["repetition_penalty"] = generation["repetition_penalty"]
        with torch.inference_mode():
            output = self.model.generate(**inputs, **kwargs)
        new = output[0, inputs["input_ids"].shape[1]:]
        reply = self.processor.batch_decode([new], skip_special_tokens=True)[0]
        grid = inputs.get("video_grid_thw")
        return {"text": reply, "prompt_tokens": int(inputs["input_ids"].shape[1]), "completion_tokens": int(new.shape[0]),
                "finish_reason": "length" if int(new.shape[0]) >= kwargs["max_new_tokens"] else "stop",
                "video_grid_thw": grid.tolist() if grid is not None else None}
