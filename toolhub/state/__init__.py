"""A session's runtime state, persisted: ``file`` (embedded: an atomically written, debounced
JSON file) and ``redis`` (a fleet: a hash changed only by compare-and-set), side by side."""

from .file import DebouncedWriter, StateFile

__all__ = ["DebouncedWriter", "StateFile"]
