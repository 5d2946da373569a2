import asyncio
import threading

from toolhub.core.usage import Usage, UsageMeter, current_meter, metering


def test_charges_add_cpu_and_output_and_keep_the_largest_peak() -> None:
    meter = UsageMeter()
    meter.charge(cpu_seconds=1.5, peak_memory_bytes=100, output_bytes=10)
    meter.charge(cpu_seconds=0.5, peak_memory_bytes=50, output_bytes=5)
    meter.charge(cpu_seconds=-3, output_bytes=-1)
    assert meter.usage() == Usage(2.0, 100, 15)


def test_the_meter_is_found_inside_and_not_outside() -> None:
    assert current_meter() is None
    with metering() as meter:
        assert current_meter() is meter
    assert current_meter() is None


def test_asyncio_tasks_created_inside_charge_the_same_meter() -> None:
    async def work() -> None:
        found = current_meter()
        assert found is not None
        found.charge(cpu_seconds=1)

    async def main() -> Usage:
        with metering() as meter:
            await asyncio.gather(asyncio.create_task(work()), asyncio.create_task(work()))
            return meter.usage()

    assert asyncio.run(main()).cpu_seconds == 2


def test_threads_charging_at_once_lose_nothing() -> None:
    meter = UsageMeter()

    def charge() -> None:
        for _ in range(1000):
            meter.charge(output_bytes=1)

    threads = [threading.Thread(target=charge) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert meter.usage().output_bytes == 8000
