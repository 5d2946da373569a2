"""The scrubbed environment: what a command may know of the worker's environment.

A worker's environment holds its Redis URL, API tokens and cloud credentials; a command run by
a model must see none of them, and ``env`` prints them in one call. So commands get an
allowlist, not a denylist: a denylist misses the next secret someone adds. What is always set
is fixed (a dumb terminal, ``cat`` as pager, unbuffered Python, ``HOME`` and ``TMPDIR`` inside
the sandbox); what is passed through is named: ``PATH``, the locale and the time zone, plus the
names the config adds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: toolhub's own credentials: never in any command's environment, scrubbed or not (an
#: unsandboxed embedded command inherits the process environment minus these).
TOOLHUB_SECRETS = (
    "TOOLHUB_API_TOKEN",
    "TOOLHUB_REDIS_URL",
    "TOOLHUB_FLEET_KEY",
    "TOOLHUB_FLEET_KEY_PREVIOUS",
    "REDIS_PASSWORD",
    "REDISCLI_AUTH",
    "FLOWER_BASIC_AUTH",
)

#: Passed through from the worker when set.
PASSED_THROUGH = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def scrubbed_env(
    source: Mapping[str, str],
    *,
    home: str,
    tmpdir: str = "/tmp",
    extra_names: Iterable[str] = (),
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a command: the allowlist taken from ``source``, the fixed values,
    then ``overrides`` (what the runner's caller set explicitly). A name ending in ``*`` in
    ``extra_names`` passes every variable with that prefix; ``TOOLHUB_SECRETS`` never pass."""
    names = [*PASSED_THROUGH, *extra_names]
    exact = {n for n in names if not n.endswith("*")}
    prefixes = tuple(n[:-1] for n in names if n.endswith("*") and len(n) > 1)
    env = {
        k: v
        for k, v in source.items()
        if k not in TOOLHUB_SECRETS and (k in exact or (prefixes and k.startswith(prefixes)))
    }
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(
        HOME=home,
        TMPDIR=tmpdir,
        TERM="dumb",
        PAGER="cat",
        GIT_PAGER="cat",
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides or {})
    return env
