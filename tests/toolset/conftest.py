import pytest

from toolhub.toolset import ToolSetBuilder

from tests.sample_tools import ALL, ReadA, ReadB


@pytest.fixture
def builder() -> ToolSetBuilder:
    b = ToolSetBuilder(builtins=False, plugins=False).register(*ALL, ReadA, ReadB)
    b.register_preset("legacy", {"Main:writer": "legacy-1"})
    b.set_default_tools(["Main:echo", "Main:noop"])
    return b
