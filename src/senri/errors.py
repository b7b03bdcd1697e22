"""Errors a user fixes in what they wrote, shared by the modules that raise them.

They live apart from :mod:`senri.config` so that a stage module raising one (the subset rule, for instance) does
not import the config machinery, and with it every registry the config checks: a stage's code identity is what it
imports (:mod:`senri.code_identity`)."""

from __future__ import annotations


class ConfigError(ValueError):
    """The composed config is invalid; the message names every offending key path."""
