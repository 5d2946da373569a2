"""kombu's ``unacked`` entries a worker leaves behind: the lease keeper's sweep of them.

A worker that lost its broker connection while holding messages reconnects (the guard is a
fenced reach, ``toolhub.fences.kombu.guard_detached_channels``, installed by ``workers.app``);
the acknowledgement of a message delivered on the lost connection cannot reach Redis and is
dropped, leaving its kombu ``unacked`` entry behind, as a killed worker does. toolhub does not
rely on kombu's restore (its leases re-run calls whose worker died), so the keeper removes the
entries old enough that no call needs them (``toolhub.distributed.unacked``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolhub.distributed.unacked import clean_stale_unacked

if TYPE_CHECKING:
    from workers.calls.runtime import WorkerRuntime


def clean_unacked(runtime: WorkerRuntime) -> int:
    """The lease keeper's sweep of the kombu ``unacked`` entries left behind (dropped acks,
    killed workers): those older than two leases whose call no longer needs them."""
    store = runtime.store
    return clean_stale_unacked(
        store.client,
        store.keys,
        min_age=2 * runtime.settings.lease_seconds,
        transport_options=runtime.app.conf.broker_transport_options,
    )
