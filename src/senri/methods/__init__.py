"""Answering methods, found by name through :data:`METHODS`.

Adding a method is one module under ``senri/methods/`` plus one ``METHODS.register`` line here; its config
file goes in ``config/method/<name>.yaml`` and its keys in the config schema.
"""

from senri.registry import Registry

METHODS = Registry("method")
METHODS.register("random", "senri.methods.random:RandomGuess")
METHODS.register("blind", "senri.methods.blind:Blind")
METHODS.register("direct", "senri.methods.direct:DirectPerception")
METHODS.register("videolucy", "senri.methods.videolucy:VideoLucy")
METHODS.register("memory_search", "senri.methods.agent:MemorySearch")
METHODS.register("senri_agent", "senri.methods.agent:SenriAgent")
METHODS.register("senri_agent_no_tg", "senri.methods.agent:SenriAgentNoTargetGuidance")
METHODS.register("senri_agent_no_pv", "senri.methods.agent:SenriAgentNoParallelVerifiers")
METHODS.register("senri_agent_no_wm", "senri.methods.agent:SenriAgentNoWorkingMemory")
METHODS.register("senri_agent_text_only", "senri.methods.senri_agent_text_only:SenriAgentTextOnly")
METHODS.register("magic_video", "senri.methods.magic_video:MagicVideoWorkflow")
METHODS.register("videoarm", "senri.methods.videoarm:VideoARM")
METHODS.register("videoarm_text_only", "senri.methods.videoarm:VideoARMTextOnly")
METHODS.register("worldmm", "senri.methods.worldmm:WorldMMWorkflow")
METHODS.register("egagent", "senri.methods.egagent:EGAgent")
METHODS.register("paravt", "senri.methods.paravt:ParaVT")
METHODS.register("video_o3", "senri.methods.video_o3:VideoO3")
METHODS.register("longvideo_r1", "senri.methods.longvideo_r1:LongVideoR1")
METHODS.register("specialist", "senri.methods.specialist:SpecialistDirect")
METHODS.register("light_omni", "senri.methods.light_omni:LightOmni")
METHODS.register("m3_agent", "senri.methods.m3_agent:M3Agent")

#: Per method implementation, its options whose non-default value departs from the release it restates (a
#: module-level mapping option name -> the release's value, loaded only for the methods listed): the report marks
#: a run that set one (:func:`senri.report.deviating_runs`).
DEVIATIONS = Registry("deviation options")
DEVIATIONS.register("egagent", "senri.methods.egagent:DEVIATIONS")
DEVIATIONS.register("paravt", "senri.methods.paravt:DEVIATIONS")
DEVIATIONS.register("video_o3", "senri.methods.video_o3:DEVIATIONS")
DEVIATIONS.register("longvideo_r1", "senri.methods.longvideo_r1:DEVIATIONS")
DEVIATIONS.register("light_omni", "senri.methods.light_omni:DEVIATIONS")


def deviations_from_release(method_config: dict) -> dict[str, tuple[object, object]]:
    """The options of a run's method config that depart from its release: name -> (value, the release's)."""
    implementation = method_config.get("implementation")
    if implementation not in DEVIATIONS:
        return {}
    release = DEVIATIONS.load(implementation)
    return {name: (method_config[name], value) for name, value in release.items()
            if name in method_config and method_config[name] != value}

