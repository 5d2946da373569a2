"""The command sandbox: what a command run by a tool may read, write, reach and know.

``SandboxPolicy`` (policy.py) says what is allowed; ``bwrap_argv`` (bwrap.py) enforces it with
bubblewrap, ``landlock_argv`` (landlock.py) with Landlock where bwrap cannot run;
``scrubbed_env`` (environment.py) is the allowlisted environment; ``probe`` (probe.py) asks once
whether bwrap can sandbox here, and ``enforce`` (enforcement.py) picks the mechanism, or refuses
(or warns loudly once) when none can. ``SandboxSettings`` (settings.py) is the config form.
``toolhub.backends.process.ProcessRunner`` applies a policy to every command it starts. See
docs/sandbox.md.
"""

from .bwrap import BwrapNotFound, bwrap_argv, find_bwrap
from .enforcement import SandboxUnavailable, default_settings, enforce, use_by_default
from .environment import scrubbed_env
from .landlock import landlock_argv
from .policy import Mechanism, SandboxMode, SandboxPolicy, default_hidden
from .probe import SandboxSupport, probe
from .settings import SandboxSettings

__all__ = [
    "BwrapNotFound",
    "Mechanism",
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
    "landlock_argv",
    "probe",
    "scrubbed_env",
    "use_by_default",
]
