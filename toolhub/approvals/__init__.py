"""Permission rules and durable approvals (docs/approvals.md): the rules' grammar
(``rules``), how a call is matched against them (``decide``), what an approval record holds
(``base``), and the approvals of an embedded session (``memory``); a fleet's are in
``toolhub.distributed.approvals``, the gate every call passes in
``toolhub.executors.approvals``."""

from __future__ import annotations

from .base import ApprovalRefused
from .rules import Decision, OperatorPermissions, PermissionRule, Permissions

__all__ = ["ApprovalRefused", "Decision", "OperatorPermissions", "PermissionRule", "Permissions"]
