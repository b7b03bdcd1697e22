"""Code that runs inside a release worker's own environment, not in senri's (see senri.backends.worker).

Every module here is standard-library only at import time and is imported as a top-level module by
``worker_main.py`` (this folder is the worker's first ``sys.path`` entry), so none of them imports senri. A model
adapter is a class ``Adapter(options: dict)`` with ``generate(request: dict) -> dict`` and optionally
``info() -> dict``; ``stub_model`` is the test stand-in, the others load a release's model from its checkout.
"""
