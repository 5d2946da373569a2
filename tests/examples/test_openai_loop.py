"""examples/openai_agent_loop.py against the scripted model, through the real ``openai`` SDK:
the file's text comes back in the tool message, the PNG as an image part of the user message
that follows the tool messages, the user's answer to ``ask_user`` in the last tool message."""

from __future__ import annotations

from tests.examples.conftest import RunExample
from tests.examples.scripted_model import (
    ANSWER,
    API_KEY,
    FINAL,
    NOTE,
    NOTE_TEXT,
    PIXEL,
    QUESTION,
    TASK,
    ScriptedModel,
)


def test_the_loop_feeds_back_text_images_and_the_users_answer(
    model: ScriptedModel, run_example: RunExample
) -> None:
    env = {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": API_KEY}
    done = run_example("openai_agent_loop.py", env)

    assert model.refusals == [], done.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(FINAL)
    assert QUESTION in done.stdout  # put to the user, who answered on stdin
    first, second, third, fourth = model.requests

    assert first["messages"] == [{"role": "user", "content": TASK}]
    assert first["tools"] and all(t["function"]["strict"] is True for t in first["tools"])

    # The strict-form arguments (offset and limit null) were taken as absent.
    note = second["messages"][-1]
    assert note["role"] == "tool" and note["tool_call_id"] == "call_0_0"
    assert NOTE_TEXT in note["content"]

    # Both parallel calls answered, in order, and only then the image, from the user.
    *_, image_call, glob_call, images = third["messages"]
    assert [image_call["tool_call_id"], glob_call["tool_call_id"]] == ["call_1_0", "call_1_1"]
    assert image_call["content"].startswith("[image pixel.png: image/png")
    assert NOTE in glob_call["content"]
    assert images["role"] == "user"
    url = f"data:image/png;base64,{PIXEL}"
    assert {"type": "image_url", "image_url": {"url": url}} in images["content"]

    answer = fourth["messages"][-1]
    assert answer["role"] == "tool" and answer["tool_call_id"] == "call_2_0"
    assert f"Q: {QUESTION}\nA: {ANSWER}" in answer["content"]


def test_without_a_key_it_says_which_to_set(run_example: RunExample) -> None:
    done = run_example("openai_agent_loop.py", {})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "set OPENAI_API_KEY" in done.stderr.splitlines()[-1]
