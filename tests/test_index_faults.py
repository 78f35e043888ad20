"""The package index and its wheels misbehaving, against a real HTTP server on loopback.

Every test serves a fake vLLM release (see ``fakeindex``) and scripts how its answers go
wrong: ranges refused, bodies cut short, 500s, answers that never come or stall halfway,
pages that are not JSON simple API pages, versions that do not exist.
"""

from __future__ import annotations

import hashlib
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from commandline import PATCHER
from fakeindex import (
    FILENAME,
    HOLD_LIMIT_SECONDS,
    KIMI_K25,
    KIMI_K25_PATH,
    SPECULATIVE,
    SPECULATIVE_PATH,
    VERSION,
    FakeIndex,
    Fault,
    Resource,
    build_wheel,
    loopback_server,
    own_cache,
)
from pytest_httpserver import HTTPServer

import patcher.index
from patcher.cli.parser import main
from patcher.errors import NetworkError, PatcherError
from patcher.index import RETRIES, TIMEOUT_ENV, IndexEntry, PackageIndex
from patcher.sources.download import cached_wheel_path, download_wheel
from patcher.sources.index_wheel import IndexWheelSource

PADDING = 5 * 1024 * 1024
UNCHECKED = (
    f"{FILENAME} was read by range: the sha256 the index lists for it was not checked (that "
    "takes the whole file, as build-wheel downloads it)"
)
SLOW_TIMEOUT = 1.0
SLOW_BOUND = SLOW_TIMEOUT + 1.5  # one deadline for every try, plus slack for a loaded machine
assert SLOW_BOUND < 2 * SLOW_TIMEOUT + 1, "a second full wait must break the bound"
assert SLOW_BOUND < HOLD_LIMIT_SECONDS, "a held answer must outlast the bound to be caught"
MakeIndex = Callable[..., FakeIndex]


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from loopback_server()


@pytest.fixture(scope="module")
def wheel_bytes() -> bytes:
    """The fake wheel, padded with an incompressible member far larger than the rest."""
    return build_wheel(padding=PADDING)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache dir of the test's own, a timeout no test can outwait, and a short backoff."""
    return own_cache(tmp_path, monkeypatch, timeout=5)


@pytest.fixture
def make_index(server: HTTPServer, wheel_bytes: bytes) -> Iterator[MakeIndex]:
    """Builds the one fake index of a test; afterwards held answers end and handlers are checked."""
    made: list[FakeIndex] = []

    def make(**options: Any) -> FakeIndex:
        server.clear()
        made.append(FakeIndex(server, wheel_bytes, **options))
        return made[-1]

    yield make
    for fake in made:
        fake.release_all()
    server.check_handler_errors()


@pytest.fixture
def fake(make_index: MakeIndex) -> FakeIndex:
    """The fake index as it should be: the tests break it after."""
    return make_index()


def fake_wheel(fake: FakeIndex) -> tuple[PackageIndex, IndexEntry]:
    """The fake index and its listing's entry for the release's wheel."""
    index = PackageIndex(fake.url)
    wheel = index.release(VERSION).wheel_for("x86_64")
    assert wheel is not None
    return index, wheel


def open_source(fake: FakeIndex) -> IndexWheelSource:
    """The fake release read in place, the way ``patcher diff --vllm`` opens it."""
    index, wheel = fake_wheel(fake)
    return IndexWheelSource(index.release(VERSION), wheel, index.client)


def read_member(fake: FakeIndex) -> bytes | None:
    """speculative.py out of the fake release, from listing the index on."""
    return open_source(fake).read(SPECULATIVE_PATH)


def files_under(root: Path) -> list[Path]:
    """Every file below ``root`` but lock files (empty; the cache-wide ``.in-use.lock`` every
    patcher holds while it runs, a folder's lock), none if it was never made."""
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".lock")


def test_members_are_read_by_range_without_the_padding(
    fake: FakeIndex, wheel_bytes: bytes, cache: Path
) -> None:
    source = open_source(fake)
    source.prefetch([SPECULATIVE_PATH, KIMI_K25_PATH])  # one member on each side of the padding
    assert source.read(SPECULATIVE_PATH) == SPECULATIVE.encode()
    assert source.read(KIMI_K25_PATH) == KIMI_K25.encode()
    served = fake.wheel.served
    assert served
    assert all(s.range and s.status == 206 for s in served), served
    assert fake.wheel.bytes_sent == source.bytes_fetched
    assert fake.wheel.bytes_sent < len(wheel_bytes) // 10
    assert not (cache / "wheels").exists()

    again = open_source(fake)
    assert again.read(SPECULATIVE_PATH) == SPECULATIVE.encode()
    assert (fake.page.attempts, fake.wheel.attempts) == (1, len(served)), "a warm cache fetches"


def test_refused_ranges_fall_back_to_one_verified_download(fake: FakeIndex, cache: Path) -> None:
    fake.wheel.ranges = False
    assert read_member(fake) == SPECULATIVE.encode()
    ranged, whole = fake.wheel.served
    assert (ranged.status, whole.status) == (200, 200)
    assert ranged.range is not None and whole.range is None, "one download after the refusal"
    downloaded = cache / "wheels" / fake.sha256 / FILENAME
    assert hashlib.sha256(downloaded.read_bytes()).hexdigest() == fake.sha256
    assert not list(cache.rglob("*.part"))


def test_a_download_that_fails_its_sha256_is_refused_and_removed(
    make_index: MakeIndex, cache: Path
) -> None:
    fake = make_index(sha256="0" * 64)
    fake.wheel.ranges = False
    with pytest.raises(PatcherError, match="does not match the index's 0000"):
        read_member(fake)
    assert [p.name for p in files_under(cache / "wheels") if p.suffix != ".lock"] == []


def test_an_interrupted_download_resumes_where_it_stopped(
    fake: FakeIndex, wheel_bytes: bytes
) -> None:
    index, wheel = fake_wheel(fake)
    fake.wheel.faults = [Fault.CUT]
    with pytest.raises(PatcherError, match="interrupted at"):
        download_wheel(wheel, index.client)
    partial = cached_wheel_path(wheel).with_name(FILENAME + ".part")
    kept = partial.read_bytes()  # whole chunks only: the one the cut fell in is dropped
    assert 0 < len(kept) <= fake.wheel.served[0].sent
    assert wheel_bytes.startswith(kept)

    path = download_wheel(wheel, index.client)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.sha256
    assert fake.wheel.served[1].range == f"bytes={len(kept)}-"
    assert fake.wheel.served[1].status == 206
    assert not partial.exists()


def test_a_complete_part_file_is_not_resumed_past_its_end(
    fake: FakeIndex, wheel_bytes: bytes
) -> None:
    index, wheel = fake_wheel(fake)
    partial = cached_wheel_path(wheel).with_name(FILENAME + ".part")
    partial.parent.mkdir(parents=True)
    partial.write_bytes(wheel_bytes)  # a run stopped between the last byte and the rename
    path = download_wheel(wheel, index.client)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.sha256


def test_a_listing_without_sizes_still_reads_by_range(
    make_index: MakeIndex, wheel_bytes: bytes
) -> None:
    fake = make_index(with_size=False)
    assert read_member(fake) == SPECULATIVE.encode()
    assert all(s.range for s in fake.wheel.served if s.method == "GET")
    assert fake.wheel.bytes_sent < len(wheel_bytes) // 10


def test_a_slow_size_probe_times_out(
    make_index: MakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, str(SLOW_TIMEOUT))
    fake = make_index(with_size=False)
    fake.wheel.always = Fault.SLOW
    started = time.monotonic()
    with pytest.raises(PatcherError) as caught:
        read_member(fake)
    assert time.monotonic() - started < SLOW_BOUND
    assert str(caught.value).startswith(f"{fake.wheel_url}: ")


TRUNCATIONS = [("page", Fault.CUT), ("wheel", Fault.CUT), ("wheel", Fault.SHORT)]


@pytest.mark.parametrize(("target", "fault"), TRUNCATIONS)
def test_truncated_answers_are_retried(fake: FakeIndex, target: str, fault: Fault) -> None:
    resource: Resource = getattr(fake, target)
    resource.faults = [fault, fault]
    assert read_member(fake) == SPECULATIVE.encode()
    first, second, third = resource.served[:3]
    assert first.range == second.range == third.range, "the same request is retried"
    assert first.sent == second.sent < third.sent


@pytest.mark.parametrize(("target", "fault"), TRUNCATIONS)
def test_always_truncated_is_a_one_line_error(fake: FakeIndex, target: str, fault: Fault) -> None:
    resource: Resource = getattr(fake, target)
    resource.always = fault
    with pytest.raises(PatcherError) as caught:
        read_member(fake)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(fake.page_url if target == "page" else fake.wheel_url)
    assert f"after {RETRIES} tries" in message
    assert resource.attempts == RETRIES


@pytest.mark.parametrize("target", ["page", "wheel"])
def test_transient_500s_are_retried(fake: FakeIndex, target: str) -> None:
    resource: Resource = getattr(fake, target)
    resource.faults = [Fault.ERROR, Fault.ERROR]
    assert read_member(fake) == SPECULATIVE.encode()
    first, second, third = resource.served[:3]
    assert first.range == second.range == third.range, "the same request is retried"
    assert [first.status, second.status, third.status] == [
        500,
        500,
        200 if target == "page" else 206,
    ]
    assert [s.status for s in resource.served].count(500) == 2


@pytest.mark.parametrize("target", ["page", "wheel"])
def test_permanent_500s_name_the_url(fake: FakeIndex, target: str) -> None:
    resource: Resource = getattr(fake, target)
    resource.always = Fault.ERROR
    with pytest.raises(PatcherError) as caught:
        read_member(fake)
    url = fake.page_url if target == "page" else fake.wheel_url
    assert str(caught.value) == f"{url}: no good answer after {RETRIES} tries (HTTP 500)"
    assert resource.attempts == RETRIES


SLOW_FAULTS = [(t, f) for t in ("page", "wheel") for f in (Fault.SLOW, Fault.STALL, Fault.TRICKLE)]


@pytest.mark.parametrize(("target", "fault"), SLOW_FAULTS)
def test_slow_answers_time_out_within_one_deadline(
    fake: FakeIndex, monkeypatch: pytest.MonkeyPatch, target: str, fault: Fault
) -> None:
    """PATCHER_HTTP_TIMEOUT bounds a request with all its tries, and a trickle is cut off."""
    monkeypatch.setenv(TIMEOUT_ENV, str(SLOW_TIMEOUT))
    resource: Resource = getattr(fake, target)
    resource.always = fault
    started = time.monotonic()
    with pytest.raises(PatcherError) as caught:
        read_member(fake)
    elapsed = time.monotonic() - started
    assert elapsed < SLOW_BOUND
    url = fake.page_url if target == "page" else fake.wheel_url
    message = str(caught.value)
    assert message.startswith(f"{url}: no good answer within {SLOW_TIMEOUT:g} s (1 try, ")
    assert "\n" not in message
    assert resource.attempts == 1


def test_a_trickling_download_is_cut_off(
    fake: FakeIndex, monkeypatch: pytest.MonkeyPatch, wheel_bytes: bytes
) -> None:
    """Each MiB of a download must come within the timeout; one byte every 0.2 s does not."""
    monkeypatch.setenv(TIMEOUT_ENV, str(SLOW_TIMEOUT))
    index, wheel = fake_wheel(fake)
    fake.wheel.always = Fault.TRICKLE
    started = time.monotonic()
    with pytest.raises(NetworkError, match=r"interrupted at \d+ bytes \(body not received within"):
        download_wheel(wheel, index.client)
    assert time.monotonic() - started < SLOW_BOUND
    partial = cached_wheel_path(wheel).with_name(FILENAME + ".part")
    assert wheel_bytes.startswith(partial.read_bytes()), "what came is kept to resume"


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "1e10"])  # 1e10: past time_t
def test_a_bad_timeout_setting_is_one_line(
    fake: FakeIndex, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, value)
    code = main(["diff", "--vllm", VERSION, "--index-url", fake.url, "--platform", "x86_64"])
    err = capsys.readouterr().err
    assert code == 2
    expected = f"{TIMEOUT_ENV}={value!r}: expected a positive number of seconds, at most 86400"
    assert err == f"patcher: error: {expected}\n"
    assert fake.page.attempts == 0


def test_an_index_that_never_answers_fails_within_the_default_deadline(
    fake: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No PATCHER_HTTP_TIMEOUT: the 30 s default bounds all tries together, not each one."""
    monkeypatch.delenv(TIMEOUT_ENV)
    monkeypatch.setattr(patcher.index, "DEFAULT_TIMEOUT", SLOW_TIMEOUT)  # scaled down 30x
    fake.page.always = Fault.SLOW
    started = time.monotonic()
    with pytest.raises(PatcherError, match="no good answer within"):
        read_member(fake)
    assert time.monotonic() - started < SLOW_BOUND
    assert fake.page.attempts == 1


def test_a_size_probe_is_retried(make_index: MakeIndex) -> None:
    fake = make_index(with_size=False)
    fake.wheel.faults = [Fault.ERROR, Fault.ERROR]
    assert read_member(fake) == SPECULATIVE.encode()
    assert [(s.method, s.status) for s in fake.wheel.served[:3]] == [
        ("HEAD", 500),
        ("HEAD", 500),
        ("HEAD", 200),
    ]


def test_a_complete_part_file_without_a_listed_size_is_not_a_416(
    make_index: MakeIndex, wheel_bytes: bytes
) -> None:
    fake = make_index(with_size=False)
    index, wheel = fake_wheel(fake)
    assert wheel.size is None
    partial = cached_wheel_path(wheel).with_name(FILENAME + ".part")
    partial.parent.mkdir(parents=True)
    partial.write_bytes(wheel_bytes)  # a run stopped between the last byte and the rename
    path = download_wheel(wheel, index.client)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.sha256
    assert [s.status for s in fake.wheel.served] == [416]


GARBAGE = {
    "html": b"<!DOCTYPE html><html><body><a href='x.whl'>x.whl</a></body></html>",
    "no files": b'{"meta": {"api-version": "1.1"}, "name": "vllm"}',
    "files not a list": b'{"files": {"vllm-0.16.0.whl": {}}}',
    "a list": b"[]",
    "file without url": b'{"files": [{"filename": "' + FILENAME.encode() + b'"}]}',
    "file not an object": b'{"files": ["' + FILENAME.encode() + b'"]}',
}


@pytest.mark.parametrize("body", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_pages_are_named(fake: FakeIndex, cache: Path, body: bytes) -> None:
    fake.page.body = body
    with pytest.raises(PatcherError) as caught:
        PackageIndex(fake.url).release(VERSION)
    said = (
        "HTML (the PEP 503 simple API); patcher needs an index that serves the JSON simple API"
        if body.startswith(b"<")
        else "something that is not a JSON simple API page"
    )
    assert str(caught.value).startswith(f"{fake.page_url}: the index answered {said}")
    assert not (cache / "checked" / "index").exists(), "garbage is not cached"


def test_an_unknown_version_names_the_nearest_releases(make_index: MakeIndex) -> None:
    fake = make_index(other_versions=("0.14.0", "0.15.0", "0.15.1", "0.17.0", "0.17.1", "0.18.0"))
    with pytest.raises(PatcherError) as caught:
        PackageIndex(fake.url).release("0.16.5")
    message = str(caught.value)
    assert message.startswith(f"vllm 0.16.5 is not on the index {fake.url}; nearest releases: ")
    nearest = message.rpartition(": ")[2].split(", ")
    assert {"0.16.0", "0.17.0"} <= set(nearest)
    assert not {"0.14.0", "0.18.0"} & set(nearest)


def test_a_content_length_that_is_not_a_number_is_one_line(fake: FakeIndex) -> None:
    """int() of it raised ValueError, a traceback; every try gets the same, so it is an error."""
    fake.page.always = Fault.BAD_LENGTH
    with pytest.raises(PatcherError, match="Content-Length 'abc' is not a number of bytes"):
        read_member(fake)


def test_a_listed_version_too_long_to_parse_is_skipped(make_index: MakeIndex) -> None:
    """5000 digits: Python refuses the int conversion (ValueError, not InvalidVersion)."""
    fake = make_index(other_versions=("9" * 5000,))
    assert str(PackageIndex(fake.url).release(VERSION).version) == VERSION


def test_cli_diff_reads_the_release_from_the_index(
    fake: FakeIndex, wheel_bytes: bytes, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diff", "--vllm", VERSION, "--index-url", fake.url, "--platform", "x86_64"]
    code = main([*argv, "--allow-drift"])  # the stand-in lacks what the real patchset needs
    out, err = capsys.readouterr()
    drift = "patcher: drift allowed: vllm 0.16.0 came out unsupported"
    assert (code, err.split("\n")[1:]) == (0, [f"patcher: note: {UNCHECKED}", ""])  # said
    assert err.startswith(drift)
    assert out.startswith(f"--- a/{SPECULATIVE_PATH}\n+++ b/{SPECULATIVE_PATH}\n")
    added = [line for line in out.splitlines() if line.startswith("+") and "kimi_k2" in line]
    assert len(added) == 1 and "deepseek_v3" in added[0]
    assert all(s.range for s in fake.wheel.served), "the CLI reads by range too"
    assert fake.wheel.bytes_sent < len(wheel_bytes) // 10
    assert not [p for p in cache.iterdir() if p.is_file() and p.suffix != ".lock"]
    assert not list(cache.rglob("*.part"))


def test_a_quiet_diff_still_says_its_sha256_was_not_checked(
    fake: FakeIndex, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-q drops context and progress, not what qualifies the result (third hostile pass)."""
    argv = ["diff", "-q", "--vllm", VERSION, "--index-url", fake.url, "--platform", "x86_64"]
    assert main([*argv, "--allow-drift"]) == 0
    assert capsys.readouterr().err.endswith(f"patcher: note: {UNCHECKED}\n")


def test_cli_on_an_unreachable_index_is_one_line_and_writes_nothing(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["diff", "--vllm", VERSION, "--index-url", f"http://127.0.0.1:{port}/simple"])
    out, err = capsys.readouterr()
    assert code == NetworkError.exit_code == 3  # issue 41: not 2, "bad input"
    assert out == ""
    assert len(err.splitlines()) == 1 and err.endswith("\n")
    assert err.startswith(f"patcher: error: http://127.0.0.1:{port}/simple/vllm/: ")
    assert files_under(cache) == []


def test_two_processes_share_one_cold_cache(fake: FakeIndex, cache: Path) -> None:
    """Two ``patcher diff`` processes at once on an empty cache: both right, cache intact."""
    command = [
        PATCHER,
        "diff",
        "--vllm",
        VERSION,
        "--index-url",
        fake.url,
        "--platform",
        "x86_64",
        "--allow-drift",
    ]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [p.communicate(timeout=60) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    assert results[0][0] == results[1][0] and "kimi_k2" in results[0][0]
    assert not [p for p in files_under(cache) if ".part" in p.name or p.name.startswith(".")]
    assert read_member(fake) == SPECULATIVE.encode()


class CountingSession:
    """Counts the tries of ``HttpClient``: the real requests session under it, wrapped."""

    def __init__(self, session: Any) -> None:
        self.session, self.tries = session, 0

    def request(self, *args: Any, **kwargs: Any) -> Any:
        self.tries += 1
        return self.session.request(*args, **kwargs)


@pytest.mark.parametrize(
    "url", ["file:///tmp/simple", "ftp://127.0.0.1/simple", "localhost/simple", "http:///simple"]
)
def test_a_url_no_retry_can_fix_fails_at_the_first_try(url: str, cache: Path) -> None:
    """issue 22: ``file://``, ``ftp://`` and no scheme were retried four times, as if the
    network had failed; none can ever be fetched."""
    index = PackageIndex(url)
    counting = CountingSession(index.client.session)
    index.client.session = counting  # type: ignore[assignment]
    with pytest.raises(PatcherError, match="not a URL patcher can fetch; it reads indexes over"):
        index.releases()
    assert counting.tries == 1


def test_an_answer_without_end_is_cut_off_at_the_bound_not_read_into_memory(
    server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hostile pass served a JSON page with no length and no end: patcher read 11 GB in
    12 s until the kernel killed it. A body read into memory stops at MAX_BODY, in one line
    (bound lowered here; the body is served in chunks with no Content-Length)."""
    from werkzeug import Response

    monkeypatch.setattr(patcher.index, "MAX_BODY", 256 * 1024)
    served = []

    def endless() -> Iterator[bytes]:
        for _ in range(1024):  # 64 MiB at most: far past the bound, finite for the test
            served.append(1)
            yield b"x" * 65536

    server.expect_request("/endless/simple/vllm/").respond_with_handler(
        lambda request: Response(endless(), content_type="application/vnd.pypi.simple.v1+json")
    )
    url = server.url_for("/endless/simple/vllm/")
    with pytest.raises(PatcherError, match="was cut off") as caught:
        patcher.index.HttpClient().get(url)
    assert "\n" not in str(caught.value)
    # the server runs ahead of the reader by what the loopback socket's buffers hold (up to
    # about 10 MiB when the kernel grows them under load: 64 chunks was seen to flake beside
    # other tests); an unbounded read takes all 1024
    assert len(served) < 256, "the server was read far past the bound"


# Issue 38, 5: a wheel read by range is never checked against the sha256 its listing gives,
# and the output says so; a listing that lies about the size is one line naming both sizes.

DIFF = [
    *("diff", "--vllm", VERSION, "--platform", "x86_64", "--patchset", "kimi-k2.5-eagle3"),
    "--allow-drift",  # the stand-in wheel lacks what the real patchset needs: drift (issue 41)
]
DRIFT_ALLOWED = (
    "patcher: drift allowed: vllm 0.16.0 came out unsupported (eagle3-interface unsupported), "
    "but kimi-k2.5-eagle3 declares needs-patch for it\n"
)


def lying_hashes(wheel: bytes) -> dict[str, str]:
    true = hashlib.sha256(wheel).hexdigest()
    return {
        "zeros": "0" * 64,
        "one-bit-off": f"{int(true, 16) ^ 1:064x}",
        "another-file": hashlib.sha256(b"another wheel").hexdigest(),
        "reversed": true[::-1],
        "upper-case-of-another": hashlib.sha256(b"x").hexdigest().upper(),
    }


@pytest.mark.parametrize("lie", ["true", *lying_hashes(b"")])
@pytest.mark.parametrize("command", ["diff", "doctor", "scan"])
def test_a_wheel_read_by_range_says_its_listed_sha256_was_not_checked(
    server: HTTPServer,
    make_index: MakeIndex,
    wheel_bytes: bytes,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    lie: str,
    command: str,
) -> None:
    """Before, ``diff --vllm`` over a listing whose sha256 is not the wheel's exited 0 and
    said nothing; each command that reads a release by range now carries a line saying the
    sha256 was not checked, whatever the listing says (it cannot tell a true one either)."""
    if command == "doctor":  # a release with an id reader, which doctor needs
        fake = doctor_index(server, lie)
    else:
        fake = make_index(sha256=None if lie == "true" else lying_hashes(wheel_bytes)[lie])
    argv = {
        "diff": DIFF,
        "doctor": ["doctor", "--drafter", str(llama_drafter(tmp_path)), *DIFF[1:5]],
        "scan": ["scan", *DIFF[1:5]],
    }[command]
    code = main([*argv, "--index-url", fake.url])
    err = capsys.readouterr().err
    if code == 0 or command == "doctor":  # doctor: exit 1 for a finding, still its report
        assert err.endswith(f"patcher: note: {UNCHECKED}\n"), err
        assert all(s.range and s.status == 206 for s in fake.wheel.served)
    else:  # one error line, after the step lines a command says off a terminal
        errors = [line for line in err.splitlines() if line.startswith("patcher: error: ")]
        assert "patcher: note" not in err and len(errors) == 1, err
        assert err.splitlines()[-1] == errors[0], err


@pytest.mark.parametrize("lie", ["true", "zeros", "another-file"])
def test_a_wheel_downloaded_whole_is_checked_and_says_nothing(
    make_index: MakeIndex, wheel_bytes: bytes, capsys: pytest.CaptureFixture[str], lie: str
) -> None:
    """A server that refuses ranges: the whole wheel is checked, so no note; a lie is refused."""
    fake = make_index(sha256=None if lie == "true" else lying_hashes(wheel_bytes)[lie])
    fake.wheel.ranges = False
    code = main([*DIFF, "--index-url", fake.url])
    err = capsys.readouterr().err
    if lie == "true":
        assert (code, err) == (0, DRIFT_ALLOWED)
    else:
        assert code == 2 and "does not match the index's" in err and len(err.splitlines()) == 1


def lying_sizes(true: int) -> list[int]:
    from patcher.sources.http_range import BLOCK

    return sorted(
        {
            1,
            22,  # the end record's size: the whole file is "one" end record
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            true // 2,
            true - BLOCK - 1,
            true - 1,
            true + 1,
            true + 22,
            true + BLOCK,
            true * 2,
            true * 1000,
        }
    )


@pytest.mark.parametrize("index", range(13))
def test_a_listing_that_lies_about_the_size_is_one_line_naming_both(
    make_index: MakeIndex,
    wheel_bytes: bytes,
    capsys: pytest.CaptureFixture[str],
    index: int,
) -> None:
    """Before: ``not a zip file``, or a truncated answer retried, for a size the server does not
    have; now one line, ``the index says N bytes, the server has M``, and exit 2."""
    sizes = lying_sizes(len(wheel_bytes))
    assert len(sizes) == 13
    size = sizes[index]
    fake = make_index(size=size)
    code = main([*DIFF, "--index-url", fake.url])
    out, err = capsys.readouterr()
    said = f"the index says {size} bytes, the server has {len(wheel_bytes)}"
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and said in err and err.startswith("patcher: error: "), err


READER = (
    "def get_eagle3_aux_layers_from_config(spec_config):\n"
    "    hf_config = spec_config.draft_model_config.hf_config\n"
    "    return getattr(hf_config, 'eagle_aux_hidden_state_layer_ids', None)\n"
)


def doctor_index(server: HTTPServer, lie: str) -> FakeIndex:
    """The fake index serving a release doctor can read: the V2 runner's id reader in it."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("vllm/__init__.py", "")
        wheel.writestr("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", READER)
        wheel.writestr(f"vllm-{VERSION}.dist-info/METADATA", f"Name: vllm\nVersion: {VERSION}\n")
    data = buffer.getvalue()
    server.clear()
    return FakeIndex(server, data, sha256=None if lie == "true" else lying_hashes(data)[lie])


def llama_drafter(tmp_path: Path) -> Path:
    """A drafter folder for doctor: a Llama EAGLE-3 config."""
    import json

    folder = tmp_path / "drafter"
    folder.mkdir(exist_ok=True)
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 64}))
    return folder
