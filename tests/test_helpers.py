"""The one way tests wait: wait_until / until return the first truthy value and fail the test by name."""

import asyncio
import subprocess
import sys
import time

import pytest

from tests.helpers import until, wait_until


def test_the_first_truthy_value_is_returned():
    start = time.monotonic()
    assert wait_until(lambda: time.monotonic() - start > 0.1 and "up", timeout=5, what="up") == "up"


def test_a_timeout_fails_naming_what_and_the_last_ignored_error():
    with pytest.raises(pytest.fail.Exception, match="timed out after 0.2 s waiting for nothing"):
        wait_until(lambda: 0, timeout=0.2, what="nothing")

    def refused():
        raise ConnectionError("refused")

    with pytest.raises(pytest.fail.Exception, match=r"waiting for a server \(last: ConnectionError"):
        wait_until(refused, timeout=0.2, what="a server", ignoring=(ConnectionError,))
    with pytest.raises(ConnectionError):  # not ignored: raised at once
        wait_until(refused, timeout=5, what="a server")


def test_a_process_that_exits_first_fails_at_once_with_its_code():
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"exited \(3\) before ready; its log"):
        wait_until(lambda: False, timeout=30, what="ready", process=process, detail=lambda: "its log")
    assert time.monotonic() - start < 10


def test_until_lets_the_event_loop_run_between_checks():
    async def main() -> bool:
        done = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, done.set)
        return await until(done.is_set, timeout=5, what="the event")

    assert asyncio.run(main()) is True
    with pytest.raises(pytest.fail.Exception, match="waiting for nothing"):
        asyncio.run(until(lambda: None, timeout=0.1, what="nothing"))
