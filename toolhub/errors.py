"""Errors a host (the program using toolhub) catches: what went wrong outside a tool call.

A tool call never raises: its failures are ``CallResult`` errors the model reads. What does
raise is setting a session up or reading the store, and those errors share one base,
``ToolhubError``, with a stable ``code`` a host can branch on.

``ErrorCode`` names every code toolhub itself sets: the ``code`` of a failed call's
``ToolError`` (``ToolError.custom(code, ...)``, ``result.error.code``) and the ``code`` of a
host-side error. It is a ``StrEnum``, so a member equals its wire value
(``ErrorCode.WORKER_LOST == "worker_lost"``). ``toolhub.core`` spells its few codes as plain
strings (it imports nothing of toolhub); a test keeps every code used anywhere a member here.
"""

from __future__ import annotations

from enum import StrEnum

from toolhub.redaction import redact_query


class ErrorCode(StrEnum):
    """The codes toolhub sets; see the module docstring."""

    # -- codes of failed calls (``CallResult.error.code``) -------------------------------------
    #: A resource the tool needs is not in the session's container.
    MISSING_RESOURCE = "missing_resource"
    #: The tool's stream ended without an output or an error.
    STREAM_NO_TERMINAL = "stream_no_terminal"
    #: The tool's output could not be encoded as JSON (an ``execution`` error).
    OUTPUT_ENCODING = "output_encoding"
    #: A description or prompt template failed to render.
    TEMPLATE_RENDER = "template_render"
    #: Redis could not be reached, so the call could not be sent or followed.
    REDIS_UNAVAILABLE = "redis_unavailable"
    #: The Celery broker refused the call.
    BROKER_UNAVAILABLE = "broker_unavailable"
    #: The call id belongs to a call still running.
    CALL_ID_IN_USE = "call_id_in_use"
    #: The worker running the call was lost and the call was not (or no longer) re-run.
    WORKER_LOST = "worker_lost"
    #: The worker polling a remote MCP task was lost and the next attempt could not take the
    #: task up (the server no longer knows it, or cannot be reached): the remote outcome is
    #: unknown, and the tool was not called again.
    REMOTE_OUTCOME_UNKNOWN = "remote_outcome_unknown"
    #: The worker failed handling the call itself (a toolhub bug or a malformed message): the
    #: call is answered at once instead of being retried as if its worker had died.
    WORKER_FAILED = "worker_failed"
    #: A hook around the call (docs/hooks.md) failed, hung past its timeout or answered
    #: nonsense, and the operator set it to fail closed: the call was refused (a ``before``
    #: hook) or its output withheld (an ``after`` hook). ``details.hook`` names it.
    HOOK_FAILED = "hook_failed"
    #: A worker refused the call's message without running it: malformed, or (with a fleet
    #: key) not signed with the fleet's key, or naming a session record that is not.
    MESSAGE_REFUSED = "message_refused"
    #: No answer within the call's deadline; toolhub cancelled it (a ``timeout`` error).
    CALL_TIMEOUT = "call_timeout"
    #: A worker refused to build a session's tool set: its stored config is outside the
    #: operator policy, or its workspace is outside its tenant's root. Nothing ran.
    POLICY_REFUSED = "policy_refused"
    #: A worker got a call for a session (or session config) that is not in Redis.
    SESSION_UNKNOWN = "session_unknown"
    #: A command could not be started: a background command, or a command whose host could
    #: not prepare it (its log or tmp under ``$TOOLHUB_HOME`` not writable: a full disk). The
    #: error says why; nothing ran.
    START_FAILED = "start_failed"
    #: A meta-tool tried to dispatch from inside another meta-tool.
    NO_DISPATCH = "no_dispatch"
    #: The service a tool needs (web search, media generation) is not configured.
    NOT_CONFIGURED = "not_configured"
    #: A network service could not be resolved or reached.
    NETWORK_ERROR = "network_error"
    #: The language server is not installed or has gone away.
    LSP_UNAVAILABLE = "lsp_unavailable"
    #: The language server answered a request with an error (an ``execution`` error).
    LSP_ERROR = "lsp_error"
    #: A program the tool runs (ripgrep) is not installed.
    MISSING_BINARY = "missing_binary"
    #: A mutating tool was called while plan mode is on (a ``permission_denied`` error).
    PLAN_MODE = "plan_mode"
    #: An upstream service answered 5xx / another failure status (``execution`` errors).
    UPSTREAM_ERROR = "upstream_error"
    UPSTREAM_REJECTED = "upstream_rejected"
    #: An upstream answer that cannot be used (malformed JSON, not a video, a bad redirect).
    BAD_UPSTREAM_RESPONSE = "bad_upstream_response"
    #: An upstream answer above the size cap.
    RESPONSE_TOO_LARGE = "response_too_large"
    #: A page redirected more often than allowed.
    TOO_MANY_REDIRECTS = "too_many_redirects"
    #: A media generation job ended without a result.
    JOB_FAILED = "job_failed"
    #: ``task`` was called in a session whose container has no ``SubagentRunner``.
    NO_SUBAGENT_RUNNER = "no_subagent_runner"
    #: ``task`` with a ``resume_from`` the runner has no state of (a ``not_found`` error).
    UNKNOWN_SUBAGENT = "unknown_subagent"
    #: The dispatcher refused a call over a quota of its tenant (a ``rate_limited`` error with
    #: ``quota``, ``limit`` and ``retry_after``; ``toolhub.distributed.quota``). Nothing ran.
    QUOTA_EXCEEDED = "quota_exceeded"
    #: A permission rule refused the call (a ``permission_denied`` error naming the rule).
    RULE_DENIED = "rule_denied"
    #: A person denied a call awaiting approval (``permission_denied``, with ``denied_by``).
    APPROVAL_DENIED = "approval_denied"
    #: Nobody approved a call in time (a ``timeout`` error); nothing ran.
    APPROVAL_EXPIRED = "approval_expired"
    #: An approval or denial of a call that no longer awaits one (``ApprovalRefused``).
    NOT_AWAITING_APPROVAL = "not_awaiting_approval"
    #: ``task`` while ``max_concurrent`` sub-agents are running (a ``rate_limited`` error).
    TOO_MANY_SUBAGENTS = "too_many_subagents"
    #: ``task`` called by a sub-agent at the depth limit (a ``permission_denied`` error).
    SUBAGENT_DEPTH_EXCEEDED = "subagent_depth_exceeded"
    #: ``task`` with ``isolation: worktree`` in a workspace that is not a git repository.
    NOT_A_GIT_REPOSITORY = "not_a_git_repository"
    #: A sub-agent ran but failed (its host callback raised, or its worker was lost for good).
    SUBAGENT_FAILED = "subagent_failed"
    #: The session's workspace is no longer the directory it was (swapped for a symlink, or
    #: replaced): nothing ran in it.
    WORKSPACE_MOVED = "workspace_moved"
    #: The sandbox this session's commands need cannot confine them here (a session of a
    #: named tenant on a worker that confines with Landlock): nothing ran.
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    #: The kernel's OOM killer ended a command: it reached its memory limit (its own cgroup's,
    #: or its session's commands' together). The output so far is in the error.
    MEMORY_LIMIT = "memory_limit"
    #: A command ran, but its output log could not be written to the end (a full or failing
    #: disk under ``$TOOLHUB_HOME``): the error carries its exit code, its first and last
    #: output kept in memory, and how many of its bytes the log holds.
    OUTPUT_LOG_INCOMPLETE = "output_log_incomplete"

    # -- codes of host-side errors (``ToolhubError.code``) -------------------------------------
    TOOLHUB_ERROR = "toolhub_error"
    #: The gateway answered an error status (``toolhub.gateway.client.GatewayError``).
    GATEWAY_ERROR = "gateway_error"
    #: The local stack (``toolhub up``) could not start (``toolhub.stack.local.StackError``).
    STACK_ERROR = "stack_error"
    #: No ``redis-server`` binary was found (``toolhub.stack.RedisServerNotFound``).
    REDIS_SERVER_NOT_FOUND = "redis_server_not_found"
    #: A Redis URL toolhub cannot use: an unknown scheme, or a Sentinel URL without its hosts
    #: or service (``toolhub.distributed.redis_address.RedisUrlError``).
    REDIS_URL_INVALID = "redis_url_invalid"
    #: Redis has no record of the call followed (``toolhub.distributed.store.CallNotFound``).
    CALL_NOT_FOUND = "call_not_found"
    #: A process that runs commands for remote clients was started as root without
    #: ``TOOLHUB_ALLOW_ROOT=1`` (``toolhub.sandbox.root_guard.RootRefused``).
    ROOT_REFUSED = "root_refused"
    #: Redis stayed away longer than a follow rides out
    #: (``toolhub.distributed.following.FollowLost``).
    FOLLOW_LOST = "follow_lost"
    #: The API key file cannot be read, parsed or written (``toolhub.tenancy.keys``).
    KEY_FILE_ERROR = "key_file_error"
    #: ``toolhub keys revoke`` named a key id the key file does not hold.
    UNKNOWN_KEY = "unknown_key"


class ToolhubError(Exception):
    """Base of the errors toolhub raises to its host; ``code`` names the failure."""

    code: str = ErrorCode.TOOLHUB_ERROR


class RedisUnavailable(ToolhubError, ConnectionError):
    """The Redis server behind a distributed session cannot be reached."""

    code = ErrorCode.REDIS_UNAVAILABLE

    def __init__(self, url: str, cause: BaseException | str) -> None:
        super().__init__(f"cannot reach Redis at {redact_url(url)}: {redis_reason(cause)}")
        self.url = redact_url(url)


def redis_reason(cause: BaseException | str) -> str:
    """Why Redis refused a connection, as its user reads it: redis-py reports a missing
    password as the protocol's ``HELLO`` rules and a wrong one as a pair of names."""
    text = str(cause)
    if "HELLO must be called" in text or "NOAUTH" in text or "Authentication required" in text:
        return "Redis requires a password: give it in the URL (redis://:PASSWORD@HOST:PORT/0)"
    if "WRONGPASS" in text or "invalid username-password" in text:
        return "Redis refused the password (or user name) in the URL"
    return text


def redact_url(url: str) -> str:
    """The URL without its password, fit for messages and logs."""
    url = redact_query(url)
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':' if user else ':'}***@{host}"
