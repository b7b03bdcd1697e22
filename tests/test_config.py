import json

import pytest

from senri import config as cfgmod
from senri.methods import METHODS


def test_defaults_select_the_demo_random_blind_and_memory_search_on_the_embedded_model():
    cfg = cfgmod.compose()
    assert cfg["dataset"]["name"] == "demo"
    assert cfgmod.runs(cfg) == [("random", "none"), ("blind", "smollm2"), ("blind_letter", "smollm2"),
                                ("blind_debiased", "smollm2"), ("memory_search", "smollm2")]
    assert cfg["method"]["memory_search"]["uses_memory"]  # make demo runs a memory method
    assert cfg["model"]["smollm2"]["backend"] == "llamacpp"
    assert cfg["memory"]["captioner"] == "perception" and cfg["captioner_model"] is None
    for group in ("dataset", "method", "model", "sampling", "memory", "track", "anonymize"):
        assert group in cfg


def test_a_vlm_captioner_brings_its_model_config_and_only_memory_methods_read_the_memory_slice():
    cfg = cfgmod.compose(["memory.captioner=qwen25vl7b_vllm"])
    assert cfg["captioner_model"]["backend"] == "vllm" and "qwen25vl7b_vllm" not in cfg["model"]
    assert cfgmod.stage_slice(cfg, "memory")["captioner_model"]["backend"] == "vllm"
    assert "memory" in cfgmod.stage_slice(cfg, "answer", method="memory_search", model="smollm2")
    assert "memory" not in cfgmod.stage_slice(cfg, "answer", method="blind", model="smollm2")
    with pytest.raises(cfgmod.ConfigError, match="memory.captioner"):
        cfgmod.compose(["memory.captioner=no_such_model"])


@pytest.mark.parametrize(
    "override, path",
    [
        ("+sampling.foo=1", "config.sampling.foo: unknown key"),
        ("sampling.jpeg_quality=abc", "config.sampling.jpeg_quality: 'abc' is not of type 'integer'"),
        ("sampling.plans.uniform_512.n=0", "config.sampling.plans.uniform_512.n: 0 is less than the minimum of 1"),
        ("seed=-1", "config.seed"),
        ("+method.x={implementation:random,approach:baseline,uses_model:false,extra:1}", "config.method.x.extra: unknown key"),
        ("+method.y={implementation:nope,approach:baseline,uses_model:false}", "config.method.y.implementation"),
        ("dataset.demo.fps=fast", "config.dataset.demo.fps"),
        ("+dataset.demo.questions_per_task.XY=1", "config.dataset.demo.questions_per_task.XY: unknown key"),
        ("dataset.demo.questions_per_task.L=3", "config.dataset.demo.questions_per_task sums to 9 a video"),
        ("dataset.demo.questions_per_task.NP=3 dataset.demo.questions_per_task.L=4",
         "config.dataset.demo.questions_per_task asks more than 4 places a video allow: {'NP': (3, 1)}"),
        ("+model.smollm2.base_url=http://x", "config.model.smollm2.base_url: unknown key"),
        ("model.smollm2.sha256=abc", "config.model.smollm2.sha256"),
        ("method.blind.answer_format=letters", "config.method.blind.answer_format"),
        ("+model.api={backend:openai,model:m}", "config.model.api: 'base_url' is a required property"),
    ],
)
def test_invalid_config_names_the_key_path(override, path):
    with pytest.raises(cfgmod.ConfigError) as err:
        cfgmod.compose(override)
    assert path in str(err.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(cfgmod.ConfigError) as err:
        cfgmod.compose("+sampling.foo=1 seed=-1 probe.keyframe_scan_s=x")
    message = str(err.value)
    assert "config.sampling.foo" in message and "config.seed" in message and "config.probe.keyframe_scan_s" in message


def test_overrides_as_string_or_list():
    assert cfgmod.compose("seed=3 method=[random]")["seed"] == 3
    assert cfgmod.compose(["seed=4"])["seed"] == 4
    assert cfgmod.parse_overrides("a=1 'b=x y'") == ["a=1", "b=x y"]


def test_unknown_group_option_fails():
    with pytest.raises(cfgmod.ConfigError):
        cfgmod.compose("method=[no_such_method]")


def test_slices_carry_only_what_a_stage_reads():
    base = cfgmod.compose()
    changed_sampling = cfgmod.compose("sampling.plans.uniform_512.n=256")
    changed_seed = cfgmod.compose("seed=9")
    for stage in ("demo_data", "ingest", "probe", "aggregate"):
        a, b = cfgmod.stage_slice(base, stage), cfgmod.stage_slice(changed_seed, stage)
        assert cfgmod.canonical_json(a) == cfgmod.canonical_json(b), stage
    answer = lambda c: cfgmod.canonical_json(cfgmod.stage_slice(c, "answer", method="random", model="none"))  # noqa: E731
    assert answer(base) == answer(changed_sampling)  # random reads no frames
    assert answer(base) != answer(changed_seed)
    frames = lambda c: cfgmod.stage_slice(c, "frames", plan="uniform_512")  # noqa: E731
    assert frames(base) != frames(changed_sampling) and frames(base) == frames(changed_seed)


def test_canonical_json_is_order_independent():
    assert cfgmod.canonical_json({"b": 1, "a": [1, {"y": 2, "x": 1}]}) == cfgmod.canonical_json(
        {"a": [1, {"x": 1, "y": 2}], "b": 1}
    )


def test_schema_lists_exactly_the_registered_method_implementations():
    schema = json.loads(cfgmod.CONFIG_SCHEMA.read_text())
    assert sorted(schema["$defs"]["method"]["properties"]["implementation"]["enum"]) == METHODS.names()


def test_schema_lists_exactly_the_registered_backends():
    from senri.backends import BACKENDS, NO_BACKEND

    schema = json.loads(cfgmod.CONFIG_SCHEMA.read_text())
    assert sorted(schema["$defs"]["model"]["properties"]["backend"]["enum"]) == sorted([*BACKENDS.names(), NO_BACKEND])


def test_a_list_of_frame_budgets_is_one_run_and_one_plan_per_budget():
    cfg = cfgmod.compose(["method=[direct]", "method.direct.frames=[32,64]"])
    assert cfgmod.runs(cfg) == [("direct_32", "smollm2"), ("direct_64", "smollm2")]
    assert cfg["method"]["direct_64"]["plan"] == "uniform_64" and cfg["method"]["direct_64"]["frames"] == 64
    assert cfg["sampling"]["plans"]["uniform_32"] == {"kind": "uniform", "n": 32, "placement": "center",
                                                      "accuracy": "auto"}
    single = cfgmod.compose(["method=[direct]"])
    assert cfgmod.runs(single) == [("direct", "smollm2")] and single["method"]["direct"]["plan"] == "uniform_512"


def test_method_that_needs_a_model_without_one_is_rejected():
    cfg = cfgmod.compose()
    cfg["model"] = {}
    cfg["method"]["random"]["uses_model"] = True
    with pytest.raises(cfgmod.ConfigError) as err:
        cfgmod.validate(cfg)
    assert "config.method.random" in str(err.value)


def test_sidecar_next_to_output(tmp_path):
    assert cfgmod.sidecar_path(tmp_path / "x.parquet") == tmp_path / "x.config.yaml"
    assert cfgmod.sidecar_path(tmp_path / "tables") == tmp_path / "tables" / "config.yaml"
    path = cfgmod.write_sidecar(tmp_path / "x.parquet", "probe", {"probe": {"keyframe_scan_s": 5}})
    assert "keyframe_scan_s: 5" in path.read_text()
