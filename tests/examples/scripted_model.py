"""A scripted model on loopback that speaks the real wire formats of OpenAI Chat Completions
(``POST /v1/chat/completions``) and Anthropic Messages (``POST /v1/messages``), so that the
examples are tested through the real ``openai`` and ``anthropic`` SDKs, over HTTP, end to end.

It refuses, with HTTP 400 in each API's own error format, what the real API would refuse:
missing fields, unknown roles, a tool result that answers no call (or a call left unanswered),
an image where the API takes none, a strict schema that is not strict. The SDK then raises, so
the example fails. Every request body is recorded in ``requests``, every refusal in
``refusals``.

The script (``TURNS``) is played turn by turn; the turn is the number of assistant messages in
the request, so a retried request gets the same answer. Before each turn the model checks what
came back since its last one — the file's text, then the image, then the user's answer — and
refuses to go on when it is not there.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "sk-scripted-test"
TASK = "Read notes.txt, look at pixel.png, ask me which colour to use, then sum it up."
NOTE, NOTE_TEXT = "notes.txt", "The launch code is PELICAN-42."
IMAGE = "pixel.png"
#: A 1x1 PNG, base64: what the workspace's ``pixel.png`` holds.
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
QUESTION, ANSWER = "Which colour should the report use?", "teal"
FINAL = "Done: the launch code is PELICAN-42 and the report will be teal."

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
DATA_URL = re.compile(r"^data:(image/[a-z]+);base64,([A-Za-z0-9+/=]+)$")


@dataclass(frozen=True)
class Turn:
    """What must have come back since the last turn, then the calls to make (or the answer)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    expect_text: str | None = None
    expect_image: bool = False
    final: str | None = None


TURNS = [
    Turn(calls=[("read_file", {"path": NOTE})]),
    # Two calls at once: every one must be answered, and the image only after both.
    Turn(expect_text=NOTE_TEXT, calls=[("read_file", {"path": IMAGE}), ("glob", {"pattern": "*"})]),
    Turn(
        expect_image=True,
        calls=[("ask_user", {"questions": [{"question": QUESTION, "options": ["teal", "red"]}]})],
    ),
    Turn(expect_text=f"A: {ANSWER}", final=FINAL),
]


class Refused(Exception):
    """What the real API would answer with HTTP 400."""


def require(condition: object, message: str) -> None:
    if not condition:
        raise Refused(message)


class ScriptedModel:
    """The server, on an ephemeral loopback port, in a daemon thread."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.refusals: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            try:
                if path == "/v1/chat/completions":
                    response = openai_reply(headers, body)
                elif path == "/v1/messages":
                    response = anthropic_reply(headers, body)
                else:
                    return 404, {"error": {"message": f"no route {path}"}}
            except Refused as exc:
                self.refusals.append(str(exc))
                return 400, refusal(path, str(exc))
            return 200, response


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' httpx clients expect

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload = model.reply(self.path, headers, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def refusal(path: str, message: str) -> dict[str, Any]:
    if path == "/v1/messages":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


def parts(content: Any) -> list[dict[str, Any]]:
    """A message's content as a list of parts: a plain string is one text part."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def play(turn_no: int, seen_text: str, seen_images: list[tuple[str, str]]) -> Turn:
    """The turn to play, once what came back since the last one is what the script expects."""
    require(turn_no < len(TURNS), f"scripted model: no turn {turn_no} in the script")
    turn = TURNS[turn_no]
    if turn.expect_text is not None:
        require(
            turn.expect_text in seen_text,
            f"scripted model: expected {turn.expect_text!r} in what came back, got {seen_text!r}",
        )
    if turn.expect_image:
        require(
            ("image/png", PIXEL) in seen_images,
            f"scripted model: expected {IMAGE} as an image, got {seen_images!r}",
        )
    return turn


# -- OpenAI Chat Completions ----------------------------------------------------------------------


def openai_reply(headers: dict[str, str], body: Any) -> dict[str, Any]:
    require(headers.get("authorization") == f"Bearer {API_KEY}", "Incorrect API key provided.")
    require(isinstance(body, dict), "We could not parse the JSON body of your request.")
    require(isinstance(body.get("model"), str), "you must provide a model parameter")
    tools = {check_openai_tool(tool): tool for tool in body.get("tools") or []}
    messages = body.get("messages")
    require(isinstance(messages, list) and messages, "'messages' must be a non-empty array")
    check_openai_messages(messages)

    last = max((n for n, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    text: list[str] = []
    images: list[tuple[str, str]] = []
    for seen in messages[last + 1 :]:
        for part in parts(seen["content"]):
            if part["type"] == "text":
                text.append(part["text"])
            elif match := DATA_URL.match(part["image_url"]["url"]):
                images.append((match[1], match[2]))
    turn_no = sum(m["role"] == "assistant" for m in messages)
    turn = play(turn_no, "\n".join(text), images)

    message: dict[str, Any] = {"role": "assistant", "content": turn.final, "refusal": None}
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{turn_no}_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(strict_args(tools, name, args))},
            }
            for n, (name, args) in enumerate(turn.calls)
        ]
    return {
        "id": f"chatcmpl-scripted-{turn_no}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def check_openai_tool(tool: Any) -> str:
    require(isinstance(tool, dict) and tool.get("type") == "function", "tools[].type: 'function'")
    function = tool.get("function")
    require(isinstance(function, dict), "tools[].function is required")
    name = function.get("name")
    require(isinstance(name, str) and NAME.match(name), f"Invalid tools[].function.name: {name!r}")
    parameters = function.get("parameters", {})
    require(parameters.get("type") == "object", f"{name}: parameters must be of type 'object'")
    if function.get("strict"):
        check_strict(parameters, name)
    return str(name)


def check_strict(schema: Any, where: str) -> None:
    """OpenAI's strict-mode rules: every object closed, every property required."""
    if isinstance(schema, list):
        for item in schema:
            check_strict(item, where)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object" or "properties" in schema:
        require(
            schema.get("additionalProperties") is False,
            f"Invalid schema for function '{where}': 'additionalProperties' is required to be "
            "supplied and to be false",
        )
        missing = set(schema.get("properties", {})) - set(schema.get("required", []))
        require(
            not missing,
            f"Invalid schema for function '{where}': 'required' is missing {sorted(missing)}",
        )
    for value in schema.values():
        check_strict(value, where)


def check_openai_messages(messages: list[Any]) -> None:
    unanswered: set[str] = set()
    for n, message in enumerate(messages):
        require(isinstance(message, dict), f"messages[{n}] must be an object")
        role, content = message.get("role"), message.get("content")
        require(
            role in ("system", "developer", "user", "assistant", "tool"),
            f"Invalid value for 'messages[{n}].role': {role!r}",
        )
        if role != "tool":
            require(
                not unanswered,
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Not answered: {sorted(unanswered)}",
            )
        if role == "assistant":
            calls = message.get("tool_calls") or []
            require(content is not None or calls, f"messages[{n}]: content or tool_calls")
            for call in calls:
                function = call.get("function", {})
                require(
                    call.get("type") == "function"
                    and isinstance(call.get("id"), str)
                    and isinstance(function.get("name"), str)
                    and isinstance(function.get("arguments"), str),
                    f"messages[{n}].tool_calls: id, type 'function', function.name/arguments",
                )
                unanswered.add(call["id"])
            continue
        require(
            isinstance(content, str) or (isinstance(content, list) and content),
            f"messages[{n}].content must be a string or a non-empty array of parts",
        )
        if role == "tool":
            call_id = message.get("tool_call_id")
            require(
                call_id in unanswered,
                f"Invalid parameter: messages[{n}] with role 'tool' must be a response to a "
                f"preceding message with 'tool_calls' (tool_call_id {call_id!r}).",
            )
            unanswered.discard(call_id)
        for part in parts(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url":
                require(
                    role == "user",
                    f"Invalid 'messages[{n}]'. Image URLs are only allowed for messages with "
                    "role 'user'.",
                )
                url = part.get("image_url", {}).get("url", "")
                match = DATA_URL.match(url)
                require(
                    url.startswith("https://") or (match and match[1] in IMAGE_TYPES),
                    f"messages[{n}]: invalid image URL",
                )
            else:
                require(
                    kind == "text" and isinstance(part.get("text"), str),
                    f"messages[{n}].content: invalid part {part!r}",
                )
    require(not unanswered, f"tool_call_ids without a tool message: {sorted(unanswered)}")


def strict_args(tools: dict[str, Any], name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as a strict-mode model sends them: every property, ``null`` when unused."""
    require(name in tools, f"scripted model: the request offers no tool {name!r}")
    function = tools[name]["function"]
    if not function.get("strict"):
        return args
    return {key: args.get(key) for key in function["parameters"]["properties"]}


# -- Anthropic Messages ---------------------------------------------------------------------------


def anthropic_reply(headers: dict[str, str], body: Any) -> dict[str, Any]:
    # The key comes as x-api-key or, from the 2.x SDKs, as a bearer token.
    keys = {headers.get("x-api-key"), headers.get("authorization")}
    require(keys & {API_KEY, f"Bearer {API_KEY}"}, "invalid x-api-key")
    require(headers.get("anthropic-version"), "anthropic-version: header is required")
    require(isinstance(body, dict), "There was an error parsing the body of your request.")
    require(isinstance(body.get("model"), str), "model: Field required")
    require(isinstance(body.get("max_tokens"), int), "max_tokens: Field required")
    tools = {check_anthropic_tool(tool) for tool in body.get("tools") or []}
    messages = body.get("messages")
    require(isinstance(messages, list) and messages, "messages: at least one message is required")
    check_anthropic_messages(messages)

    text: list[str] = []
    images: list[tuple[str, str]] = []
    for block in parts(messages[-1]["content"]):
        inner = block.get("content", []) if block["type"] == "tool_result" else [block]
        for part in parts(inner):
            if part["type"] == "text":
                text.append(part["text"])
            elif part["type"] == "image" and part["source"]["type"] == "base64":
                images.append((part["source"]["media_type"], part["source"]["data"]))
    turn_no = sum(m["role"] == "assistant" for m in messages)
    turn = play(turn_no, "\n".join(text), images)

    content: list[dict[str, Any]] = [{"type": "text", "text": turn.final or "Let me look."}]
    for n, (name, args) in enumerate(turn.calls):
        require(name in tools, f"scripted model: the request offers no tool {name!r}")
        content.append(
            {"type": "tool_use", "id": f"toolu_{turn_no}_{n}", "name": name, "input": args}
        )
    return {
        "id": f"msg_scripted_{turn_no}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": "tool_use" if turn.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def check_anthropic_tool(tool: Any) -> str:
    require(isinstance(tool, dict), "tools: each tool must be an object")
    name = tool.get("name")
    require(isinstance(name, str) and NAME.match(name), f"tools.name: invalid {name!r}")
    schema = tool.get("input_schema")
    require(isinstance(schema, dict) and schema.get("type") == "object", f"{name}: input_schema")
    return str(name)


def check_anthropic_messages(messages: list[Any]) -> None:
    pending: set[str] = set()  # tool_use ids of the previous assistant message
    for n, message in enumerate(messages):
        require(isinstance(message, dict), f"messages.{n}: must be an object")
        role, content = message.get("role"), message.get("content")
        require(role in ("user", "assistant"), f"messages.{n}.role: {role!r}")
        require(n > 0 or role == "user", "messages: the first message must use the user role")
        require(
            isinstance(content, str) or (isinstance(content, list) and content),
            f"messages.{n}.content: a string or a non-empty list of blocks",
        )
        blocks = parts(content)
        answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        require(
            pending <= set(answered),
            f"messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {sorted(pending - set(answered))}",
        )
        require(
            set(answered) <= pending,
            f"messages.{n}: unexpected `tool_use_id` found in `tool_result` blocks",
        )
        kinds = [b.get("type") for b in blocks]
        require(
            kinds[: len(answered)] == ["tool_result"] * len(answered),
            f"messages.{n}: tool_result blocks must come first in the content",
        )
        allowed = ("text", "tool_use") if role == "assistant" else ("text", "image", "tool_result")
        for block in blocks:
            require(block.get("type") in allowed, f"messages.{n}: invalid block {block!r}")
            if block["type"] == "tool_result":
                check_tool_result(block, n)
            else:
                check_block(block, n)
        pending = {b["id"] for b in blocks if b["type"] == "tool_use"}
    require(not pending, f"`tool_use` ids without `tool_result` blocks: {sorted(pending)}")


def check_tool_result(block: dict[str, Any], n: int) -> None:
    require(isinstance(block.get("is_error", False), bool), f"messages.{n}: is_error: a boolean")
    inner = block.get("content", "")
    if isinstance(inner, list):
        for part in inner:
            require(
                isinstance(part, dict) and part.get("type") in ("text", "image"),
                f"messages.{n}: tool_result content takes text and image blocks",
            )
            check_block(part, n)
    else:
        require(isinstance(inner, str), f"messages.{n}: tool_result content: string or list")


def check_block(block: dict[str, Any], n: int) -> None:
    kind = block["type"]
    if kind == "text":
        require(
            isinstance(block.get("text"), str) and block["text"],
            f"messages.{n}: text content blocks must be non-empty",
        )
    elif kind == "image":
        source = block.get("source", {})
        require(
            source.get("type") == "base64"
            and source.get("media_type") in IMAGE_TYPES
            and isinstance(source.get("data"), str),
            f"messages.{n}: image source: type base64, media_type, data",
        )
    elif kind == "tool_use":
        require(
            isinstance(block.get("id"), str)
            and isinstance(block.get("name"), str)
            and isinstance(block.get("input"), dict),
            f"messages.{n}: tool_use: id, name and input",
        )
