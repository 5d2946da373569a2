"""The operator policy's rules for what a tenant's config reaches beyond the fleet: the URLs of
HTTP MCP servers and hubs, and the ``${VAR}`` references in them.

The threats: a URL that makes the gateway (or a worker) connect to what only it can reach —
the cloud metadata service, loopback (the gateway's own Redis), the cluster's private network —
and a ``${VAR}`` that copies the gateway's environment into a header or URL sent to the
tenant's host. URLs pass the same address rules as ``web_fetch`` (``netguard.refusal``); the
host must be written literally (a ``${VAR}`` in it could not be judged here), and, when the
operator lists ``remote_hosts``, be one of them. A host name is judged by its name, not by
what it resolves to at connection time: an operator who needs that lists ``remote_hosts``.
"""

from __future__ import annotations

import httpx

from toolhub.backends.providers.netguard import SCHEMES, parse_ip, refusal
from toolhub.core import ConfigViolation
from toolhub.env_refs import is_toolhub_secret, references

from .policy import OperatorPolicy


def url_violations(
    owner: str, path: str, url: str, policy: OperatorPolicy
) -> list[ConfigViolation]:
    why = _url_refusal(url, policy)
    if why is None:
        return []
    allowed = ", ".join(policy.remote_hosts) or "public http(s) hosts"
    return [
        ConfigViolation(
            owner,
            f"refused by the operator policy: {why}",
            category="policy",
            field_path=path,
            expected=allowed,
            actual=url,
        )
    ]


def _url_refusal(url: str, policy: OperatorPolicy) -> str | None:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError):
        return "the URL is malformed (a `${VAR}` may not stand for its host)"
    if parsed.scheme not in SCHEMES:
        return f"only http and https URLs, not `{parsed.scheme}:`"
    host = parsed.host.lower().rstrip(".")
    if not host or "$" in host or "{" in host:
        return "the URL's host must be written out"
    if parsed.userinfo:
        return "URLs with embedded credentials are refused (use a header or token)"
    if not policy.allows_remote_host(host):
        return f"`{host}` is not in the operator's remote_hosts"
    if host == "localhost" or host.endswith(".localhost"):
        return None if policy.allow_local_urls else f"`{host}` is a loopback name"
    address = parse_ip(host)
    reason = None if address is None else refusal(address, allow_local=policy.allow_local_urls)
    return None if reason is None else f"`{host}` is {reason}"


def reference_violations(
    owner: str, texts: dict[str, str], policy: OperatorPolicy
) -> list[ConfigViolation]:
    """A violation per ``${VAR}`` in ``texts`` (field path → value) the policy does not allow."""
    out: list[ConfigViolation] = []
    for path, text in texts.items():
        for name in references(text):
            if policy.allows_env_var(name):
                continue
            why = (
                "toolhub's own variables are never expanded"
                if is_toolhub_secret(name)
                else "this variable is not in the operator's env_vars"
            )
            allowed = [n for n in policy.env_vars if policy.allows_env_var(n)]
            out.append(
                ConfigViolation(
                    owner,
                    f"refused by the operator policy: ${{{name}}}: {why}",
                    category="policy",
                    field_path=path,
                    expected=", ".join(allowed) or "none",
                    actual=f"${{{name}}}",
                )
            )
    return out
