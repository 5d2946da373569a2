"""The Python client of the gateway API, at its documented path (docs/interfaces.md, "Python
client"). It is defined in ``toolhub/sources/gateway_api.py``, beside the async form a hub's
tools use, so the gateway and the hub source share one client."""

from toolhub.sources.gateway_api import GatewayClient, GatewayError, RateLimited, SseEvent

__all__ = ["GatewayClient", "GatewayError", "RateLimited", "SseEvent"]
