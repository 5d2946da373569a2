import pytest

from tests.sample_tools import ALL, ReadA, ReadB
from toolhub.toolset import ToolSetBuilder


@pytest.fixture
def builder() -> ToolSetBuilder:
    b = ToolSetBuilder(plugins=False).register(*ALL, ReadA, ReadB)
    b.register_preset("legacy", {"Main:writer": "legacy-1"})
    b.set_default_tools(["Main:echo", "Main:noop"])
    return b
