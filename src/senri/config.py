"""Compose the Hydra config once, validate it against a JSON schema, and cut it into per-stage slices.

Each Snakemake rule receives only its stage's slice as ``params``; Snakemake reruns a job when its params
change, so a change to one part of the config reruns exactly the stages that read that part.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
import yaml

from senri.errors import ConfigError  # noqa: F401 (re-exported)
from senri.memory.store import CAPTIONS
from senri.paths import CONFIG_DIR, CONFIG_SCHEMA, REPO_ROOT, SCHEMA_DIR, sidecar_path  # noqa: F401 (re-exported)

#: Model name used by methods that call no model (random guessing): their runs live under ``…/none/``.
NO_MODEL = "none"


def parse_overrides(overrides: str | Iterable[str] | None) -> list[str]:
    """Accept Hydra overrides as one shell-like string (``"method=[random] seed=3"``) or a list of them; a plain
    value with characters Hydra's grammar refuses unquoted (a path such as ``/data/Vidéos``) is quoted for it
    (:func:`quote_plain_value`)."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        return [quote_plain_value(o) for o in shlex.split(overrides)]
    return [quote_plain_value(str(o)) for o in overrides]


#: ``key=value`` of a Hydra override (``+``/``++``/``~`` prefixes and ``@package`` allowed before the ``=``).
_OVERRIDE = re.compile(r"^([+~]{0,2}[A-Za-z0-9_.@/-]+)=(.*)$", re.DOTALL)
#: Characters that give a value structure in Hydra's grammar (lists, dicts, calls, quotes, escapes, interpolation).
_HYDRA_SYNTAX = set("'\"\\[]{}(),=$")


def quote_plain_value(override: str) -> str:
    """``dataset.root=/data/My Vidéos`` → ``dataset.root='/data/My Vidéos'``: Hydra's lexer refuses a non-ASCII
    character in an unquoted value, and the shell quoting a user writes around such a path (``dataset.root='…'``
    inside ``overrides="…"``) is consumed by the shell-like split. Only a plain value — no list, dict, quote,
    escape or interpolation syntax — with a non-ASCII character is quoted; every other override is left as is."""
    match = _OVERRIDE.match(override)
    if not match:
        return override
    key, value = match.groups()
    if value.isascii() or _HYDRA_SYNTAX & set(value):
        return override
    return f"{key}='{value}'"


def compose(overrides: str | Iterable[str] | None = None, config_dir: Path = CONFIG_DIR) -> dict[str, Any]:
    """Compose ``config/config.yaml`` with Hydra's compose API, resolve it, validate it, return plain data."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            composed = hydra_compose(config_name="config", overrides=parse_overrides(overrides))
        cfg = OmegaConf.to_container(composed, resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:  # Hydra raises ValueError for some bad overrides
        raise ConfigError(f"config: {_one_line(exc, Path(config_dir))}") from exc
    assert isinstance(cfg, dict)
    cfg.setdefault("method", {})
    cfg.setdefault("model", {})
    expand_list_parameters(cfg)
    add_frame_plans(cfg)
    expand_memory_systems(cfg, Path(config_dir))
    pin_method_models(cfg, Path(config_dir))
    expand_report_models(cfg)
    expand_captioners(cfg, Path(config_dir))
    attach_tool_models(cfg, Path(config_dir))
    attach_memory_system_models(cfg, Path(config_dir))
    attach_analysis_models(cfg, Path(config_dir))
    attach_published_names(cfg)
    validate(cfg)
    attach_prompt_identities(cfg)
    return cfg


def _one_line(exc: Exception, config_dir: Path) -> str:
    """Hydra's error as one line; an unknown group option (``method=[nosuch]``) lists the valid names."""
    import re

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    missing = re.search(r"Could not load '([\w-]+)/([^']+)'", text)
    if missing and (config_dir / missing.group(1)).is_dir():
        group, name = missing.groups()
        valid = sorted(p.stem for p in (config_dir / group).glob("*.yaml"))
        pending = ""
        if (group == "memory_system" or (group == "method"
                                         and not (config_dir / "memory_system" / f"{name}.yaml").is_file()
                                         and name in PAPER_MEMORY_SYSTEMS)):
            pending = (f"; {name!r} is a memory system (or its original workflow) that is not in this checkout: it "
                       f"lands with its module, config/memory_system/{name}.yaml and config/method/{name}.yaml")
        return (f"unknown {group.replace('_', ' ')} {name!r}; valid names: {', '.join(valid)} "
                f"(files in {config_dir / group}){pending}")
    return text


#: The memory systems the SENRI paper measures (issue 25/26): an experiment naming one that is not merged yet
#: says so instead of only "unknown method".
PAPER_MEMORY_SYSTEMS = ("worldmm", "magic_video")


def attach_prompt_identities(cfg: dict[str, Any]) -> None:
    """Record, beside every config part that names a prompt family (``prompts:``), the digest of the prompt
    files it will read (``prompt_identity``): the files' text becomes part of the stage's config slice, so
    editing a prompt reruns exactly the jobs that use it, and the run's recorded config says which wording ran."""
    from senri.prompts import PromptError, prompt_identity

    parts = [(f"config.method.{name}", spec) for name, spec in cfg.get("method", {}).items()]
    parts.append(("config.memory", cfg.get("memory", {})))
    # A memory system's builder prompts are part of its store's slice: editing one rebuilds its stores.
    parts += [(f"config.memory_system.{name}", spec) for name, spec in cfg.get("memory_system", {}).items()]
    parts += [(f"config.analysis.{name}", spec) for name, spec in (cfg.get("analysis") or {}).items()]
    for where, spec in parts:
        if isinstance(spec, dict) and spec.get("prompts"):
            try:
                spec["prompt_identity"] = prompt_identity(spec)
            except PromptError as exc:
                raise ConfigError(f"{where}.prompts: {exc}") from exc


def selected_models(cfg: Mapping[str, Any]) -> list[str]:
    """The inference models ``model=[...]`` selects (every method without a pin runs with each), in order:
    the models that a method's pin alone brought in (``pinned_models``) are not among them."""
    pinned_only = set(cfg.get("pinned_models") or [])
    return [m for m in cfg.get("model", {}) if m != NO_MODEL and m not in pinned_only]


def method_models(cfg: Mapping[str, Any], method: str) -> list[str]:
    """The models ``method`` runs with: its pin (``config.method.<name>.models``) if it has one, else every
    selected model; ``[none]`` for a method that calls no model."""
    spec = cfg["method"][method]
    if not spec.get("uses_model"):
        return [NO_MODEL]
    return list(spec.get("models") or selected_models(cfg))


def pin_method_models(cfg: dict[str, Any], config_dir: Path) -> None:
    """A method config's ``models: [name, ...]`` pins its runs to those model configs whatever ``model=[...]``
    selects: an evidence seeker trained with its own weights (ParaVT-8B, Video-o3, LongVideo-R1's controller)
    runs on them while the other methods of the same table run on the selected backbones (Table 2). A pinned
    model that is not selected is read from ``config/model/<name>.yaml`` into ``config.model`` and listed in
    ``pinned_models``, so it runs only where pinned."""
    brought_in: list[str] = []
    for name, spec in cfg.get("method", {}).items():
        pinned = spec.get("models") if isinstance(spec, dict) else None
        if pinned is None:
            continue
        where = f"config.method.{name}.models"
        if not spec.get("uses_model"):
            raise ConfigError(f"{where}: method {name!r} calls no model; drop the pin")
        if not isinstance(pinned, list) or not pinned or not all(isinstance(m, str) and m for m in pinned):
            raise ConfigError(f"{where}: a non-empty list of model config names, got {pinned!r}")
        for model in pinned:
            if model == NO_MODEL:
                raise ConfigError(f"{where}: {NO_MODEL!r} is not an inference model")
            if model not in cfg["model"]:
                cfg["model"][model] = named_model_config(cfg, model, config_dir, where)
                brought_in.append(model)
    if brought_in:
        cfg["pinned_models"] = list(dict.fromkeys(brought_in))


def captioner_model(cfg: Mapping[str, Any], config_dir: Path, name: str | None = None) -> dict[str, Any] | None:
    """The model config of a VLM captioner (``memory.captioner`` names a model config), or None for the
    perception captioner. It need not be among the selected inference models."""
    name = name or cfg.get("memory", {}).get("captioner", "perception")
    if name == "perception":
        return None
    return named_model_config(cfg, name, config_dir, "config.memory.captioner", "is neither 'perception' nor")


def captioner_names(cfg: Mapping[str, Any]) -> list[str]:
    """The captioners of the config: ``memory.captioner`` is one name or a list of them."""
    value = cfg.get("memory", {}).get("captioner", "perception")
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def captioner_run_name(run: str, captioner: str) -> str:
    """A memory run's name over one of several captioners: ``videolucy+internvl25_8b_vllm``."""
    return f"{run}+{captioner}"


def expand_captioners(cfg: dict[str, Any], config_dir: Path) -> None:
    """Give every memory method one run per captioner when ``memory.captioner`` lists several (VideoLucy's
    Table 13: captioner × reasoning model): run ``<method>+<captioner>`` records its captioner as ``captioner``
    and reads that captioner's memory (its own memory tables and caption cache; the ``memory`` column names it).
    One captioner, as a name or a one-item list, is today's config: runs, names and paths unchanged. Each
    captioner's model config is in ``captioner_models`` (null for perception); ``captioner_model`` holds the
    single captioner's, as before."""
    names = captioner_names(cfg)
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"config.memory.captioner: one captioner or a list of distinct ones, got {names!r}")
    cfg["captioner_models"] = {name: captioner_model(cfg, config_dir, name) for name in names}
    if len(names) == 1:
        cfg["memory"]["captioner"] = names[0]
        cfg["captioner_model"] = cfg["captioner_models"][names[0]]
        return
    methods: dict[str, Any] = {}
    for run, spec in cfg["method"].items():
        if isinstance(spec, dict) and spec.get("uses_memory"):
            methods.update({captioner_run_name(run, name): {**spec, "captioner": name} for name in names})
        else:
            methods[run] = spec
    cfg["method"] = methods


def run_captioner(cfg: Mapping[str, Any], method: str | None = None) -> str:
    """The captioner whose memory a run reads: its own (``captioner``, one of several) or the config's only one."""
    own = cfg["method"][method].get("captioner") if method is not None else None
    if own:
        return str(own)
    names = captioner_names(cfg)
    if len(names) > 1:
        which = f" for run {method!r}" if method is not None else ""
        raise ConfigError(f"config.memory.captioner lists {len(names)} captioners ({', '.join(names)}); "
                          f"a stage of one memory must say which{which}")
    return names[0]


def captioner_config(cfg: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """A captioner's model config (None for perception), from ``captioner_models`` (hand-made configs without
    it: the single ``captioner_model``)."""
    models = cfg.get("captioner_models")
    return models.get(name) if isinstance(models, Mapping) else cfg.get("captioner_model")


def planned_captioners(cfg: Mapping[str, Any]) -> list[str]:
    """The captioners some planned memory run reads, in config order (their memories are built)."""
    used = {run_captioner(cfg, method) for method, spec in cfg["method"].items()
            if isinstance(spec, dict) and spec.get("uses_memory")}
    return [name for name in captioner_names(cfg) if name in used]


def named_model_config(cfg: Mapping[str, Any], name: str, config_dir: Path, where: str,
                       problem: str = "is not") -> dict[str, Any]:
    """A model config by name: the selected one of that name, else ``config/model/<name>.yaml``."""
    if name in cfg.get("model", {}):
        return dict(cfg["model"][name])
    path = config_dir / "model" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"{where}: {name!r} {problem} a model config (no {path})")
    data = yaml.safe_load(path.read_text()) or {}
    return {k: v for k, v in data.items() if not str(k).startswith("#")}


def role_model_configs(cfg: Mapping[str, Any], roles: Mapping[str, Any], where: str, config_dir: Path
                       ) -> dict[str, dict[str, Any]]:
    """Role → ``{"name", "config"}`` for every role that names a model config (null roles are left out)."""
    return {role: {"name": model, "config": named_model_config(cfg, model, config_dir, f"{where}.{role}")}
            for role, model in roles.items() if model}


def attach_tool_models(cfg: dict[str, Any], config_dir: Path) -> None:
    """Resolve a method's ``tool_models`` (role → model config name, or null for the run's own model) into
    ``tool_model_configs`` beside it, so the tool models' configs are part of the answer stage's slice: a
    change to a tool model reruns the runs that call it (VideoARM keeps its tools fixed across backbones)."""
    for name, spec in cfg.get("method", {}).items():
        if not isinstance(spec, dict) or not isinstance(spec.get("tool_models"), dict):
            continue
        spec["tool_model_configs"] = role_model_configs(cfg, spec["tool_models"],
                                                        f"config.method.{name}.tool_models", config_dir)


def attach_memory_system_models(cfg: dict[str, Any], config_dir: Path) -> None:
    """Resolve each memory system's builder ``models`` (role → model config name or null) into
    ``model_configs`` beside them: a change to a summariser's config rebuilds the stores that used it, and
    the store's recorded config names every model that stood in for the paper's. A ``text_embedder`` that names
    a model config (M3-Agent's ``text_embedding_3_large``; not an in-process encoder such as ``minilm``) is
    resolved the same way, into ``text_embedder_config``."""
    for name, spec in cfg.get("memory_system", {}).items():
        if isinstance(spec, dict) and isinstance(spec.get("models"), dict):
            spec["model_configs"] = role_model_configs(cfg, spec["models"], f"config.memory_system.{name}.models",
                                                       config_dir)
        embedder = spec.get("text_embedder") if isinstance(spec, dict) else None
        if isinstance(embedder, str) and ":" not in embedder and (
                embedder in cfg.get("model", {}) or (config_dir / "model" / f"{embedder}.yaml").is_file()):
            # a text embedder named by model config (text_embedding_3_large), not an in-process encoder (minilm):
            # its config joins the system's slice, so a change to it rebuilds the stores it embedded
            spec["text_embedder_config"] = {"name": embedder, "config": named_model_config(
                cfg, embedder, config_dir, f"config.memory_system.{name}.text_embedder")}


def attach_analysis_models(cfg: dict[str, Any], config_dir: Path) -> None:
    """Resolve the relevance evaluator of the richness analysis (``analysis.richness.evaluator``, a model config
    name) into ``evaluator_config`` beside it: a change to the evaluator's config reruns the analysis."""
    richness = (cfg.get("analysis") or {}).get("richness")
    if isinstance(richness, dict) and int(richness.get("score_min", 0)) >= int(richness.get("score_max", 1)):
        raise ConfigError("config.analysis.richness.score_min: must be below score_max, got "
                          f"{richness.get('score_min')} and {richness.get('score_max')}")
    if isinstance(richness, dict) and richness.get("evaluator"):
        richness["evaluator_config"] = named_model_config(cfg, str(richness["evaluator"]), config_dir,
                                                          "config.analysis.richness.evaluator")


#: A method or model config's name in a paper's published table (:func:`attach_published_names`).
PAPER_NAME = "paper_name"


def attach_published_names(cfg: dict[str, Any]) -> None:
    """With ``report.published`` (a paper's table the report prints beside the runs: ``paper_table2``), the
    paper's names of every planned run into ``report.published_names`` (``"method/model"`` → ``{"method",
    "model"}``): the method config's ``paper_name`` (the table's Method column: ``M3-Agent``) and the model
    config's (its Inference Model column; a direct-perception row's Method). The names live in the configs, so
    the match is derived, never a second list; they are left out of the answer stage's slice and reach the report
    through its own, so naming a row reruns the report and no answer."""
    report = cfg.get("report")
    if not isinstance(report, dict) or not report.get("published"):
        return
    report["published_names"] = {
        f"{method}/{model}": {"method": cfg["method"][method].get(PAPER_NAME),
                              "model": (cfg["model"].get(model) or {}).get(PAPER_NAME)}
        for method, model in run_pairs(cfg)}


#: What ``config/memory_system/captions.yaml`` holds, for configs composed without the group (hand-made ones).
CAPTIONS_DEFAULT: dict[str, Any] = {"store": CAPTIONS, "import_dir": None, "models": {}}


def memory_systems(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The memory systems of the config by name (selected and pinned): ``captions`` alone when it has none."""
    return cfg.get("memory_system") or {CAPTIONS: dict(CAPTIONS_DEFAULT)}


def run_name(method: str, system: str) -> str:
    """A memory method's run name over a memory system (issue 25 decision 4): the method's own name over
    ``captions`` (today's paths and rows), ``<method>@<system>`` over any other."""
    return method if system == CAPTIONS else f"{method}@{system}"


def _system_file(path: Path, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A memory system's config file read outside the composition (a method's pin brought it), its
    interpolations resolved against the composed config as the composition would (``${identity.face_detector}``:
    config/identity/)."""
    from omegaconf import OmegaConf

    data = yaml.safe_load(path.read_text()) or {}
    merged = OmegaConf.create({**{k: v for k, v in cfg.items() if k in ("identity",)}, "__system": data})
    try:
        return OmegaConf.to_container(merged, resolve=True)["__system"]
    except Exception as exc:  # noqa: BLE001 - omegaconf's interpolation errors: name the file
        raise ConfigError(f"{path}: {exc}") from exc


def expand_memory_systems(cfg: dict[str, Any], config_dir: Path) -> None:
    """Give every memory method one run per selected memory system (``memory_system: [captions, worldmm]``:
    runs ``senri_agent`` and ``senri_agent@worldmm``), each recording its system as ``memory_system``. A
    method config that pins its system (``memory_system: worldmm``, the systems' original workflows) runs
    over that one only, under its own name; a pinned system that is not selected is read from
    ``config/memory_system/<name>.yaml``. Every system in play must name a registered store."""
    from senri.memory.store import MEMORY_SYSTEMS

    selected = cfg.get("memory_system")
    systems: dict[str, Any] = dict(selected) if selected is not None else {CAPTIONS: dict(CAPTIONS_DEFAULT)}
    methods: dict[str, Any] = {}
    for name, spec in cfg["method"].items():
        if not isinstance(spec, dict) or not spec.get("uses_memory"):
            methods[name] = spec
            continue
        pinned = spec.get("memory_system")
        # A pin brings its system in whatever the method's class: EG-Agent reads its own store through a class
        # that is no MemoryStore reader (``reads_store`` is False: it never runs over another system).
        if pinned:
            if pinned not in systems:
                path = config_dir / "memory_system" / f"{pinned}.yaml"
                if not path.is_file():
                    raise ConfigError(f"config.method.{name}.memory_system: memory system {pinned!r} has no "
                                      f"config ({path} is missing; is the system merged?)")
                systems[pinned] = _system_file(path, cfg)
            methods[name] = spec
            continue
        if not _reads_store(spec):  # VideoLucy: reads the caption hierarchy its own way, once
            methods[name] = spec
            continue
        if not selected and selected is not None:
            raise ConfigError(f"config.memory_system: no memory system selected for memory method {name!r} "
                              f"(e.g. memory_system=[captions])")
        for system in (selected if selected is not None else [CAPTIONS]):
            methods[run_name(name, system)] = {**spec, "memory_system": system}
    cfg["method"] = methods
    for system, spec in systems.items():
        store = str((spec or {}).get("store", system))
        if ":" not in store and store not in MEMORY_SYSTEMS:
            raise ConfigError(f"config.memory_system.{system}.store: memory system {store!r} is not registered "
                              f"(known: {', '.join(MEMORY_SYSTEMS.names())}); is its module merged?")
    if any(isinstance(s, dict) and s.get("memory_system") for s in methods.values()):
        cfg["memory_system"] = systems


#: The placeholder of a report entry (``pairs``, ``ablations``, ``no_visual_input``) written for every model:
#: an experiment names its runs without knowing which models a user selects (``senri_agent@worldmm/{model}``).
MODEL_SLOT = "{model}"
REPORT_LISTS = ("pairs", "ablations", "no_visual_input")


def expand_report_models(cfg: dict[str, Any]) -> None:
    """Write each report entry that holds ``{model}`` once per selected inference model, in model order. A
    ``no_visual_input`` label without the slot names its model when several are selected, so the rows stay
    apart."""
    report = cfg.get("report")
    if not isinstance(report, dict):
        return
    models = selected_models(cfg)

    def fill(value: Any, model: str) -> Any:
        if isinstance(value, str):
            return value.replace(MODEL_SLOT, model)
        if isinstance(value, dict):
            return {fill(k, model): fill(v, model) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v, model) for v in value]
        return value

    for key in REPORT_LISTS:
        entries = []
        for entry in report.get(key) or []:
            if MODEL_SLOT not in json.dumps(entry, ensure_ascii=False):
                entries.append(entry)
                continue
            for model in models:
                filled = fill(entry, model)
                if key == "no_visual_input" and len(models) > 1 and MODEL_SLOT not in str(entry.get("label", "")):
                    filled["label"] = f"{filled['label']} ({model})"
                entries.append(filled)
        if key in report:
            report[key] = entries


def _reads_store(spec: Mapping[str, Any]) -> bool:
    """Whether a method config's implementation reads a MemoryStore (VideoLucy reads the caption hierarchy
    its own way, so it runs once, over the captions). An unknown implementation is the schema's to report."""
    from senri.methods import METHODS

    implementation = spec.get("implementation")
    if implementation not in METHODS:
        return False
    return bool(getattr(METHODS.load(implementation), "reads_store", False))


#: Method parameters whose list value becomes one run per value, each run named by its template (``{method}`` the
#: method entry's name, ``{value}`` the value): ``frames: [32, 64]`` → ``direct_32``, ``direct_64`` (the frame-budget
#: curve); ``max_iterations: [1, 5]`` → ``videolucy_iter1``, ``videolucy_iter5`` (VideoLucy Fig. 6(b));
#: ``max_depth: [summary, fine]`` → ``videolucy_depth_summary``, ``videolucy_depth_fine`` (Fig. 6(a)).
LIST_PARAMETERS: dict[str, str] = {"frames": "{method}_{value}", "max_iterations": "{method}_iter{value}",
                                   "max_depth": "{method}_depth_{value}"}


def expand_list_parameters(cfg: dict[str, Any]) -> None:
    """Give a method entry one run per value of each of its list-valued :data:`LIST_PARAMETERS` (several lists:
    one run per combination, named by each template in turn). Each run holds its own value only, and its name
    follows from that value alone, so adding a value to a list adds runs and never changes, nor reruns, the
    runs of the values already there. A scalar keeps the entry's own name."""
    methods: dict[str, Any] = {}
    for name, spec in cfg["method"].items():
        lists = [key for key in LIST_PARAMETERS if isinstance(spec, dict) and isinstance(spec.get(key), list)]
        if not lists:
            if name in methods:
                raise ConfigError(f"config.method.{name}: named twice (a list value of another method names it)")
            methods[name] = spec
            continue
        for key in lists:
            if not spec[key]:
                raise ConfigError(f"config.method.{name}.{key}: an empty list names no run")
        for values in itertools.product(*(spec[key] for key in lists)):
            run = name
            for key, value in zip(lists, values):
                run = LIST_PARAMETERS[key].format(method=run, value=value)
            if run in methods or run in cfg["method"]:
                raise ConfigError(f"config.method.{name}: the run {run!r} of its list values is named twice")
            methods[run] = {**spec, **dict(zip(lists, values))}
    cfg["method"] = methods


def add_frame_plans(cfg: dict[str, Any]) -> None:
    """Give each frame budget its sampling plan: a method without an explicit ``plan`` reads ``uniform_<frames>``
    (whole video, its ``placement``), which is added to ``sampling.plans`` when the sampling config does not
    define it. Runs with the same budget therefore share one frame store, whichever method or model reads it."""
    plans = cfg.get("sampling", {}).setdefault("plans", {})
    for spec in cfg["method"].values():
        if isinstance(spec, dict) and isinstance(spec.get("frames"), int):
            plan = spec.setdefault("plan", f"uniform_{spec['frames']}")
            plans.setdefault(plan, {"kind": "uniform", "n": spec["frames"],
                                    "placement": spec.get("placement", "center"), "accuracy": "auto"})


def _schema() -> dict[str, Any]:
    """The config schema, with the lists that registries own filled in from them: ``dataset.benchmark``'s enum is
    every registered benchmark (:data:`senri.benchmarks.BENCHMARKS`), so a new benchmark is one registration."""
    from senri.benchmarks import BENCHMARKS

    schema = json.loads(CONFIG_SCHEMA.read_text())
    schema["properties"]["dataset"]["properties"]["benchmark"]["enum"] = BENCHMARKS.names()
    return schema


def _path(parts: Iterable[Any]) -> str:
    return ".".join(["config", *(str(p) for p in parts)])


def _leaf_errors(errors: Iterable[jsonschema.ValidationError]) -> Iterable[jsonschema.ValidationError]:
    """Replace "not valid under any of the given schemas" (oneOf/anyOf) by the most relevant inner error,
    which carries the full key path (``config.dataset.demo.fps``) instead of the parent's."""
    for error in errors:
        while error.context:
            # The deepest inner error is the one inside the branch the value was meant for (an object
            # given for "null or object" fails the object branch at the offending key).
            error = max(error.context, key=lambda e: len(e.absolute_path))
        yield error


def validate(cfg: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> None:
    """Raise :class:`ConfigError` listing every problem, each with the dotted key path it concerns."""
    schema = schema or _schema()
    validator = jsonschema.Draft202012Validator(schema)
    problems: list[str] = []
    for error in sorted(_leaf_errors(validator.iter_errors(cfg)), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = set(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - known):
                problems.append(f"{_path([*error.absolute_path, key])}: unknown key")
        else:
            problems.append(f"{_path(error.absolute_path)}: {error.message}")
    for name in cfg.get("sampling", {}).get("build", []):
        if name not in cfg["sampling"].get("plans", {}):
            problems.append(f"config.sampling.build: plan {name!r} is not defined in config.sampling.plans")
    demo_section = cfg.get("dataset", {}).get("demo")
    if isinstance(demo_section, dict) and not any(p.startswith("config.dataset.demo") for p in problems):
        from senri.demo import DemoConfig

        try:  # what the schema cannot say: question counts that fit the walk and keep the letters balanced
            DemoConfig.from_mapping(demo_section)
        except ValueError as exc:
            problems.append(str(exc))
    if not cfg.get("method"):
        problems.append("config.method: no method selected (e.g. method=[random])")
    for name, method in cfg.get("method", {}).items():
        if isinstance(method, dict) and method.get("uses_model") and not method.get("models") and not (
            selected_models(cfg)
        ):
            problems.append(f"config.method.{name}: needs a model but only {NO_MODEL!r} is selected")
    if problems:
        unique = list(dict.fromkeys(problems))  # one problem: one line, naming the key
        raise ConfigError("invalid config: " + unique[0] if len(unique) == 1 else
                          "invalid config:\n  " + "\n  ".join(unique))


def runs(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (method, model) pairs to run: model-free methods run once, under the model name ``none``.

    Every pair is first held to what its method needs of its models (:func:`capability_problems`): a plan with
    a run that cannot work raises :class:`ConfigError` listing every such run, so ``senri config``, the
    Snakefile (``snakemake -n`` included) and the served batches refuse it before any job starts."""
    pairs = run_pairs(cfg)
    problems = capability_problems(cfg, pairs)
    if problems:
        raise ConfigError(f"{len(problems)} planned run(s) cannot work with their models:\n  " + "\n  ".join(problems)
                          + "\n(change the model or the method; config.model and config.method name them)")
    return pairs


def run_pairs(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (method, model) pairs a config names, whether or not they can work (:func:`runs` checks them)."""
    return [(method, model) for method in cfg["method"] for model in method_models(cfg, method)]


def capability_problems(cfg: Mapping[str, Any], pairs: list[tuple[str, str]] | None = None) -> list[str]:
    """Every planned run's problems with its models, one line each (``run <method> × <model>: …``), from the
    model configs' declared capabilities (:func:`senri.backends.declared_capabilities`) and each method's
    :meth:`senri.methods.base.Method.capability_problems`: images or video for frames, function calling for a
    tool-calling controller, every tool role's model."""
    from senri.backends import declared_capabilities
    from senri.methods import METHODS

    problems: list[str] = []
    for method, model in run_pairs(cfg) if pairs is None else pairs:
        spec = cfg["method"][method]
        implementation = METHODS.load(spec.get("implementation", method))
        capabilities = None if model == NO_MODEL else declared_capabilities(cfg["model"].get(model, {}))
        roles = {role: (entry["name"], declared_capabilities(entry["config"]))
                 for role, entry in (spec.get("tool_model_configs") or {}).items()}
        problems += [f"run {method} × {model}: {line}"
                     for line in implementation.capability_problems(method, spec, model, capabilities, roles)]
    return list(dict.fromkeys(problems))


def reader_options(dataset: Mapping[str, Any]) -> tuple[str, ...]:
    """The dataset keys the benchmark's reader reads (``Benchmark.options``; config/dataset/<benchmark>.yaml
    documents each): its share of the ingest slice."""
    from senri.benchmarks import BENCHMARKS, benchmark_name

    name = benchmark_name(dataset)
    return BENCHMARKS.load(name).options if name in BENCHMARKS else ()



def stage_slice(cfg: Mapping[str, Any], stage: str, method: str | None = None, model: str | None = None,
                plan: str | None = None, system: str | None = None, captioner: str | None = None) -> dict:
    """The part of the config a stage reads. Anything not in a stage's slice cannot affect its output."""
    dataset = cfg["dataset"]
    if stage == "frames":
        assert plan is not None
        sampling = cfg["sampling"]
        if plan not in sampling["plans"]:
            raise ConfigError(f"config.sampling.plans: no plan named {plan!r}")
        return {"plan": {"name": plan, **sampling["plans"][plan]},
                **{k: sampling[k] for k in ("short_side", "jpeg_quality", "keyframe_fraction", "watchdog_s")},
                "on_damaged_video": cfg.get("on_damaged_video", "fail")}
    if stage == "demo_data":
        return {"demo": dataset["demo"]}
    if stage == "needle_data":
        return {"needle": dataset.get("needle")}
    if stage == "ingest":
        slice_ = {key: dataset[key] for key in ("name", "questions", "videos_dir", "video_ext")}
        if dataset.get("subset"):  # a subset only where one is set: a dataset without it keeps its ingest as it was
            slice_["subset"] = dataset["subset"]
        options = reader_options(dataset)  # the benchmark's reader options (SENRI-Bench's: none)
        if options:
            slice_ |= {key: dataset[key] for key in ("benchmark", *options) if key in dataset}
        return slice_
    if stage == "probe":
        return {"probe": cfg["probe"]}
    if stage == "anonymize":
        return {"anonymize": cfg["anonymize"], "on_damaged_video": cfg.get("on_damaged_video", "fail")}
    if stage == "track":
        return {"track": cfg["track"], "on_damaged_video": cfg.get("on_damaged_video", "fail")}
    if stage == "memory":
        # one captioner's memory (of several: the one named; one: as it always was)
        name = captioner or run_captioner(cfg)
        return {"memory": {**cfg["memory"], "captioner": name}, "track": cfg["track"],
                "captioner_model": captioner_config(cfg, name)}
    if stage == "answer":
        assert method is not None and model is not None
        slice_ = {
            "seed": cfg["seed"],
            # the pin (``models``) says which models run the method, not how one of them does: a pin added or
            # widened never reruns the runs it keeps
            # nor does the paper's name for a run (``paper_name``: which published row the report prints beside it)
            "method": {"name": method, **{k: v for k, v in cfg["method"][method].items()
                                          if k not in ("models", PAPER_NAME)}},
            "model": {"name": model, **{k: v for k, v in cfg["model"].get(model, {}).items() if k != PAPER_NAME}},
        }
        if cfg["method"][method].get("uses_memory"):
            slice_["memory"] = stage_slice(cfg, "memory", captioner=run_captioner(cfg, method))
        system = cfg["method"][method].get("memory_system")
        if system:
            slice_["memory_system"] = {"name": system, **memory_systems(cfg)[system]}
        return slice_
    if stage == "memory_system":
        assert system is not None
        if system not in memory_systems(cfg):
            raise ConfigError(f"config.memory_system: no memory system named {system!r}")
        return {"seed": cfg["seed"], "memory_system": {"name": system, **memory_systems(cfg)[system]},
                "memory": stage_slice(cfg, "memory", captioner=captioner)}
    if stage == "richness":
        return {"richness": cfg["analysis"]["richness"], "seed": cfg["seed"]}
    if stage == "aggregate":
        return {"aggregate": cfg["aggregate"]}
    if stage == "report":
        return {"report": cfg["report"], "aggregate": cfg["aggregate"], "seed": cfg["seed"]}
    raise KeyError(f"no config slice defined for stage {stage!r}")


def canonical_json(data: Any) -> str:
    """One spelling per value (sorted keys, no spaces): equal configs give equal params, so no spurious reruns."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def write_sidecar(output: str | Path, stage: str, config: Mapping[str, Any]) -> Path:
    path = sidecar_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"stage": stage, "config": dict(config)}, sort_keys=True, allow_unicode=True))
    return path
