import asyncio
import json
import math

import pytest

from tests.sample_tools import Boom, Count, Echo, EchoOutput, Infinite, Noop, Silent, Unencodable
from toolhub.core import (
    CallResult,
    Container,
    ErasedTool,
    Outcome,
    Progress,
    ToolContext,
    ToolError,
)
from toolhub.core.erasure import parse_arguments, refuse_nan


def ctx() -> ToolContext:
    return ToolContext(call_id="c1", container=Container())


def drain(erased: ErasedTool, args) -> list:
    async def go():
        return [item async for item in erased.stream(ctx(), args)]

    return asyncio.run(go())


def test_generate_schema_strips_root_title_and_description():
    schema = ErasedTool(Echo()).input_schema
    assert "title" not in schema and "description" not in schema
    assert "title" not in schema["properties"]["text"]
    assert schema["required"] == ["text"]


def test_empty_struct_schema_has_properties_and_required_and_is_closed():
    schema = ErasedTool(Noop()).input_schema
    assert schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_invalid_args_name_the_client_field_and_echo_the_original():
    erased = ErasedTool(Echo())
    with pytest.raises(ToolError) as err:
        erased.parse_args(
            {"text": "x", "times": "many"},
            client_name="say",
            client_names={"times": "repeat"},
            original='{"message": "x", "repeat": "many"}',
        )
    assert err.value.kind == "invalid_arguments"
    assert "`repeat`" in err.value.detail and "`times`" not in err.value.detail
    assert '{"message": "x", "repeat": "many"}' in err.value.detail


def test_echo_is_capped_at_2000_bytes_without_splitting_characters():
    erased = ErasedTool(Echo())
    original = json.dumps({"text": 1, "pad": "é" * 3000})
    with pytest.raises(ToolError) as err:
        erased.parse_args({"text": 1}, client_name="echo", original=original)
    echoed = err.value.detail.split("Your original arguments:\n", 1)[1]
    assert len(echoed.encode()) <= 2000 and original.startswith(echoed)


def test_missing_and_unknown_fields_are_invalid_arguments():
    erased = ErasedTool(Echo())
    with pytest.raises(ToolError, match="`text`: Field required"):
        erased.parse_args({}, client_name="echo")
    with pytest.raises(ToolError, match="unknown argument"):
        erased.parse_args({"text": "a", "colour": "red"}, client_name="echo")


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"text": ', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('"just text"', "expected a JSON object, got str"),
        (42, "expected a JSON object, got int"),
    ],
)
def test_malformed_and_non_object_arguments(raw, needle):
    with pytest.raises(ToolError) as err:
        parse_arguments(raw, name="echo")
    assert err.value.kind == "invalid_arguments" and needle in err.value.detail


def test_empty_and_null_arguments_are_an_empty_object():
    assert parse_arguments(None, name="x")[0] == {}
    assert parse_arguments("", name="x")[0] == {}
    assert parse_arguments("null", name="x")[0] == {}


def test_sync_run_fast_path_and_model_text():
    erased = ErasedTool(Echo())
    assert erased.is_sync
    outcome = erased.run_sync(ctx(), erased.parse_args({"text": "ab", "times": 2}, client_name="e"))
    assert outcome.text == "echo: abab"
    assert outcome.output.parse(EchoOutput).echoed == "abab"


def test_output_parses_back_after_a_process_boundary():
    erased = ErasedTool(Echo())
    outcome = erased.run_sync(ctx(), erased.parse_args({"text": "z"}, client_name="e"))
    result = CallResult(name="echo", prompt_text=outcome.text, output=outcome.output)
    import msgpack

    wire = msgpack.unpackb(msgpack.packb(result.to_dict()))
    back = CallResult.from_dict(wire)
    assert back.output.model is None
    assert back.output.parse(EchoOutput) == EchoOutput(echoed="z")
    assert back.output == result.output


def test_default_model_text_derives_from_json():
    erased = ErasedTool(Noop())
    assert erased.run_sync(ctx(), erased.parse_args({}, client_name="n")).text == "{}"


def test_streaming_forwards_progress_then_one_outcome():
    erased = ErasedTool(Count())
    items = drain(erased, erased.parse_args({"n": 3}, client_name="count"))
    assert [i.text for i in items[:-1]] == ["step 0", "step 1", "step 2"]
    assert isinstance(items[-1], Outcome) and items[-1].output.value == {"total": 3}


def test_stream_without_terminal_is_a_custom_error():
    erased = ErasedTool(Silent())
    items = drain(erased, erased.parse_args({}, client_name="silent"))
    assert isinstance(items[0], Progress)
    assert items[-1].error.code == "stream_no_terminal"


def test_a_raising_tool_gives_an_execution_error_without_traceback():
    erased = ErasedTool(Boom())
    outcome = erased.run_sync(ctx(), erased.parse_args({}, client_name="boom"))
    assert outcome.error.kind == "execution"
    assert outcome.error.detail == "RuntimeError: disk on fire"
    assert "Traceback" not in outcome.error.detail


@pytest.mark.parametrize("tool", [Unencodable(), Infinite()])
def test_unencodable_output_becomes_execution_error(tool):
    erased = ErasedTool(tool)
    outcome = erased.run_sync(ctx(), erased.parse_args({}, client_name="u"))
    assert outcome.output is None
    assert outcome.error.kind == "execution" and outcome.error.code == "output_encoding"


def test_unimplemented_tool_returns_not_implemented():
    from pydantic import BaseModel

    from toolhub.core import Tool

    class A(BaseModel):
        pass

    class Lazy(Tool[A, A]):
        id = "lazy"

    erased = ErasedTool(Lazy())
    outcome = erased.run_sync(ctx(), erased.parse_args({}, client_name="lazy"))
    assert outcome.error.kind == "not_implemented"


@pytest.mark.parametrize(
    "value",
    [{"a": [1, {"b": math.nan}]}, [-math.inf], {"x": math.inf, "s": "fine"}],
    ids=["nested-nan", "minus-infinity", "infinity-beside-text"],
)
def test_refuse_nan_refuses_what_json_cannot_say(value):
    with pytest.raises(ValueError, match="not JSON compliant"):
        refuse_nan(value)


@pytest.mark.parametrize(
    "value",
    [{"text": "NaN and -Infinity are words here"}, {"n": 10**30, "f": 1.5e308}, [], "NaN"],
    ids=["the-words", "large-numbers", "empty", "a-lone-string"],
)
def test_refuse_nan_lets_every_json_value_through(value):
    refuse_nan(value)
