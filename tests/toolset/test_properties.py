"""Properties that must hold for every input, not just the examples."""

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz_size import examples
from tests.sample_tools import ALL, ReadA, ReadB
from toolhub.toolset import ToolSetBuilder

BUILDER = ToolSetBuilder(plugins=False).register(*ALL, ReadA, ReadB)
NAMES = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)


@settings(
    max_examples=examples(75, 150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.dictionaries(st.sampled_from(["text", "times"]), NAMES, max_size=2), st.data())
def test_client_to_canonical_to_client_is_the_identity(rename, data):
    if len(set(rename.values())) != len(rename) or set(rename.values()) & (
        {"text", "times"} - set(rename)
    ):
        return
    toolset = BUILDER.build({"tools": [{"id": "Main:echo", "rename": rename}]})
    entry = toolset.lookup("echo")
    client_args = {
        entry.to_client.get("text", "text"): data.draw(st.text(max_size=5)),
        entry.to_client.get("times", "times"): data.draw(st.integers(1, 3)),
    }
    prepared = toolset.prepare("echo", client_args, "c")
    back = {entry.to_client.get(k, k): v for k, v in prepared.arguments.items()}
    assert back == client_args
    schema_keys = set(toolset.definitions()[0]["function"]["parameters"]["properties"])
    assert schema_keys == set(client_args)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)

_ENTRY = st.fixed_dictionaries(
    {"id": st.sampled_from(["Main:echo", "Main:writer", "Main:nope", "Alpha:read_file", 3])},
    optional={
        "name": _JSON | NAMES,
        "params": _JSON,
        "rename": st.dictionaries(st.sampled_from(["text", "times", "zz"]), _JSON | NAMES),
        "version": _JSON | st.sampled_from(["current", "legacy-1", "legacy-0"]),
        "kind": _JSON,
        "junk": _JSON,
    },
)


@settings(
    max_examples=examples(150, 300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.one_of(
        _JSON,
        st.fixed_dictionaries(
            {},
            optional={
                "tools": st.lists(_ENTRY, max_size=4) | _JSON,
                "mode": st.sampled_from(["all", "read_only", "nope"]) | _JSON,
                "preset": _JSON,
                "reminders": _JSON,
            },
        ),
    )
)
def test_validation_never_raises_it_only_returns_violations(config):
    report = BUILDER.validate(config)
    for violation in report.violations:
        assert violation.category and violation.message and violation.tool
