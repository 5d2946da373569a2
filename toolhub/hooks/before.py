"""The ``before`` stage: each hook in order may deny the call, rewrite its arguments or add a
note, at the dispatcher, before the call is queued (or run, embedded).

Rewritten arguments are validated again against the tool's input model
(``ToolSet.prepare_canonical``), so a hook cannot hand a tool what its model refuses; the next
hook sees the rewritten call. A denial is a ``permission_denied`` error naming the hook; a
failed hook that fails closed refuses the call with ``hook_failed``; neither runs anything.
"""

from __future__ import annotations

from toolhub.core import CallResult, ToolError
from toolhub.errors import ErrorCode
from toolhub.toolset import Prepared, ToolSet

from .api import BeforeCall, CallInfo, Decision
from .bounded import BoundHook, HookFailed


def run_before(
    hooks: list[BoundHook], toolset: ToolSet, prepared: Prepared, info: CallInfo
) -> Prepared | CallResult:
    """``prepared`` as the hooks let it run, or the failed result of a refused call."""
    for hook in hooks:
        if hook.before is None:
            continue
        try:
            decision = hook.run(hook.before, BeforeCall(info, dict(prepared.arguments)))
            if decision is not None and not isinstance(decision, Decision):
                raise HookFailed(hook.name, f"answered a {type(decision).__name__}")
        except HookFailed as failure:
            if hook.fails_open:
                hook.skipped(failure)
                continue
            return _refused(
                prepared,
                ToolError.custom(
                    ErrorCode.HOOK_FAILED,
                    f"The call was refused: {failure}. Nothing ran.",
                    hook=hook.name,
                    may_have_run=False,
                ),
            )
        if decision is None:
            continue
        if decision.action == "deny":
            reason = decision.reason or "no reason given"
            return _refused(
                prepared,
                ToolError.permission_denied(
                    f"Denied by hook `{hook.name}`: {reason}", hook=hook.name
                ),
            )
        if decision.action == "rewrite":
            rewritten = _rewritten(toolset, prepared, hook.name, decision)
            if isinstance(rewritten, CallResult):
                return rewritten
            prepared = rewritten
        if decision.note:
            prepared.notes.append(decision.note)
    return prepared


def _rewritten(
    toolset: ToolSet, prepared: Prepared, hook: str, decision: Decision
) -> Prepared | CallResult:
    arguments = decision.arguments
    try:
        if not isinstance(arguments, dict):
            raise ToolError.invalid_arguments("the arguments are not an object")
        again = toolset.prepare_canonical(prepared.name, arguments, prepared.ctx.call_id)
    except ToolError as err:
        return _refused(
            prepared,
            ToolError.invalid_arguments(
                f"Hook `{hook}` rewrote the arguments into ones the tool refuses: {err.detail}",
                hook=hook,
            ),
        )
    again.notes = prepared.notes
    return again


def _refused(prepared: Prepared, error: ToolError) -> CallResult:
    return CallResult.failure(
        prepared.name, error, tool_id=prepared.entry.fq_id, call_id=prepared.ctx.call_id
    )
