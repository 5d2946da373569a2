"""Executors: the one seam between running a call in this process and on a worker fleet."""

from .base import Executor
from .local import LocalExecutor

__all__ = ["Executor", "LocalExecutor"]
