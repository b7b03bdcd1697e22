import sys
import types

import pytest

from senri.registry import Registry, RegistryError


def test_lazy_until_loaded_and_helpful_errors(monkeypatch):
    registry = Registry("widget")
    registry.register("gear", "senri_test_widgets:Gear")  # module does not exist yet: nothing is imported
    with pytest.raises(RegistryError, match="unknown widget 'gaer'.*Did you mean 'gear'"):
        registry.load("gaer")
    with pytest.raises(ImportError, match="widget 'gear' needs 'senri_test_widgets'"):
        registry.load("gear")
    module = types.ModuleType("senri_test_widgets")
    module.Gear = object()
    monkeypatch.setitem(sys.modules, "senri_test_widgets", module)
    assert registry.load("gear") is module.Gear
    registry.register("wheel", "senri_test_widgets:Wheel")
    with pytest.raises(ImportError, match="has no attribute 'Wheel'"):
        registry.load("wheel")


def test_conflicting_registration_is_refused():
    registry = Registry("widget")
    registry.register("gear", "a:b")
    registry.register("gear", "a:b")  # same target again is fine
    with pytest.raises(ValueError):
        registry.register("gear", "a:c")
    with pytest.raises(ValueError):
        registry.register("cog", "no_colon")
    assert registry.names() == ["gear"] and "gear" in registry
