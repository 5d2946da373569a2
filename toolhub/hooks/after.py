"""The ``after`` stage of one call: every progress item and the result pass through the hooks
before anything is stored, published or streamed.

A worker's emitter (``workers/calls/emitter.py``, and the background holder's) and the
embedded executor (``toolhub/executors/local.py``) hand each item here first, so the record,
the Redis stream and pub/sub, the gateway's SSE, ``task_output`` (which reads a background
call's stream) and the caller see only what the hooks let through. A command's output deltas
are joined into whole lines first (``LineJoin``), so a secret is never split across two items
where no hook could see it whole. The notes of ``before`` hooks are appended to the result's
text, before the hooks run. A hook that fails closed withholds the call's output: its
progress items are dropped and its result is a ``hook_failed`` error.
"""

from __future__ import annotations

import logging
from typing import Any

from toolhub.core import CallResult, ContentBlock, ErrorKind, Progress, ToolError, ToolOutput
from toolhub.errors import ErrorCode

from .api import AfterItem, CallInfo
from .bounded import BoundHook, HookFailed
from .lines import LineJoin

logger = logging.getLogger("toolhub.hooks")


class CallAfter:
    """The ``after`` hooks of one call, with each hook's state for the call. ``hooks``: those
    with an ``after`` stage (``after_hooks``)."""

    def __init__(
        self,
        hooks: list[BoundHook],
        info: CallInfo,
        notes: list[str] | None = None,
        failed: HookFailed | None = None,
    ) -> None:
        self.hooks = hooks
        self.info = info
        self.notes = notes if notes is not None else []
        self.failed = failed
        self._states: dict[str, dict[str, Any]] = {}
        self._lines: LineJoin | None = None  # made by the first progress item

    @property
    def active(self) -> bool:
        return bool(self.hooks or self.notes or self.failed)

    def progress(self, item: Progress) -> list[Progress]:
        """What to publish for ``item``: nothing (held for a whole line, or withheld), or the
        item as the hooks rewrote it."""
        if not self.active:
            return [item]
        if self._lines is None:
            self._lines = LineJoin()
        joined = self._lines.feed(item)
        return [] if joined is None else self._progress(joined)

    def flush(self) -> list[Progress]:
        """What the line joiner still holds, through the hooks: published before the result."""
        out: list[Progress] = []
        while self._lines is not None and (held := self._lines.flush()) is not None:
            out.extend(self._progress(held))
        return out

    def result(self, result: CallResult) -> CallResult:
        if not self.active:
            return result
        if self.notes and result.error is None:
            note = "\n\n".join(self.notes)
            result = _copy(result, prompt_text=f"{result.prompt_text}\n\n{note}")
        if self.failed is not None:
            return self._withheld(result)
        value = None if result.output is None else result.output.value
        error = None if result.error is None else result.error.to_dict()
        content = [block.to_dict() for block in result.content] if result.content else []
        done = self._apply(
            AfterItem(self.info, "result", result.prompt_text, value, error, content)
        )
        if done is None:
            return self._withheld(result)
        if _same(done, result.prompt_text, value, error, content):
            return result  # unchanged: the typed output model stays
        return _rebuilt(result, done)

    def items(self, item: Progress | CallResult) -> list[Progress | CallResult]:
        """What to hand on for one item of a call's stream: a result comes after what the
        line joiner held."""
        if isinstance(item, CallResult):
            return [*self.flush(), self.result(item)]
        return list(self.progress(item))

    def _progress(self, progress: Progress) -> list[Progress]:
        if self.failed is not None:
            return []
        item = AfterItem(
            self.info,
            "progress",
            progress.text,
            progress.payload,
            content=[block.to_dict() for block in progress.blocks],
        )
        done = self._apply(item)
        if done is None:
            return []
        return [
            Progress(
                progress.kind,
                text=done.text,
                blocks=tuple(ContentBlock.from_dict(b) for b in done.content),
                subkind=progress.subkind,
                payload=done.output,
            )
        ]

    def _apply(self, item: AfterItem) -> AfterItem | None:
        """``item`` through every hook; None when one failed closed (``failed`` says which)."""
        for hook in self.hooks:
            assert hook.after is not None
            state = self._states.get(hook.name)
            if state is None:
                state = self._states[hook.name] = {}
            item.state = state
            try:
                answer = hook.run(hook.after, item)
                if answer is not None and not hook.inline:  # a shipped hook answers well
                    _check(hook.name, answer)
            except HookFailed as failure:
                if hook.fails_open:
                    hook.skipped(failure)
                    continue
                logger.warning("%s; the call's output is withheld (fail_closed)", failure)
                self.failed = failure
                return None
            if answer is not None:
                item = answer
        return item

    def _withheld(self, result: CallResult) -> CallResult:
        assert self.failed is not None
        error = ToolError.custom(
            ErrorCode.HOOK_FAILED,
            f"The call's output was withheld: {self.failed}.",
            hook=self.failed.hook,
            may_have_run=True,
        )
        return CallResult.failure(
            result.name, error, tool_id=result.tool_id, call_id=result.call_id
        )


def _check(hook: str, answer: Any) -> None:
    """``HookFailed`` unless ``answer`` is an item toolhub can store: text a string (or None),
    an error with a known kind and a detail, content blocks of a known type."""
    if not isinstance(answer, AfterItem):
        raise HookFailed(hook, f"answered a {type(answer).__name__}")
    if answer.text is not None and not isinstance(answer.text, str):
        raise HookFailed(hook, "answered a `text` that is not a string")
    error = answer.error
    if error is not None and not (
        isinstance(error, dict)
        and error.get("kind") in ErrorKind._value2member_map_
        and isinstance(error.get("detail"), str)
    ):
        raise HookFailed(hook, "answered an `error` without a known `kind` and a `detail`")
    blocks = answer.content
    if not isinstance(blocks, list) or not all(
        isinstance(b, dict) and b.get("type") in _BLOCK_TYPES for b in blocks
    ):
        raise HookFailed(hook, "answered `content` that is not a list of content blocks")


_BLOCK_TYPES = ("text", "image", "resource")


def after_hooks(hooks: list[BoundHook]) -> list[BoundHook]:
    """Those of ``hooks`` with an ``after`` stage."""
    return [h for h in hooks if h.after is not None]


def _same(item: AfterItem, text: str, output: Any, error: Any, content: Any) -> bool:
    """Whether ``item`` holds these values: the very objects (a hook that found nothing to
    change hands them on), or equal ones."""
    if item.output is output and item.error is error and item.content is content:
        return item.text == text
    return (item.text, item.output, item.error, item.content) == (text, output, error, content)


def _rebuilt(result: CallResult, item: AfterItem) -> CallResult:
    output = result.output
    if output is not None and item.output != output.value:
        output = ToolOutput(output.tag, item.output, output.tool_id)
    error = result.error
    if item.error is not None and (error is None or item.error != error.to_dict()):
        error = ToolError.from_dict(item.error)
    return _copy(
        result,
        prompt_text=item.text if item.text is not None else "",
        output=output,
        error=error,
        content=tuple(ContentBlock.from_dict(b) for b in item.content),
    )


def _copy(result: CallResult, **changes: Any) -> CallResult:
    fields: dict[str, Any] = {
        "name": result.name,
        "prompt_text": result.prompt_text,
        "output": result.output,
        "error": result.error,
        "tool_id": result.tool_id,
        "call_id": result.call_id,
        "effective_tool_name": result.effective_tool_name,
        "content": result.content,
    }
    fields.update(changes)
    return CallResult(**fields)
