"""Call ids scoped to their session, so a client-chosen call id of one tenant never meets
another tenant's.

Threat: call records, event streams, answer queues and the "id in use" check are keyed by the
call id across the whole fleet. Were the client's id stored as is, a tenant reusing an id
another tenant had used would be told "taken" (so it learns the id exists) and could block a
victim's predictable ids by using them first. So the gateway stores a named tenant's call
under ``<stored session id>/<client call id>`` (``acme~build-1/c1``): two tenants, and two
sessions of one tenant, may use the same call id without meeting, and the stored id names its
session. The ``default`` tenant's calls keep the client's id (a one-tenant fleet stores what
it always stored, and its sessions share one id space, as before); no client id holds ``~``
or ``/``, so none of them is ever a named tenant's stored id.

Everything the client reads names the call by its own id again (``shown``): the logged
events (``LoggedEvent.data``), the record, and the ``call_id`` an ``input_required`` payload or
a forwarded call carries.
"""

from __future__ import annotations

from typing import Any

from toolhub.tenancy.principal import DEFAULT_TENANT, tenant_of_session

#: Between the stored session id and the client's call id; never in a client id.
SEPARATOR = "/"


def stored_call_id(session_id: str, client_id: str) -> str:
    """The id the fleet keeps the stored session ``session_id``'s call ``client_id`` under."""
    if tenant_of_session(session_id) == DEFAULT_TENANT:
        return client_id
    return f"{session_id}{SEPARATOR}{client_id}"


def client_call_id(session_id: str, stored_id: str) -> str:
    """What the client of the stored session ``session_id`` calls its call ``stored_id``."""
    prefix = f"{session_id}{SEPARATOR}"
    return stored_id[len(prefix) :] if stored_id.startswith(prefix) else stored_id


def shown(data: dict[str, Any], stored_id: str, client_id: str) -> dict[str, Any]:
    """``data`` (a result, progress or record dict) naming the call by the client's id: its
    ``call_id``, an ``input_required`` payload's, and the stored id in any message text."""
    if stored_id == client_id:
        return data
    out = dict(data)
    for key, value in data.items():
        if key == "call_id" and value == stored_id:
            out[key] = client_id
        elif isinstance(value, str) and stored_id in value:
            out[key] = value.replace(stored_id, client_id)
        elif isinstance(value, dict) and key in ("payload", "error", "result"):
            out[key] = shown(value, stored_id, client_id)
    return out
