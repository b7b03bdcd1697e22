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
    cfg = cfgmod.compose(["method=[direct]", "method.direct.frames=[32,64]", "model=[qwen25vl3b_hf]"])
    assert cfgmod.runs(cfg) == [("direct_32", "qwen25vl3b_hf"), ("direct_64", "qwen25vl3b_hf")]
    assert cfg["method"]["direct_64"]["plan"] == "uniform_64" and cfg["method"]["direct_64"]["frames"] == 64
    assert cfg["sampling"]["plans"]["uniform_32"] == {"kind": "uniform", "n": 32, "placement": "center",
                                                      "accuracy": "auto"}
    single = cfgmod.compose(["method=[direct]", "model=[qwen25vl3b_hf]"])
    assert cfgmod.runs(single) == [("direct", "qwen25vl3b_hf")] and single["method"]["direct"]["plan"] == "uniform_512"


def test_a_list_of_max_iterations_is_one_labelled_run_per_value_and_a_new_value_reruns_none_of_the_others():
    """Issue 52: the one list mechanism of ``frames`` expands ``max_iterations`` (Fig. 6(b)); each run's answer
    slice holds its own value only, so widening the list leaves the other runs' params — what Snakemake reruns
    on — unchanged. (``experiment=videolucy_depth``'s ``max_depth`` arms: the dry run in test_workflow.)"""
    import copy

    wider = cfgmod.compose(["experiment=videolucy_iterations"])
    assert cfgmod.runs(wider) == [(f"videolucy_iter{n}", "smollm2") for n in (1, 3, 5, 7)]
    narrower = copy.deepcopy(wider)
    narrower["method"] = {"videolucy": {**wider["method"]["videolucy_iter1"], "max_iterations": [1, 3, 5]}}
    cfgmod.expand_list_parameters(narrower)
    assert list(narrower["method"]) == ["videolucy_iter1", "videolucy_iter3", "videolucy_iter5"]
    for n in (1, 3, 5):
        kept = cfgmod.stage_slice(narrower, "answer", f"videolucy_iter{n}", "smollm2")
        assert kept["method"]["max_iterations"] == n
        assert cfgmod.canonical_json(kept) == cfgmod.canonical_json(
            cfgmod.stage_slice(wider, "answer", f"videolucy_iter{n}", "smollm2"))
    both = {"method": {"videolucy": {"max_depth": ["summary", "fine"], "max_iterations": [1, 5]}}}
    cfgmod.expand_list_parameters(both)
    # two lists: one run per combination, named by each template in LIST_PARAMETERS' order
    assert list(both["method"]) == ["videolucy_iter1_depth_summary", "videolucy_iter1_depth_fine",
                                    "videolucy_iter5_depth_summary", "videolucy_iter5_depth_fine"]
    assert both["method"]["videolucy_iter1_depth_fine"] == {"max_depth": "fine", "max_iterations": 1}
    with pytest.raises(cfgmod.ConfigError, match="config.method.videolucy.max_iterations: an empty list"):
        cfgmod.expand_list_parameters({"method": {"videolucy": {"max_iterations": []}}})


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


#: A text-only model (smollm2) and an OpenAI-compatible server without tool parsing (tools: false) under the
#: methods that need frames or function calling; VideoARM's caption tool on the text-only model.
IMPOSSIBLE = ["model=[smollm2]",
              "+model.toolless={backend:openai,base_url:'http://127.0.0.1:9/v1',model:m,images:true,tools:false}",
              "method=[random,blind,senri_agent,videoarm,direct,videoarm_text_only]",
              "method.videoarm.tool_interface=function_calling", "method.videoarm.tool_models.caption=smollm2"]
IMPOSSIBLE_RUNS = [
    "run senri_agent × smollm2: method 'senri_agent': its verifiers look at frames, but model 'smollm2' takes "
    "neither images nor video",
    "run videoarm × smollm2: method 'videoarm': tool_interface function_calling, but model 'smollm2' has no "
    "function-calling interface",
    "run videoarm × smollm2: method 'videoarm': the controller model 'smollm2' takes no images",
    "run videoarm × toolless: method 'videoarm': tool_interface function_calling, but model 'toolless' has no "
    "function-calling interface",
    "run videoarm × toolless: method 'videoarm': the caption model 'smollm2' takes no images",
    "run direct × smollm2: method 'direct': model 'smollm2' takes no images",
]


def test_a_plan_with_runs_that_cannot_work_is_refused_listing_every_run_once():
    """Issue 40: the check runs where the config turns into runs, on the model configs alone (nothing is
    loaded), so `senri config`, the Snakefile and the served batches refuse the plan before any job."""
    cfg = cfgmod.compose(IMPOSSIBLE)
    lines = [line.split(";")[0] for line in cfgmod.capability_problems(cfg)]
    assert lines == [next(p for p in IMPOSSIBLE_RUNS if line.startswith(p)) for line in lines]
    assert len(lines) == len(IMPOSSIBLE_RUNS) == len(set(lines))
    with pytest.raises(cfgmod.ConfigError, match=r"6 planned run\(s\) cannot work") as refused:
        cfgmod.runs(cfg)
    assert all(p in str(refused.value) for p in IMPOSSIBLE_RUNS)
    # The same methods on models that have what they need plan every run.
    fine = cfgmod.compose(["model=[]", "+model.vlm={backend:scripted,script:x.jsonl,images:true,tools:true}",
                           "method=[senri_agent,videoarm,direct,videoarm_text_only]",
                           "method.videoarm.tool_interface=function_calling",
                           "method.videoarm.tool_models.audio=openai_asr"])  # the transcriber reads no frames
    assert cfgmod.capability_problems(fine) == [] and len(cfgmod.runs(fine)) == 4


def test_the_laptop_table3_plans_on_a_text_only_model_that_table3_refuses():
    """Issue 40 item 2: Table 3 with SENRI-Agent on SmolLM2 is refused at plan time; its labelled text-only
    variant plans every run."""
    with pytest.raises(cfgmod.ConfigError, match="verifiers look at frames"):
        cfgmod.runs(cfgmod.compose(["experiment=table3", "model=[smollm2]"]))
    runs = cfgmod.runs(cfgmod.compose(["experiment=table3_text_only", "builders=demo", "model=[smollm2]"]))
    assert len(runs) == 4


def test_the_demo_builder_preset_changes_only_the_builders():
    """builders=demo (issue 40 item 3) changes the memory systems' builder settings and nothing else: the
    methods, models, dataset and every other slice compose as without it."""
    plain = cfgmod.compose(["experiment=table3_text_only", "model=[smollm2]"])
    demo = cfgmod.compose(["experiment=table3_text_only", "model=[smollm2]", "builders=demo"])
    assert {k: v for k, v in plain.items() if k != "memory_system"} == {
        k: v for k, v in demo.items() if k != "memory_system"}
    worldmm, magic = demo["memory_system"]["worldmm"], demo["memory_system"]["magic_video"]
    assert set(worldmm["models"].values()) - {None} == {"smollm2"} and magic["models"]["builder"] == "smollm2"
    assert [level["name"] for level in worldmm["levels"]] == ["30sec"] and magic["builder_max_tokens"] == 64
    # the full-size configs build as before
    full = plain["memory_system"]
    assert full["worldmm"]["models"]["extractor"] == "qwen15_coder" and len(full["worldmm"]["levels"]) == 3
    changed = {k for k in full["worldmm"] if full["worldmm"][k] != worldmm[k]}
    assert changed <= {"models", "levels", "episodic", "max_tokens", "cut_reply_resends", "model_configs"}, changed


def test_senri_config_and_a_dry_run_refuse_the_plan_before_any_job(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    overrides = " ".join(IMPOSSIBLE)
    shown = subprocess.run([sys.executable, "-m", "senri", "config", *IMPOSSIBLE], capture_output=True, text=True)
    assert shown.returncode != 0 and shown.stdout == ""
    dry = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n",
                          "--config", f"overrides={overrides}"], capture_output=True, text=True)
    assert dry.returncode != 0
    for output in (shown.stderr, dry.stdout + dry.stderr):
        assert all(output.count(p) == 1 for p in IMPOSSIBLE_RUNS), output[-3000:]
    assert not (tmp_path / "results").exists()


def test_a_job_refuses_its_model_by_the_plan_time_rule():
    """The method's own check on the backend its job opened is the same rule and the same words."""
    from senri.backends.base import Capabilities
    from senri.methods.agent import SenriAgent
    from senri.methods.videoarm import VideoARM, VideoARMTextOnly

    text_only = Capabilities(json_schema=True)
    (line,) = SenriAgent.capability_problems("senri_agent", {}, "m", text_only)
    assert "takes neither images nor video" in line
    assert SenriAgent.capability_problems("a", {"verifier_input": "video"}, "m", Capabilities(images=True)) == [
        "method 'a': verifier_input video, but model 'm' takes no video; use verifier_input images or auto"]
    assert SenriAgent.capability_problems("a", {}, "m", Capabilities(video=True)) == []
    assert VideoARMTextOnly.capability_problems("v", {}, "m", text_only) == []
    # a tool role on the run's own model is named once
    assert len(VideoARM.capability_problems("v", {}, "m", text_only, {"caption": ("m", text_only)})) == 1


def test_a_method_pinned_to_its_own_weights_runs_on_them_only():
    """``config.method.<name>.models`` (issue 38): ParaVT on ParaVT-8B while the other methods run on the
    selected models; a pinned model that is not selected is loaded for that method alone."""
    cfg = cfgmod.compose("method=[paravt,blind,random] model=[smollm2] method.paravt.models=[paravt8b_vllm]")
    assert cfgmod.runs(cfg) == [("paravt", "paravt8b_vllm"), ("blind", "smollm2"), ("random", "none")]
    assert cfg["pinned_models"] == ["paravt8b_vllm"] and cfgmod.selected_models(cfg) == ["smollm2"]
    assert cfg["model"]["paravt8b_vllm"]["model"] == "ParaVT/ParaVT-8B"  # its config, for the answer slice
    assert cfgmod.stage_slice(cfg, "answer", method="paravt", model="paravt8b_vllm")["model"]["backend"] == "vllm"
    # a pin alone is enough: no selected model, the pinned run still plans
    only = cfgmod.compose("method=[paravt,random] model=[] method.paravt.models=[paravt8b_vllm]")
    assert cfgmod.runs(only) == [("paravt", "paravt8b_vllm"), ("random", "none")]
    # a pin to a selected model keeps it selected for the others
    shared = cfgmod.compose("method=[paravt,blind] model=[smollm2,qwen25vl3b_hf] method.paravt.models=[qwen25vl3b_hf]")
    assert cfgmod.runs(shared) == [("paravt", "qwen25vl3b_hf"), ("blind", "smollm2"), ("blind", "qwen25vl3b_hf")]
    assert "pinned_models" not in shared
    # the pin chooses runs, it does not change one: the run it keeps has the slice it had without the pin
    unpinned = cfgmod.compose("method=[paravt,blind] model=[smollm2,qwen25vl3b_hf]")
    assert cfgmod.stage_slice(shared, "answer", method="paravt", model="qwen25vl3b_hf") == \
        cfgmod.stage_slice(unpinned, "answer", method="paravt", model="qwen25vl3b_hf")
    with pytest.raises(cfgmod.ConfigError, match=r"config.method.paravt.models: 'nosuch' is not a model config"):
        cfgmod.compose("method=[paravt] model=[smollm2] method.paravt.models=[nosuch]")
    with pytest.raises(cfgmod.ConfigError, match=r"config.method.random.models: method 'random' calls no model"):
        cfgmod.compose("method=[random] +method.random.models=[smollm2]")
    with pytest.raises(cfgmod.ConfigError, match=r"config.method.paravt.models: a non-empty list"):
        cfgmod.compose("method=[paravt] model=[smollm2] method.paravt.models=[]")


def test_table2_evidence_runs_videoarm_on_the_backbones_and_each_seeker_on_its_own_weights():
    cfg = cfgmod.compose("experiment=table2_evidence model=[qwen25vl7b_vllm]")
    assert cfgmod.runs(cfg) == [("videoarm", "qwen25vl7b_vllm"), ("paravt", "paravt8b_vllm"),
                                ("video_o3", "video_o3_vllm"), ("longvideo_r1", "longvideo_r1_vllm")]
    assert {cfg["method"][m]["approach"] for m in cfg["method"]} == {"evidence_seeking"}
    full = cfgmod.compose("experiment=table2 model=[qwen25vl7b_vllm]")
    assert [r for r in cfgmod.runs(full) if r[1] == "qwen25vl7b_vllm"] == [
        ("videoarm", "qwen25vl7b_vllm"), ("worldmm", "qwen25vl7b_vllm"), ("magic_video", "qwen25vl7b_vllm"),
        ("egagent", "qwen25vl7b_vllm")]
    assert ("light_omni", "light_omni") in cfgmod.runs(full)  # issue 62: its own model, pinned
    assert len(cfgmod.runs(full)) == 13  # the 4 specialists, + M3-Agent on its controller and Light-Omni
    # the direct-perception specialists, each on its own checkpoint (experiment=table2_direct_specialists)
    specialists = cfgmod.compose("experiment=table2_direct_specialists model=[]")
    assert cfgmod.runs(specialists) == [("cambrian_s", "cambrian_s7b"), ("cambrian_s_lfp", "cambrian_s7b_lfp"),
                                        ("internvideo3", "internvideo3_8b"), ("videochat3", "videochat3_4b")]
    assert cfgmod.runs(specialists) == cfgmod.runs(full)[:4]
    assert {specialists["method"][m]["approach"] for m in specialists["method"]} == {"direct_perception"}


def test_table2_s_stores_take_their_builder_settings_from_the_command_line():
    """Table 2's persistent-memory rows read the stores their methods pin (issue 53). The experiment selects
    those systems, so their settings compose as Table 3's do: a key from the command line, or the demo's builder
    preset. Brought in by the pins alone, a system was not there to override (Hydra: "Could not override
    'memory_system.worldmm.models.summariser'") and ``builders=demo`` composed half a store config."""
    import yaml

    from conftest import REPO

    def selected(experiment: str) -> list:
        defaults = yaml.safe_load((REPO / "config/experiment" / f"{experiment}.yaml").read_text())["defaults"]
        return [d["override /memory_system"] for d in defaults if "override /memory_system" in d]

    assert selected("table2_memory") == selected("table2")  # the same stores: one compose checks both
    cfg = cfgmod.compose(["experiment=table2", "model=[qwen25vl7b_vllm]", "builders=demo",
                          "memory_system.egagent.models.builder=smollm2"])
    systems = cfg["memory_system"]
    assert list(systems) == ["worldmm", "magic_video", "egagent", "m3_agent", "light_omni"]
    assert systems["worldmm"]["models"]["summariser"] == "smollm2"
    assert [level["name"] for level in systems["worldmm"]["levels"]] == ["30sec"]  # the preset's, not half of it
    assert systems["magic_video"]["models"]["builder"] == "smollm2"
    assert systems["egagent"]["models"]["builder"] == "smollm2"
    # the same runs, each over its own store: selecting the systems adds none
    assert [r for r, _ in cfgmod.runs(cfg)][-5:] == ["worldmm", "magic_video", "egagent", "m3_agent", "light_omni"]
    assert {cfg["method"][m].get("memory_system")
            for m in ("worldmm", "magic_video", "egagent", "m3_agent", "light_omni")} == set(systems)


def test_every_method_with_release_deviations_runs_as_its_release_by_default():
    """Each method registered in ``senri.methods.DEVIATIONS`` (EG-Agent, ParaVT, Video-o3, LongVideo-R1) has its
    shipped config on the release's values, so the report marks no default run ¶; flipping one option marks it."""
    from senri.methods import DEVIATIONS, deviations_from_release

    names = sorted(DEVIATIONS.names())
    assert names == ["egagent", "light_omni", "longvideo_r1", "paravt", "video_o3"]
    for name in names:
        cfg = cfgmod.compose(f"method=[{name}]")["method"][name]
        assert deviations_from_release(cfg) == {}, name
        option, release = next(iter(DEVIATIONS.load(name).items()))
        assert set(deviations_from_release({**cfg, option: "something else"})) == {option}, name
