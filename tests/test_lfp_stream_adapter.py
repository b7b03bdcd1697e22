"""Cambrian-S-LFP's stream mode in the worker adapter (src/senri/workers/cambrian_model.py), run in senri's own
CPU torch on a SCRIPTED stand-in of the release's modules (a fake ``cambrian`` package and ``qwen2_monkey_patch``
written by the test), the way the release cases' harness scripted the model: every KV token is a one-hot channel
of the frame it came from (the prompt prefix and the newline column have channels of their own), the tower's
features of frame t are one-hot(t), and the LFP head's prediction after frame t has cosine 1 − s_{t+1} with frame
t+1's features, so the adapter itself computes the scripted surprises.

Checked: the surprises the adapter computes; the sensory cache each frame attends to (the release's frame_calls);
the long-term memory of every layer after the stream equals senri's ``build_memory`` blocks (which frames, what
weights, lengths), i.e. the ops reach the tensors; the patched classes are swapped in for the stream and restored;
the memory is built once and reused by the next question with fresh block-length lists for the retrieval (which
appends to them, L-M7); the answer comes from ``greedy_decode`` on the model's logits. The real release classes on
a tiny random checkpoint run in ``python bench/worker_envs.py`` (needs PyPI); real weights: GPU check L-G1."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from senri.specialists import cambrian, lfp

SURPRISES = [1.0, 0.9, 0.2, 0.6, 0.1, 0.8, 0.3]
N = len(SURPRISES)
D = N + 2  # channels: frames 0…N−1, N = the prompt's text, N+1 = the newline column
PRESET = {"window": 2, "method": "drop_merge", "topk": 3, "threshold": 0.5, "budget": 100, "ratio": 2}

FAKE_RELEASE = {
    "cambrian/__init__.py": "",
    "cambrian/constants.py": "IMAGE_TOKEN_INDEX = -200\n",
    "cambrian/mm_utils.py": '''
        import torch

        def get_model_name_from_path(path):
            return "fake"

        def tokenizer_image_token(prompt, tokenizer, image_token_index, return_tensors=None):
            before, after = prompt.split("<image>")
            return torch.tensor([5] * len(before) + [image_token_index] + [6] * len(after))
    ''',
    "cambrian/model/__init__.py": "",
    "cambrian/model/cambrian_arch.py": '''
        def unpad_image(tensor, original_size):  # the release's rule, landscape only
            width, height = original_size
            rows = tensor.shape[1]
            padding = (rows - int(height * (tensor.shape[2] / width))) // 2
            return tensor[:, padding:rows - padding, :]
    ''',
    "cambrian/model/language_model/__init__.py": "",
    "cambrian/model/language_model/cambrian_qwen2.py": '''
        import torch

        class CambrianQwenModel(torch.nn.Module):
            def forward(self, *args, **kwargs):
                raise AssertionError("the stock forward ran during the stream")
    ''',
    "cambrian/model/builder.py": '''
        import torch
        from types import SimpleNamespace
        from cambrian.model.language_model.cambrian_qwen2 import CambrianQwenModel

        D = %(D)d
        SURPRISES = %(SURPRISES)r

        class StockAttention:
            pass

        class Layer:
            def __init__(self):
                self.self_attn = StockAttention()

        class Inner(CambrianQwenModel):
            def __init__(self):
                super().__init__()
                self.config = SimpleNamespace(miv_token_len=64)
                self.layers = [Layer(), Layer()]
                self.image_newline = torch.nn.functional.one_hot(torch.tensor(D - 1), D).double()

            def mm_projector(self, features):
                return features

            def nfp_head(self, hidden):
                # after frame t (its grid tokens are one-hot(t)), predict frame t+1's features at cosine 1 - s
                t = int(hidden[0, 0].argmax())
                s = SURPRISES[t + 1] if t + 1 < len(SURPRISES) else 0.0
                vector = torch.zeros(D, dtype=torch.float64)
                if t + 1 < D - 2:
                    vector[t + 1] = 1 - s
                vector[D - 2] = (1 - (1 - s) ** 2) ** 0.5
                return vector.expand(hidden.shape[0], hidden.shape[1], D)

        class Output(SimpleNamespace):
            pass

        class FakeLM:
            def __init__(self):
                self.inner = Inner()
                self.config = SimpleNamespace(num_hidden_layers=2)
                self.generation_config = SimpleNamespace(to_dict=lambda: {})
                self.calls = []

            def get_model(self):
                return self.inner

            def eval(self):
                return self

            def to(self, device):
                return self

            def get_input_embeddings(self):
                # prefix tokens (5) → the text channel; question tokens (6) and answers → the text channel too
                return lambda ids: torch.nn.functional.one_hot(torch.full(ids.shape, D - 2), D).double()

            def encode_images(self, images):
                (pixels,) = images  # (B, 3, 4, 4), frame t's pixels all t
                frames = pixels[:, 0, 0, 0].round().long()
                return [torch.nn.functional.one_hot(frames, D).double()[:, None, :].expand(-1, 729, D)]

            def __call__(self, input_ids=None, inputs_embeds=None, past_key_values=None, **kwargs):
                out = self.inner.forward(input_ids, None, None, past_key_values, inputs_embeds, True, False, True,
                                         True)
                length = out.hidden_states.shape[1]
                self.calls.append(length)
                logits = torch.zeros(1, length, 8, dtype=torch.float64)
                logits[0, -1, 2 if input_ids is None else 1] = 5.0  # "A", then EOS
                return Output(logits=logits, hidden_states=out.hidden_states, past_key_values=out.past_key_values)

        class Tokenizer:
            pad_token_id, eos_token_id = 0, 1

            def batch_decode(self, sequences, skip_special_tokens=True):
                return ["".join({2: "A", 3: "B"}.get(int(i), "") for i in seq) for seq in sequences]

        class Processor:
            def preprocess(self, images, return_tensors="pt"):
                return {"pixel_values": torch.stack([torch.full((3, 4, 4), float(image.getpixel((0, 0))[0]))
                                                     for image in images])}

        def load_pretrained_model(model, base, name, device_map=None, device=None):
            return Tokenizer(), FakeLM(), [Processor()], 2048
    ''' % {"D": D, "SURPRISES": SURPRISES},
    "qwen2_monkey_patch.py": '''
        import torch
        from types import SimpleNamespace

        RETRIEVALS = []

        class Qwen2SdpaAttention:
            pass

        def cambrian_qwen2_forward(self, input_ids, attention_mask, position_ids, past_key_values, inputs_embeds,
                                   use_cache, output_attentions, output_hidden_states, return_dict):
            assert use_cache and output_hidden_states and return_dict and not output_attentions
            if inputs_embeds is None:  # a decoded token: the text channel
                width = past_key_values[0][0].shape[-1]
                inputs_embeds = torch.nn.functional.one_hot(torch.full(input_ids.shape, width - 2), width).double()
            new = inputs_embeds[:, None]  # (batch, one kv head, tokens, channels): keys = values = the token
            cache = []
            for i, layer in enumerate(self.layers):
                assert type(layer.self_attn) is Qwen2SdpaAttention
                past = past_key_values[i] if past_key_values is not None else None
                keys = new if past is None else torch.cat([past[0], new], dim=2)
                attention = layer.self_attn
                if getattr(attention, "use_retrieval", False):  # as the release: once, appending the question
                    attention.cache_lengths.append(new.shape[2])
                    RETRIEVALS.append((i, attention.retrieval_topk, list(attention.cache_modalities),
                                       attention.cache_lengths))
                    del attention.use_retrieval, attention.retrieval_topk
                cache.append((keys, keys.clone()))
            return SimpleNamespace(last_hidden_state=inputs_embeds, past_key_values=tuple(cache),
                                   hidden_states=inputs_embeds)
    ''',
}


@pytest.fixture()
def adapter(tmp_path, monkeypatch):
    pytest.importorskip("torch")  # here, not at the module's top: collecting the suite does not import torch
    from PIL import Image

    for name, text in FAKE_RELEASE.items():
        path = tmp_path / "release" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for t in range(N):  # 16:9 frames (the unpad keeps 4 of 8 rows); frame t's pixels all t
        Image.new("RGB", (32, 18), (t, t, t)).save(tmp_path / f"{t}.png")
    for module in [m for m in sys.modules if m == "cambrian" or m.startswith("cambrian.")
                   or m in ("qwen2_monkey_patch", "cambrian_model")]:
        monkeypatch.delitem(sys.modules, module)
    workers = __import__("senri.workers", fromlist=["__file__"]).__file__.rsplit("/", 1)[0]
    monkeypatch.syspath_prepend(str(tmp_path / "release"))
    monkeypatch.syspath_prepend(workers)
    import cambrian_model

    model = cambrian_model.CambrianS({"model": "fake", "device": "cpu"})
    return model, tmp_path


def request(folder, question: str) -> dict:
    frames = {"paths": [str(folder / f"{t}.png") for t in range(N)], "rate": 1.0, "indices": list(range(N)),
              "times_s": [], "fmt": "png", "timeline": "", "source_wh": [320, 180], "options": {"lfp": PRESET}}
    prompt = f"sys<image>\n{question}"
    return {"messages": [{"role": "user", "content": [{"frames": frames}, prompt]}],
            "generation": {"max_tokens": 16, "temperature": 0.0, "repetition_penalty": 1.1}}


def composition(key) -> dict:
    """{frame: weight} of a block's keys (the newline column's own channel left out)."""
    mean = key[0, 0, :, :N + 1].mean(dim=0)
    mean = mean / mean.sum()
    return {("text" if c == N else str(c)): pytest.approx(float(w)) for c, w in enumerate(mean) if w > 1e-9}


def test_the_stream_builds_the_policy_s_memory_on_the_caches_and_reuses_it(adapter):
    model, folder = adapter
    import qwen2_monkey_patch

    reply = model.generate(request(folder, "Where?"))
    assert reply["text"] == "A" and reply["completion_tokens"] == 2  # "A", then EOS ends the loop
    trace = reply["lfp"]
    assert trace["frames"] == N and trace["grid_hw"] == [4, 8] and trace["prefix_tokens"] == 3
    assert trace["first_surprises"] == pytest.approx(SURPRISES[:8], abs=1e-6)
    want = lfp.build_memory(SURPRISES, cambrian.unpad_grid(320, 180).hw, 3, PRESET["window"], PRESET["threshold"],
                            PRESET["ratio"], PRESET["method"], PRESET["budget"])
    assert trace["sensory_lengths_first"] == [length for _, length in want.frame_calls]
    memory = model._memory[1]
    assert memory["lengths"] == want.lengths and trace["memory_tokens"] == want.total
    assert memory["modalities"] == ["T" if b.is_text else "I" for b in want.blocks]
    for keys, _ in memory["kv"]:  # every layer holds the policy's blocks: which frames, with what weights
        blocks, start = [], 0
        for length in memory["lengths"]:
            blocks.append(composition(keys[..., start:start + length, :]))
            start += length
        assert blocks == [dict(b.frames) for b in want.blocks]
    # the stock classes are back after the stream
    layer = model.model.get_model().layers[0]
    assert type(layer.self_attn).__name__ == "StockAttention" and "forward" not in vars(model.model.get_model())
    # retrieval on every layer, top-k from the preset, each given a fresh copy of the lengths to append to
    assert [(i, k) for i, k, _, _ in qwen2_monkey_patch.RETRIEVALS] == [(0, 3), (1, 3)]
    assert qwen2_monkey_patch.RETRIEVALS[0][3] == want.lengths + [len("\nWhere?")]

    calls = len(model.model.calls)
    second = model.generate(request(folder, "When?"))
    assert second["lfp"]["memory_reused"] and second["text"] == "A"
    assert model.model.calls[calls:] == [len("\nWhen?"), 1]  # no frame ran again: the question, one decode step
    assert memory["lengths"] == want.lengths  # the retrieval appended to its copies only
    assert qwen2_monkey_patch.RETRIEVALS[-1][3] == want.lengths + [len("\nWhen?")]
