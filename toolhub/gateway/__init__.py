"""The HTTP gateway: tool definitions and calls over JSON and SSE (``toolhub serve``)."""

from .app import Gateway, create_app
from .server import ThreadedServer, build_app, serve
from .settings import GatewaySettings

__all__ = ["Gateway", "GatewaySettings", "ThreadedServer", "build_app", "create_app", "serve"]
