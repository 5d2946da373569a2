"""Inside a bwrap sandbox with an allowlist: ``python -I -S bridge.py <socket> <port> -- argv``.

The command has a network namespace of its own (loopback only), so it cannot reach the egress
proxy's TCP port outside. The proxy's unix socket is bound into the sandbox instead, and this
bridge listens on ``127.0.0.1:<port>`` inside, relaying each connection to that socket; the
command finds it through ``HTTP_PROXY``/``HTTPS_PROXY``. The bridge runs the command as its
child and exits with the command's status (128 + N when a signal N ended it), so it is
invisible to whoever waits for the command. It imports nothing of toolhub: it starts once per
command, with the standard library only.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        return
    finally:
        for end in (sink, source):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_relay, args=(a, b), daemon=True).start()


def main(args: list[str]) -> int:
    if len(args) < 4 or args[2] != "--":
        sys.stderr.write("usage: bridge.py <socket> <port> -- <argv...>\n")
        return 2
    path, port, argv = args[0], int(args[1]), args[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        sys.stderr.write(f"toolhub sandbox: cannot run {argv[0]}: {exc}\n")
        return 127
    # The group's signals are for the command: the bridge lives exactly as long as it does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
