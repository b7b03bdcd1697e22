"""senri: a reproducible pipeline for long egocentric video question answering (SENRI-Bench format)."""

__version__ = "0.1.0"
