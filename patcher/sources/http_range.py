"""A remote file read with HTTP range requests, so zipfile can list and read a wheel in place."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from patcher.errors import PatcherError
from patcher.index import HttpClient
from patcher.pipconfig import redacted

BLOCK = 64 * 1024
COALESCE_GAP = 256 * 1024
PARALLEL_FETCHES = 4


class RangeFile(io.RawIOBase):
    """A seekable, read-only file over HTTP; fetched bytes are kept in aligned blocks."""

    def __init__(
        self, url: str, size: int, client: HttpClient, said: str = "the index says"
    ) -> None:
        """``said``: who gave ``size``, for the one line where the server has another size."""
        super().__init__()
        self.url, self.size, self.client, self.said = url, size, client, said
        self.position = 0
        self.blocks: dict[int, bytes] = {}
        self.bytes_fetched = 0
        self._lock = threading.Lock()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def read(self, count: int = -1) -> bytes:
        end = self.size if count < 0 else min(self.size, self.position + count)
        if end <= self.position:
            return b""
        self.fetch([(self.position, end)])
        first, last = self.position // BLOCK, (end - 1) // BLOCK
        joined = b"".join(self.blocks[i] for i in range(first, last + 1))
        start = self.position - first * BLOCK
        data = joined[start : start + end - self.position]
        self.position = end
        return data

    def fetch(self, spans: Iterable[tuple[int, int]]) -> None:
        """Fetch the missing blocks of byte ``spans``, nearby ones in one request, in parallel."""
        missing = sorted(
            {
                block
                for start, end in spans
                for block in range(start // BLOCK, (max(start, end - 1)) // BLOCK + 1)
                if block not in self.blocks
            }
        )
        runs: list[list[int]] = []
        for block in missing:
            if runs and (block - runs[-1][1]) * BLOCK <= COALESCE_GAP:
                runs[-1][1] = block
            else:
                runs.append([block, block])
        if len(runs) == 1:
            self._fetch_run(*runs[0])
        elif runs:
            with ThreadPoolExecutor(PARALLEL_FETCHES) as pool:
                list(pool.map(lambda run: self._fetch_run(*run), runs))

    def _fetch_run(self, first: int, last: int) -> None:
        start, end = first * BLOCK, min(self.size, (last + 1) * BLOCK)
        response = self.client.get(
            self.url,
            headers={"Range": f"bytes={start}-{end - 1}"},
            expect_length=end - start,
            ranged=True,
            whole_size=(self.size, self.said),
        )
        body = response.content
        if len(body) != end - start:
            raise PatcherError(
                f"{redacted(self.url)}: range answer has {len(body)} bytes, not {end - start}"
            )
        with self._lock:
            self.bytes_fetched += len(body)
            for block in range(first, last + 1):
                offset = (block - first) * BLOCK
                self.blocks[block] = body[offset : offset + BLOCK]
