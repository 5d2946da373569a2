"""Live progress for ``toolhub call --stream``: command output is tailed as it arrives, other
progress items are printed as lines, all on stderr so stdout stays the result alone."""

from __future__ import annotations

from types import TracebackType

from toolhub.core import Progress

from .output import stderr
from .terminal_safe import clean


class ProgressView:
    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._open_line = False
        #: Whether command output was shown live (the result need not repeat it).
        self.streamed_output = False

    def __enter__(self) -> ProgressView:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._open_line:
            stderr.file.write("\n")
            stderr.file.flush()

    def show(self, item: Progress) -> None:
        if not self.enabled:
            return
        payload = item.payload if isinstance(item.payload, dict) else {}
        if item.kind == "custom" and isinstance(payload.get("delta"), str):
            delta = clean(payload["delta"])
            self.streamed_output = True
            stderr.file.write(delta)
            stderr.file.flush()
            self._open_line = not delta.endswith("\n")
            return
        if item.kind == "text" and item.text is not None:
            stderr.print("… " + clean(item.text), style="dim", highlight=False, markup=False)
        elif item.kind == "custom":
            shown = clean(f"… {item.subkind}: {item.payload}")
            stderr.print(shown, style="dim", highlight=False, markup=False)
        else:
            stderr.print(f"[dim]… {len(item.blocks)} content block(s)[/]")
