"""The engine's fixtures (a runtime answered by a scripted provider, an agent) for the
gateway tests."""

from tests.core.conftest import agent, runtime, scripted

__all__ = ["agent", "runtime", "scripted"]
