"""A fake vLLM release on a loopback PEP 691 index, with faults scripted per answer.

``FakeIndex`` registers two URLs on a pytest-httpserver: the JSON simple page of project
``vllm`` and one wheel built in memory by ``build_wheel``. Each is a ``Resource``: a fixed body,
served whole or by range, that logs every answer and can be told to misbehave.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

import patcher.index
from patcher.cache import CACHE_ENV
from patcher.index import SIMPLE_JSON, TIMEOUT_ENV

VERSION = "0.16.0"
FILENAME = f"vllm-{VERSION}-cp38-abi3-manylinux_2_31_x86_64.whl"
SPECULATIVE_PATH = "vllm/config/speculative.py"
SPECULATIVE = '''\
"""A minimal EAGLE-3 target check, written for the tests."""


class SpeculativeConfig:
    def _verify_args(self) -> None:
        if self.method == "eagle3" and not any(
            supported in self.target_model_config.hf_text_config.model_type
            for supported in ("llama", "qwen")
        ):
            raise ValueError("eagle3 is only supported for llama and qwen targets")
'''
KIMI_K25_PATH = "vllm/model_executor/models/kimi_k25.py"
KIMI_K25 = "class KimiK25ForConditionalGeneration:\n    pass\n"
HOLD_LIMIT_SECONDS = 10.0  # a SLOW, STALL or TRICKLE answer gives up after this: none hangs
TRICKLE_SECONDS = 0.2


def loopback_server() -> Iterator[HTTPServer]:
    """A threaded loopback server, so an answer held back does not block the next request; the
    body of a test module's ``server`` fixture."""
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.clear()
    server.stop()


def fake_index(server: HTTPServer, wheel: bytes) -> Iterator[FakeIndex]:
    """A ``FakeIndex`` on a cleared ``server``, its held answers released and its handler
    errors raised afterwards; the body of a test module's ``fake`` fixture."""
    server.clear()
    fake = FakeIndex(server, wheel)
    yield fake
    fake.release_all()
    server.check_handler_errors()


def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timeout: float) -> Path:
    """A cache dir of the test's own, an HTTP ``timeout`` and a short backoff between tries."""
    root = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(root))
    monkeypatch.setenv(TIMEOUT_ENV, str(timeout))
    monkeypatch.setattr(patcher.index, "BACKOFF_SECONDS", 0.01)
    return root


def build_wheel(padding: int) -> bytes:
    """A small vLLM wheel with a true RECORD, its members kept apart by stored padding.

    ``padding`` bytes follow speculative.py and a sixteenth of that follows kimi_k25.py, so
    neither member shares a range block with the other or with the central directory.
    """
    info = f"vllm-{VERSION}.dist-info"
    members: list[tuple[str, bytes, int]] = [
        ("vllm/__init__.py", f'__version__ = "{VERSION}"\n'.encode(), zipfile.ZIP_DEFLATED),
        (SPECULATIVE_PATH, SPECULATIVE.encode(), zipfile.ZIP_DEFLATED),
        ("vllm/_padding.bin", os.urandom(padding), zipfile.ZIP_STORED),
        (KIMI_K25_PATH, KIMI_K25.encode(), zipfile.ZIP_DEFLATED),
        ("vllm/_padding_tail.bin", os.urandom(padding // 16), zipfile.ZIP_STORED),
        (
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n".encode(),
            zipfile.ZIP_DEFLATED,
        ),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp38-abi3-manylinux_2_31_x86_64\n",
            zipfile.ZIP_DEFLATED,
        ),
    ]
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data, _ in members)
    members.append((f"{info}/RECORD", f"{record}{info}/RECORD,,\n".encode(), zipfile.ZIP_DEFLATED))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for name, data, compression in members:
            wheel.writestr(name, data, compression)
    return buffer.getvalue()


def record_hash(data: bytes) -> str:
    """A RECORD hash field, computed here rather than by the code under test."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


class Fault(StrEnum):
    CUT = "cut"  # Content-Length promises the whole answer; half of it is sent
    SHORT = "short"  # an honest Content-Length over half the bytes asked for
    ERROR = "500"
    SLOW = "slow"  # nothing is sent until the resource is released (or the hold limit passes)
    STALL = "stall"  # the headers and half the body are sent, then nothing until released
    TRICKLE = "trickle"  # the headers, then one byte every TRICKLE_SECONDS until released
    BAD_LENGTH = "bad-length"  # the whole answer, under a Content-Length that is not a number


@dataclass(frozen=True)
class Served:
    """One answer: the method and Range asked for, the status sent and the body bytes sent."""

    method: str
    range: str | None
    status: int
    sent: int


class Resource:
    """One URL's body, by range or whole, with scripted faults; a pytest-httpserver handler."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body = body
        self.content_type = content_type
        self.ranges = True  # False: ignore Range and answer 200 with the whole body
        self.faults: list[Fault] = []  # one per answer, in order, before any ``always``
        self.always: Fault | None = None
        self.served: list[Served] = []
        self.attempts = 0  # requests received, answered or not
        self.released = threading.Event()  # ends SLOW and STALL answers still held
        self._lock = threading.Lock()

    @property
    def bytes_sent(self) -> int:
        return sum(s.sent for s in self.served)

    def __call__(self, request: Request) -> Response:
        with self._lock:
            self.attempts += 1
            fault = self.faults.pop(0) if self.faults else self.always
        asked = request.headers.get("Range")
        if fault is Fault.SLOW:
            self.released.wait(HOLD_LIMIT_SECONDS)
        if fault is Fault.ERROR:
            return self._answer(request, 500, b"internal error\n", {})
        span = parse_range(asked, len(self.body)) if asked and self.ranges else None
        if span is None:
            status, data = 200, self.body
            headers = {"Accept-Ranges": "bytes" if self.ranges else "none"}
        elif span[0] >= len(self.body):
            return self._answer(request, 416, b"", {"Content-Range": f"bytes */{len(self.body)}"})
        else:
            start, end = span
            status, data = 206, self.body[start : end + 1]
            headers = {"Content-Range": f"bytes {start}-{end}/{len(self.body)}"}
        if fault is Fault.CUT:
            response = self._answer(request, status, data[: len(data) // 2], headers)
            response.headers["Content-Length"] = str(len(data))
            response.headers["Connection"] = "close"
            return response
        if fault is Fault.BAD_LENGTH:
            response = self._answer(request, status, data, headers)
            response.headers["Content-Length"] = "abc"
            response.headers["Connection"] = "close"
            return response
        if fault is Fault.SHORT:
            return self._answer(request, status, data[: len(data) // 2], headers)
        if fault in (Fault.STALL, Fault.TRICKLE):
            self.served.append(Served(request.method, asked, status, len(data) // 2))
            body = self._stall(data) if fault is Fault.STALL else self._trickle(data)
            response = Response(body, status, headers, content_type=self.content_type)
            response.headers["Content-Length"] = str(len(data))
            return response
        return self._answer(request, status, data, headers)

    def _answer(
        self, request: Request, status: int, data: bytes, headers: dict[str, str]
    ) -> Response:
        sent = 0 if request.method == "HEAD" else len(data)
        self.served.append(Served(request.method, request.headers.get("Range"), status, sent))
        return Response(data, status, headers, content_type=self.content_type)

    def _stall(self, data: bytes) -> Iterator[bytes]:
        yield data[: len(data) // 2]
        self.released.wait(HOLD_LIMIT_SECONDS)

    def _trickle(self, data: bytes) -> Iterator[bytes]:
        """Never silent for long enough to trip a socket timeout, never done either."""
        until = time.monotonic() + HOLD_LIMIT_SECONDS
        for byte in data:
            yield bytes([byte])
            if self.released.wait(TRICKLE_SECONDS) or time.monotonic() > until:
                return


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """The inclusive span of a ``bytes=a-b`` or ``bytes=a-`` header, the forms patcher sends."""
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", header.strip())
    if not match:
        return None
    first, last = match.groups()
    return int(first), min(size - 1, int(last)) if last else size - 1


class FakeIndex:
    """A JSON simple index for ``vllm`` listing one served wheel (and unserved other versions)."""

    def __init__(
        self,
        server: HTTPServer,
        wheel: bytes,
        *,
        other_versions: tuple[str, ...] = (),
        sha256: str | None = None,
        with_size: bool = True,
        size: int | None = None,
    ) -> None:
        """``sha256`` and ``size``: what the listing says, where it lies about the wheel."""
        self.sha256 = hashlib.sha256(wheel).hexdigest()
        entry: dict[str, object] = {
            "filename": FILENAME,
            "url": f"../../files/{FILENAME}",
            "hashes": {"sha256": sha256 or self.sha256},
        }
        if with_size:
            entry["size"] = len(wheel) if size is None else size
        files = [entry] + [
            {
                "filename": f"vllm-{v}-cp38-abi3-manylinux_2_31_x86_64.whl",
                "url": f"/files/vllm-{v}-cp38-abi3-manylinux_2_31_x86_64.whl",
                "hashes": {"sha256": hashlib.sha256(v.encode()).hexdigest()},
                "size": 1,
            }
            for v in other_versions
        ]
        page = {"meta": {"api-version": "1.1"}, "name": "vllm", "files": files}
        self.page = Resource(json.dumps(page).encode(), SIMPLE_JSON)
        self.wheel = Resource(wheel, "application/octet-stream")
        server.expect_request("/simple/vllm/").respond_with_handler(self.page)
        server.expect_request(f"/files/{FILENAME}").respond_with_handler(self.wheel)
        self.url = server.url_for("/simple")
        self.page_url = server.url_for("/simple/vllm/")
        self.wheel_url = server.url_for(f"/files/{FILENAME}")

    def release_all(self) -> None:
        """Let every SLOW or STALL answer still held by a server thread finish at once."""
        self.page.released.set()
        self.wheel.released.set()
