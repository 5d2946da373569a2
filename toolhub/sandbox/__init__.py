"""The command sandbox: what a command run by a tool may read, write, reach and know.

``SandboxPolicy`` (policy.py) says what is allowed, ``bwrap_argv`` (bwrap.py) enforces it with
bubblewrap, ``scrubbed_env`` (environment.py) is the allowlisted environment, ``probe``
(probe.py) asks once whether this machine can sandbox at all, and ``enforce`` (enforcement.py)
refuses, or warns loudly once, when it cannot. ``SandboxSettings`` (settings.py) is the config
form. ``toolhub.backends.process.ProcessRunner`` applies a policy to every command it starts.
See docs/sandbox.md.
"""

from .bwrap import BwrapNotFound, bwrap_argv, find_bwrap
from .enforcement import SandboxUnavailable, default_settings, enforce, use_by_default
from .environment import scrubbed_env
from .policy import SandboxMode, SandboxPolicy, default_hidden
from .probe import SandboxSupport, probe
from .settings import SandboxSettings

__all__ = [
    "BwrapNotFound",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxSettings",
    "SandboxSupport",
    "SandboxUnavailable",
    "bwrap_argv",
    "default_hidden",
    "default_settings",
    "enforce",
    "find_bwrap",
    "probe",
    "scrubbed_env",
    "use_by_default",
]
