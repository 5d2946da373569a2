"""A Language Server Protocol client over stdio, and the manager that owns the servers.

The framing (``Content-Length`` headers + JSON-RPC 2.0 bodies) is done here by hand: it is a
dozen lines and keeps the client free of any event loop. Each server runs in its own process
group; one reader thread parses its messages and resolves ``concurrent.futures.Future``s, so
calls can come from any thread or loop (tool calls run under different loops) and async
callers simply ``await asyncio.wrap_future(...)``.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from toolhub.core import ErrorKind, ToolError
from toolhub.errors import ErrorCode

SHUTDOWN_GRACE_S = 2.0
METHOD_NOT_FOUND = -32601

CLIENT_CAPABILITIES: dict[str, Any] = {
    "textDocument": {
        "synchronization": {"didSave": False, "dynamicRegistration": False},
        "hover": {"contentFormat": ["markdown", "plaintext"]},
        "definition": {"linkSupport": True},
        "references": {},
        "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
    },
    "workspace": {"symbol": {}, "workspaceFolders": True, "configuration": True},
    "general": {"positionEncodings": ["utf-16"]},
}


# SymbolKind 1..26, as the model reads them.
SYMBOL_KINDS = (
    "file",
    "module",
    "namespace",
    "package",
    "class",
    "method",
    "property",
    "field",
    "constructor",
    "enum",
    "interface",
    "function",
    "variable",
    "constant",
    "string",
    "number",
    "boolean",
    "array",
    "object",
    "key",
    "null",
    "enum_member",
    "struct",
    "event",
    "operator",
    "type_parameter",
)


def utf16_units(text: str, column: int) -> int:
    """The protocol's character offset (UTF-16 code units) of code-point ``column``."""
    return len(text[:column].encode("utf-16-le")) // 2


def code_points(text: str, units: int) -> int:
    """The code-point column of a UTF-16 offset into ``text``."""
    return len(text.encode("utf-16-le")[: units * 2].decode("utf-16-le", "ignore"))


class LspFailure(ToolError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(
            ErrorKind.EXECUTION,
            f"language server failed `{method}`: {message}",
            {"code": ErrorCode.LSP_ERROR, "rpc_code": code},
        )
        self.rpc_code = code


def find_command(command: Sequence[str]) -> list[str]:
    """The command with its program resolved: on PATH, else next to this interpreter (a
    server installed in the same virtualenv works without activating it)."""
    if not command:
        raise ToolError.invalid_arguments("an empty language server command is configured")
    program = command[0]
    found = shutil.which(program) or shutil.which(program, path=str(Path(sys.executable).parent))
    if found is None:
        raise ToolError.custom(
            ErrorCode.LSP_UNAVAILABLE, f"language server `{program}` is not installed (not on PATH)"
        )
    return [found, *command[1:]]


class LspClient:
    """One running language server, initialised for ``root``: ``command`` is its resolved
    argv (``find_command``; already wrapped in the sandbox when confined). ``settings`` is the
    server's configuration: pushed with ``workspace/didChangeConfiguration`` once initialised, and
    answered section by section to ``workspace/configuration`` requests."""

    def __init__(
        self,
        command: Sequence[str],
        root: Path,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.settings = dict(settings or {})
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, Future[Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._documents: dict[str, tuple[int, str]] = {}
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self._process = subprocess.Popen(
            list(command),
            cwd=root,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._reaper = weakref.finalize(self, _kill_group, self._process)
        threading.Thread(target=self._read, name="lsp-reader", daemon=True).start()
        threading.Thread(target=self._drain_stderr, name="lsp-stderr", daemon=True).start()
        self.capabilities: Future[dict[str, Any]] = Future()
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "rootPath": str(root),
                "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
                "capabilities": CLIENT_CAPABILITIES,
            },
        ).add_done_callback(self._initialized)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def request(self, method: str, params: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            request_id = next(self._ids)
            self._pending[request_id] = (method, future)
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return future

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def sync_document(self, path: Path, language_id: str) -> str:
        """Make the server see ``path`` as it is on disk now (open, or a full-text change)."""
        text = path.read_text(encoding="utf-8", errors="replace")
        uri = path.as_uri()
        with self._lock:
            known = self._documents.get(uri)
            version = 1 if known is None else known[0] + 1
            if known is not None and known[1] == text:
                return text
            self._documents[uri] = (version, text)
        if known is None:
            document = {"uri": uri, "languageId": language_id, "version": 1, "text": text}
            self.notify("textDocument/didOpen", {"textDocument": document})
        else:
            self.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": text}],
                },
            )
        return text

    def close(self) -> None:
        """Polite shutdown (``shutdown`` + ``exit``), then the process group is killed."""
        if self.alive:
            try:
                self.request("shutdown", None).result(SHUTDOWN_GRACE_S)
                self.notify("exit", None)
                self._process.wait(SHUTDOWN_GRACE_S)
            except Exception:  # a dying server may fail any step; the kill below settles it
                pass
        self._reaper()

    # -- wire ----------------------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, separators=(",", ":")).encode("utf-8")
        stdin = self._process.stdin
        assert stdin is not None
        try:
            with self._write_lock:
                stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            self._fail_all("the language server is not running")

    def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        while (message := _read_message(stdout)) is not None:
            self._dispatch(message)
        stdout.close()
        tail = " | ".join(self.stderr_tail)
        self._fail_all("the language server exited" + (f": {tail}" if tail else ""))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self._answer_server_request(message)
            return
        if "method" in message:
            return  # notifications (diagnostics, logs, progress) are not needed by any tool
        with self._lock:
            method, future = self._pending.pop(message.get("id"), ("", None))  # type: ignore[arg-type]
        if future is None:
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            code = code if isinstance(code, int) else 0
            future.set_exception(LspFailure(method, code, str(error.get("message", ""))))
        else:
            future.set_result(message.get("result"))

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        method = message["method"]
        if method == "workspace/configuration":
            items = (message.get("params") or {}).get("items") or []
            answer = [
                self._section(item.get("section") if isinstance(item, dict) else None)
                for item in items
            ]
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
        elif method in ("window/workDoneProgress/create", "client/registerCapability"):
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
        else:
            error = {"code": METHOD_NOT_FOUND, "message": f"{method} is not supported"}
            self._send({"jsonrpc": "2.0", "id": message["id"], "error": error})

    def _section(self, section: Any) -> Any:
        value: Any = self.settings
        for key in str(section or "").split(".") if section else ():
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def _initialized(self, future: Future[Any]) -> None:
        failure = future.exception()
        if failure is not None:
            self.capabilities.set_exception(failure)
            return
        self.notify("initialized", {})
        if self.settings:
            self.notify("workspace/didChangeConfiguration", {"settings": self.settings})
        result = future.result()
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        self.capabilities.set_result(capabilities if isinstance(capabilities, dict) else {})

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for _, future in pending.values():
            if not future.done():
                future.set_exception(ToolError.custom(ErrorCode.LSP_UNAVAILABLE, reason))

    def _drain_stderr(self) -> None:
        stderr = self._process.stderr
        assert stderr is not None
        for line in stderr:
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())
        stderr.close()


def _read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    """One framed message, or None at end of stream. Malformed bodies are skipped."""
    while True:
        length = -1
        while True:
            line = stream.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length" and value.strip().isdigit():
                length = int(value.strip())
        if length < 0:
            continue
        body = stream.read(length)
        if len(body) < length:
            return None
        try:
            message = json.loads(body)
        except ValueError:
            continue
        if isinstance(message, dict):
            return message


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()


class LspManager:
    """The session's language servers: started lazily per language, reused, restarted when one
    died, all shut down by ``close()`` (the session calls it when it ends).

    ``launch`` turns a resolved server argv into the argv and environment it starts with: the
    session's sandbox and scrubbed environment (``ProcessRunner.confine``), so a language
    server — which runs the project's code (pylsp imports plugins, tsserver runs tsconfig
    plugins) — is no less confined than a ``bash`` command. ``None``: started as is."""

    def __init__(
        self,
        root: Path,
        commands: Mapping[str, Sequence[str]],
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        launch: Callable[[list[str]], tuple[list[str], Mapping[str, str]]] | None = None,
    ) -> None:
        self.root = root
        self.launch = launch
        self.commands = {k: list(v) for k, v in commands.items()}
        self.settings = dict(settings or {})
        self._clients: dict[str, LspClient] = {}
        self._lock = threading.Lock()

    def client(self, language: str) -> LspClient:
        with self._lock:
            current = self._clients.get(language)
            if current is not None and current.alive:
                return current
            command = self.commands.get(language)
            if command is None:
                raise ToolError.invalid_arguments(
                    f"no language server is configured for {language}"
                )
            if current is not None:
                current.close()
            argv = find_command(command)
            env: Mapping[str, str] | None = None
            if self.launch is not None:
                argv, env = self.launch(argv)
            started = LspClient(argv, self.root, self.settings.get(language), env)
            self._clients[language] = started
            return started

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
