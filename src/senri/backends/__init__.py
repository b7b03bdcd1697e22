"""Model backends. ``server`` runs a model server inside the job that needs it (vLLM, llama.cpp)."""
