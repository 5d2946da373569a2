"""The dependency-injection container: one type-safe home for everything a tool needs.

Tools keep one signature, ``(ctx, args)``, and pull their resources (file system, process runner,
parameters, runtime state) from here. Adding a resource never changes a tool's signature.

Keys are types, or the distinct keys ``Params[T]`` (configuration, fixed for the life of a tool
set) and ``State[T]`` (runtime state, persisted). ``Params[T]`` and ``State[T]`` of the same ``T``
are different keys, so a tool's configuration and its state can share a model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar, overload

from pydantic import TypeAdapter

from .errors import ToolError

T = TypeVar("T")


class ResourceKey(Generic[T]):
    """A container key that knows the type of its value (``Params[T]``, ``State[T]``)."""

    __slots__ = ("category", "value_type")

    def __init__(self, category: str, value_type: type[T]) -> None:
        self.category = category
        self.value_type = value_type

    @property
    def name(self) -> str:
        return f"{self.category.capitalize()}[{self.value_type.__name__}]"

    def __repr__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        return hash((self.category, self.value_type))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ResourceKey)
            and other.category == self.category
            and other.value_type is self.value_type
        )


class Params(Generic[T]):
    """``Params[T]``: a tool's effective configuration, written at build time, read-only after.

    ``Params[T]`` is a container key (a ``ResourceKey``) at runtime; type checkers see the
    generic class, and the container's overloads map it back to ``T``."""

    category: ClassVar[str] = "params"

    def __class_getitem__(cls, value_type: Any) -> Any:
        return ResourceKey(cls.category, value_type)


class State(Generic[T]):
    """``State[T]``: runtime state that tools change and the store persists across restarts."""

    category: ClassVar[str] = "state"

    def __class_getitem__(cls, value_type: Any) -> Any:
        return ResourceKey(cls.category, value_type)


Key = type[T] | ResourceKey[T]
TypedKey = type[Params[T]] | type[State[T]]


def key_name(key: Key[Any]) -> str:
    return key.name if isinstance(key, ResourceKey) else key.__name__


def value_type(key: Key[T]) -> type[T]:
    return key.value_type if isinstance(key, ResourceKey) else key


class StateSync(Protocol):
    """Where persisted state really lives when several processes share it (Redis when
    distributed). ``update`` applies ``fn`` atomically against the shared copy, retrying on
    conflict, and returns the value it stored."""

    def update(
        self, resource_id: str, fn: Callable[[Any], Any], adapter: TypeAdapter[Any]
    ) -> Any: ...


class _Persisted:
    __slots__ = ("adapter", "category", "key", "resource_id")

    def __init__(self, key: Key[Any], resource_id: str) -> None:
        self.key = key
        self.resource_id = resource_id
        self.category = key.category if isinstance(key, ResourceKey) else "state"
        self.adapter: TypeAdapter[Any] = TypeAdapter(value_type(key))


class Container:
    """Type → value map, safe to share between threads (one lock around every access)."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}
        self._persisted: dict[Any, _Persisted] = {}
        self._lock = threading.RLock()
        self._sync: StateSync | None = None
        self._version = 0

    @overload
    def insert(self, value: T) -> None: ...
    @overload
    def insert(self, value: T, key: TypedKey[T]) -> None: ...
    @overload
    def insert(self, value: T, key: Key[T]) -> None: ...
    def insert(self, value: Any, key: Any = None) -> None:
        with self._lock:
            self._values[type(value) if key is None else key] = value
            self._version += 1

    @overload
    def get(self, key: TypedKey[T]) -> T | None: ...
    @overload
    def get(self, key: Key[T]) -> T | None: ...
    def get(self, key: Any) -> Any:
        # One dict read is whole under the GIL: the lock orders the writers (and the reads
        # that take more than one step); this one runs on every call (reminders, approvals).
        return self._values.get(key)

    @overload
    def require(self, key: TypedKey[T]) -> T: ...
    @overload
    def require(self, key: Key[T]) -> T: ...
    def require(self, key: Any) -> Any:
        with self._lock:
            if key in self._values:
                return self._values[key]
        raise ToolError.missing_resource(key_name(key))

    @overload
    def get_or_default(self, key: TypedKey[T]) -> T: ...
    @overload
    def get_or_default(self, key: Key[T]) -> T: ...
    def get_or_default(self, key: Any) -> Any:
        """The stored value, or a fresh ``T()`` that is stored and returned."""
        with self._lock:
            if key not in self._values:
                self._values[key] = value_type(key)()
                self._version += 1
            return self._values[key]

    def remove(self, key: Key[Any]) -> None:
        with self._lock:
            self._values.pop(key, None)
            self._version += 1

    def values(self) -> list[Any]:
        """Every stored value (a snapshot), e.g. to close resources when a session ends."""
        with self._lock:
            return list(self._values.values())

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._values

    @overload
    def update(self, key: TypedKey[T], fn: Callable[[T], T]) -> T: ...
    @overload
    def update(self, key: Key[T], fn: Callable[[T], T]) -> T: ...
    def update(self, key: Any, fn: Callable[[Any], Any]) -> Any:
        """Replace the value with ``fn(current_or_default)`` atomically.

        Persisted state goes through the shared state sync when one is attached, so concurrent
        calls in other processes never lose each other's changes: ``fn`` may run more than once
        and must be a pure function of its argument.
        """
        entry = self._persisted.get(key)
        if entry is not None and self._sync is not None:

            def apply(current: Any) -> Any:
                return fn(value_type(key)() if current is None else current)

            new = self._sync.update(entry.resource_id, apply, entry.adapter)
            self.insert(new, key)
            return new
        with self._lock:
            current = self._values.get(key)
            new = fn(value_type(key)() if current is None else current)
            self._values[key] = new
            self._version += 1
            return new

    # -- persistence ---------------------------------------------------------------------------

    def register_persisted(self, key: Key[Any], resource_id: str) -> None:
        """Mark a key as persisted under a stable id; everything unregistered is ephemeral.

        Registering the same key twice is harmless.
        """
        if not resource_id:
            raise ValueError("a persisted resource needs a non-empty id")
        with self._lock:
            self._persisted[key] = _Persisted(key, resource_id)

    def attach_state_sync(self, sync: StateSync | None) -> None:
        self._sync = sync

    @property
    def version(self) -> int:
        """Bumped on every change, so a persistence writer can skip clean snapshots."""
        return self._version

    def serialize(self) -> dict[str, dict[str, Any]]:
        """``{"params": {id: json}, "state": {id: json}}`` of every persisted value present."""
        out: dict[str, dict[str, Any]] = {"params": {}, "state": {}}
        with self._lock:
            for key, entry in self._persisted.items():
                if key in self._values:
                    section = out.setdefault(entry.category, {})
                    section[entry.resource_id] = entry.adapter.dump_python(
                        self._values[key], mode="json"
                    )
        return out

    def load(self, data: dict[str, Any]) -> list[str]:
        """Restore persisted values. Unknown ids are ignored and a value that no longer fits its
        type is skipped (the fresh default stays): an old or foreign file never crashes a session.
        Returns the ids that were skipped as invalid."""
        skipped: list[str] = []
        with self._lock:
            for key, entry in self._persisted.items():
                section = data.get(entry.category)
                if not isinstance(section, dict) or entry.resource_id not in section:
                    continue
                try:
                    self._values[key] = entry.adapter.validate_python(section[entry.resource_id])
                except Exception:
                    skipped.append(entry.resource_id)
            self._version += 1
        return skipped

    def get_json(self, category: str, resource_id: str) -> Any:
        with self._lock:
            for key, entry in self._persisted.items():
                if (entry.category, entry.resource_id) == (category, resource_id):
                    value = self._values.get(key)
                    return None if value is None else entry.adapter.dump_python(value, mode="json")
        return None

    def set_json(self, category: str, resource_id: str, value: Any) -> bool:
        """Set a persisted value from JSON; False when no such resource is registered."""
        for key, entry in list(self._persisted.items()):
            if (entry.category, entry.resource_id) == (category, resource_id):
                self.insert(entry.adapter.validate_python(value), key)
                return True
        return False
