"""A release on the package index, read in place: only the members a patchset needs.

The zip's central directory and then each wanted member are fetched with HTTP range
requests and cached on disk by the wheel's sha256, so a second run fetches nothing.
A server that refuses ranges gets the whole wheel downloaded once instead.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from patcher.cache import checked_dir, read_checked, write_checked
from patcher.errors import PatcherError
from patcher.index import HttpClient, IndexEntry, RangesRefused, Release
from patcher.pipconfig import redacted
from patcher.sources.base import Source
from patcher.sources.download import download_wheel
from patcher.sources.http_range import RangeFile
from patcher.sources.wheel import WheelSource

LOCAL_HEADER_SLACK = 30 + 1024  # fixed local header plus room for the name and extra field


class IndexWheelSource(Source):
    searchable = False  # each member is a range request: read them all only to settle

    def __init__(self, release: Release, wheel: IndexEntry, client: HttpClient) -> None:
        if not wheel.sha256:
            raise PatcherError(f"{wheel.filename}: the index gives no sha256 to key a cache by")
        self.version = release.version
        self.wheel = wheel
        self.client = client
        self.distribution = release.distribution
        self.description = f"{self.distribution} {self.version} ({wheel.filename})"
        self.root = checked_dir("members") / wheel.sha256
        self._remote: RangeFile | None = None
        self._zip: zipfile.ZipFile | None = None
        self._fallback: WheelSource | None = None
        self._downloaded = False  # the whole wheel, checked against the index's sha256
        self._names: list[str] | None = None
        self._known: frozenset[str] = frozenset()
        self._held: dict[str, bytes] = {}  # members kept in memory once the tree is settled

    @property
    def identity(self) -> str:
        return f"sha256:{self.wheel.sha256}"

    @property
    def sha256_checked(self) -> bool:
        """Whether the sha256 the index lists was checked against the wheel's bytes: only where
        the whole wheel was downloaded (a server that refused ranges). Read by range, the
        members came with their zip CRCs only, and the cache holds them under that sha256."""
        return self._downloaded

    def unchecked_note(self) -> str:
        """The line a command's output carries when ``sha256_checked`` is False."""
        return (
            f"{self.wheel.filename} was read by range: the sha256 the index lists for it was "
            "not checked (that takes the whole file, as build-wheel downloads it)"
        )

    @property
    def bytes_fetched(self) -> int:
        return self._remote.bytes_fetched if self._remote else 0

    def _open(self) -> zipfile.ZipFile:
        if self._zip is None:
            size, said = self.wheel.size, "the index says"
            if size is None:
                size, said = self._size(), "its HEAD answer says"
            self._remote = RangeFile(self.wheel.url, size, self.client, said)
            try:
                self._zip = zipfile.ZipFile(self._remote)
            except RangesRefused:
                self._zip = self._download()
            except zipfile.BadZipFile as error:
                raise PatcherError(
                    f"{redacted(self.wheel.url)}: not a zip file ({error})"
                ) from error
        return self._zip

    def _download(self) -> zipfile.ZipFile:
        """The whole wheel, downloaded once and verified, for a server that refuses ranges."""
        self._fallback = WheelSource(download_wheel(self.wheel, self.client))
        self._downloaded = True
        self._zip = self._fallback.zip
        return self._zip

    def close(self) -> None:
        """The zip read in place, and the downloaded wheel if ranges were refused."""
        for held in (self._zip, self._remote, self._fallback):
            if held is not None:
                held.close()
        self._zip = self._remote = self._fallback = None

    def _size(self) -> int:
        """The wheel's size from a HEAD request, for an index that lists no sizes."""
        head = self.client.head(self.wheel.url)
        try:
            return int(head.headers["Content-Length"])
        except (KeyError, ValueError) as error:
            raise PatcherError(
                f"{redacted(self.wheel.url)}: cannot learn the wheel's size (no Content-Length)"
            ) from error

    def names(self) -> Sequence[str]:
        if self._names is None:
            listing = self.root / "names.json"
            cached = read_checked(listing)
            if cached is not None:
                self._names = json.loads(cached)
            else:
                self._names = [n for n in self._open().namelist() if not n.endswith("/")]
                write_checked(listing, json.dumps(self._names).encode())
            self._known = frozenset(self._names)
        return self._names

    def _cached(self, path: str) -> Path:
        return self.root / "files" / path

    def prefetch(self, paths: Iterable[str]) -> None:
        self.names()
        wanted = [p for p in paths if p in self._known and read_checked(self._cached(p)) is None]
        if not wanted:
            return
        archive = self._open()
        if self._remote is not None and self._fallback is None:
            spans = []
            for path in wanted:
                info = archive.getinfo(path)
                start = info.header_offset
                spans.append((start, start + LOCAL_HEADER_SLACK + info.compress_size))
            try:
                self._remote.fetch(spans)
            except RangesRefused:
                self._download()
        for path in wanted:
            self._store(path)

    def settle(self) -> bool:
        """Every Python member read by range (4 MiB for 0.18.0's 1,508 files, 11 MiB for
        0.33.0's 3,231), cached like any member: then an absence can be searched for, and no
        codemod needs to say ``unknown``. A server that refuses ranges gets the whole wheel
        downloaded instead (``prefetch``)."""
        self.prefetch([n for n in self.names() if n.endswith(".py")])
        self.searchable = True
        return True

    def _store(self, path: str) -> bytes:
        try:
            data = self._open().read(path)
        except RangesRefused:
            data = self._download().read(path)
        except (zipfile.BadZipFile, EOFError, zlib.error) as error:
            raise PatcherError(f"{self.wheel.filename}: cannot read {path} ({error})") from error
        write_checked(self._cached(path), data)
        return data

    def read(self, path: str) -> bytes | None:
        self.names()
        if path not in self._known:
            return None
        held = self._held.get(path)
        if held is not None:
            return held
        cached = read_checked(self._cached(path))
        data = self._store(path) if cached is None else cached
        if self.searchable:  # settled: each search of the whole tree reads every member
            self._held[path] = data
        return data
