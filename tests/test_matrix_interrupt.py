"""An interrupt ends the matrix at once: its busy worker processes are terminated, and its
fetching threads give up at their next request or piece of a body (issue 28: one SIGTERM sent
to ``patcher matrix`` took 5.5 s quiet and over 20 s under load, both pools waited for)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from fakeindex import Fault, Resource, loopback_server
from pytest_httpserver import HTTPServer

from patcher.index import STOPPING, HttpClient, Stopping
from patcher.matrix import stopped_at_once

BOUND_SECONDS = 5.0  # the unstopped work below takes 60 s (a worker) and 10 s (a trickle)


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    yield from loopback_server()


WORKER_SCRIPT = """
import time
from concurrent.futures import ThreadPoolExecutor
from patcher.matrix import process_pool, stopped_at_once

cores = process_pool()
network = ThreadPoolExecutor(1)
try:
    with cores, network, stopped_at_once(cores, network):
        busy = cores.submit(time.sleep, 60)
        while not busy.running():
            time.sleep(0.05)
        time.sleep(0.5)  # in the worker now
        raise KeyboardInterrupt
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_an_interrupt_terminates_the_pools_busy_worker_processes() -> None:
    """The process ends at once: the interpreter, on its way out, waits for the pool, which
    waits for its workers' running calls unless they were terminated."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.stdout == "interrupted\n", done.stderr
    assert time.monotonic() - start < BOUND_SECONDS + 5  # the interpreter's start included


def test_an_interrupt_stops_a_fetching_thread_mid_body(server: HTTPServer) -> None:
    trickled = Resource(b"x" * 4096, "application/octet-stream")
    trickled.always = Fault.TRICKLE
    server.expect_request("/body").respond_with_handler(trickled)
    cores = ThreadPoolExecutor(1)
    network = ThreadPoolExecutor(1)
    with pytest.raises(KeyboardInterrupt), cores, network, stopped_at_once(cores, network):
        reading = network.submit(HttpClient().get, server.url_for("/body"))
        while not trickled.served:
            time.sleep(0.05)
        start = time.monotonic()
        raise KeyboardInterrupt
    assert time.monotonic() - start < BOUND_SECONDS
    assert isinstance(reading.exception(), Stopping)
    assert not STOPPING.is_set()  # the next requests of this process go on as before
    trickled.released.set()
