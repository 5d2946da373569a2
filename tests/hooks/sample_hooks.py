"""The operator's Python hooks the hook tests install, as entry points of the
``toolhub.hooks`` group (``entry_points/``: a distribution's metadata, found on the path like
any installed package's)."""

from __future__ import annotations

import time

from toolhub.hooks import AfterItem, BeforeCall, Decision


class Rewrite:
    """``bash``: ``REWRITE_ME`` in a command becomes ``rewritten``, with a note."""

    def before(self, call: BeforeCall) -> Decision | None:
        command = call.arguments.get("command")
        if call.call.tool != "Main:bash" or "REWRITE_ME" not in str(command):
            return None
        arguments = {**call.arguments, "command": str(command).replace("REWRITE_ME", "rewritten")}
        return Decision.rewrite(arguments, note="note: the command was rewritten by policy")


class DenyRm:
    """Denies a ``bash`` command that removes things."""

    def before(self, call: BeforeCall) -> Decision | None:
        if "rm -rf" in str(call.arguments.get("command")):
            return Decision.deny("removing files is not allowed here")
        return None


class BadRewrite:
    """Rewrites every call into arguments no tool accepts."""

    def before(self, call: BeforeCall) -> Decision:
        return Decision.rewrite({**call.arguments, "timeout": "soon"})


class Raises:
    """An ``after`` hook that raises, quoting what it saw."""

    def after(self, item: AfterItem) -> AfterItem:
        raise RuntimeError(f"cannot handle {item.text!r}")


class Hangs:
    """A ``before`` hook that never answers in time."""

    def before(self, call: BeforeCall) -> None:
        time.sleep(30)


class Dogs:
    """An ``after`` hook that rewrites the model text and the structured output."""

    def after(self, item: AfterItem) -> AfterItem:
        if item.text is not None:
            item.text = item.text.replace("cat", "dog")
        if isinstance(item.output, dict):
            for key in ("output", "delta"):  # a bash result's, an output delta's
                if isinstance(item.output.get(key), str):
                    item.output = {**item.output, key: item.output[key].replace("cat", "dog")}
        return item


class Garbles:
    """An ``after`` hook that answers content toolhub cannot store."""

    def after(self, item: AfterItem) -> AfterItem:
        item.content = [{"no": "type"}]
        return item
