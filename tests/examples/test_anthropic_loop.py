"""examples/anthropic_agent_loop.py against the scripted model, through the real ``anthropic``
SDK: the file's text comes back in a ``tool_result``, the PNG as an image block inside its
``tool_result``, the user's answer to ``ask_user`` in the last one."""

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
    env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": API_KEY}
    done = run_example("anthropic_agent_loop.py", env)

    assert model.refusals == [], done.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(FINAL)
    assert QUESTION in done.stdout  # put to the user, who answered on stdin
    first, second, third, fourth = model.requests

    assert first["messages"] == [{"role": "user", "content": TASK}]
    assert {t["name"] for t in first["tools"]} >= {"read_file", "glob", "ask_user"}

    (note,) = second["messages"][-1]["content"]
    assert note["tool_use_id"] == "toolu_0_0" and note["is_error"] is False
    assert NOTE_TEXT in note["content"][0]["text"]

    # One user message answers both parallel calls; the image sits in its own tool_result.
    image_result, glob_result = third["messages"][-1]["content"]
    assert [image_result["tool_use_id"], glob_result["tool_use_id"]] == ["toolu_1_0", "toolu_1_1"]
    text, image = image_result["content"]
    assert text["text"].startswith("[image pixel.png: image/png")
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
    }
    assert NOTE in glob_result["content"][0]["text"]

    (answer,) = fourth["messages"][-1]["content"]
    assert answer["tool_use_id"] == "toolu_2_0"
    assert f"Q: {QUESTION}\nA: {ANSWER}" in answer["content"][0]["text"]
