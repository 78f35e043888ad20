"""No byte is trusted unverified: cached wheels, cached members and results, source wheels.

The index is a real HTTP server on loopback (``fakeindex``) serving a small vLLM-shaped wheel
with a true RECORD; it counts the bytes it serves, so a test can tell a refusal made from the
range reads from one made after downloading the whole wheel. Source-wheel faults use small
wheels built here, and one test garbles a copy of the real 0.16.0 wheel.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakeindex import (
    FILENAME,
    SPECULATIVE_PATH,
    VERSION,
    FakeIndex,
    build_wheel,
    fake_index,
    loopback_server,
    own_cache,
)
from pytest_httpserver import HTTPServer
from test_build_wheel import nothing_in, run_cli, small_wheel

import patcher.sources.download as download
from patcher import results_cache
from patcher.cache import CACHE_ENV, atomic_write
from patcher.cli.parser import main
from patcher.codemods.base import Outcome, Status
from patcher.index import IndexEntry, PackageIndex
from patcher.outputs.wheel import PROVENANCE
from patcher.sources.download import cached_wheel_path, download_wheel

PADDING = 1024 * 1024
INFO = "vllm-0.16.0.dist-info"


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from loopback_server()


@pytest.fixture(scope="module")
def wheel_bytes() -> bytes:
    return build_wheel(padding=PADDING)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_cache(tmp_path, monkeypatch, timeout=10)


@pytest.fixture(autouse=True)
def umask() -> Iterator[None]:
    """The usual umask, whatever the caller's: files should come out 0644."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def fake(server: HTTPServer, wheel_bytes: bytes) -> Iterator[FakeIndex]:
    yield from fake_index(server, wheel_bytes)


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], Path]]:
    """Makes a folder refuse new files, even to root (who ignores mode bits): chattr +i."""
    made: list[Path] = []

    def make(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o555)
        if os.geteuid() == 0:
            done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
            if done.returncode:
                pytest.skip(f"chattr +i refused here: {done.stderr.decode().strip()}")
        made.append(folder)
        return folder

    yield make
    for folder in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def cli(*args: str) -> tuple[int, str, str]:
    """``patcher`` in process; its exit code, output and error text."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(list(args))
    return code, stdout.getvalue(), stderr.getvalue()


def one_line_error(code: int, err: str) -> str:
    """The error message, after checking exit 2 and that it is one line: stderr's last, after
    the table of context build-wheel prints there."""
    assert code == 2, err
    lines = err.splitlines()
    assert [line for line in lines if line.startswith("patcher: error: ")] == lines[-1:], err
    return lines[-1].removeprefix("patcher: error: ")


def index_args(fake: FakeIndex) -> list[str]:
    return ["--vllm", VERSION, "--index-url", fake.url, "--platform", "x86_64"]


def whole_downloads(fake: FakeIndex) -> int:
    """GETs of the wheel without a Range header: downloads of the whole file."""
    return sum(1 for s in fake.wheel.served if s.method == "GET" and s.range is None)


def the_wheel(fake: FakeIndex) -> IndexEntry:
    wheel = PackageIndex(fake.url).release(VERSION).wheel_for("x86_64")
    assert wheel is not None
    return wheel


# --- a cached wheel is verified before use -------------------------------------------------


def flip_a_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["garble", "truncate"])
def test_a_damaged_cached_wheel_is_downloaded_again(fake: FakeIndex, damage: str) -> None:
    wheel = the_wheel(fake)
    client = PackageIndex(fake.url).client
    path = download_wheel(wheel, client)
    if damage == "garble":
        flip_a_byte(path, len(path.read_bytes()) // 2)
    else:
        path.write_bytes(path.read_bytes()[:1000])
    again = download_wheel(wheel, client)
    assert hashlib.sha256(again.read_bytes()).hexdigest() == fake.sha256
    assert whole_downloads(fake) == 2


def test_a_verified_wheel_is_not_hashed_again_until_it_changes(
    fake: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = the_wheel(fake)
    client = PackageIndex(fake.url).client
    path = download_wheel(wheel, client)
    hashed: list[Path] = []
    real = download.sha256_of
    monkeypatch.setattr(download, "sha256_of", lambda p: hashed.append(p) or real(p))
    assert download_wheel(wheel, client) == path
    assert hashed == [], "the sidecar vouches for an unchanged file"
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))  # rewritten in place, say
    assert download_wheel(wheel, client) == path
    assert hashed == [path]
    assert whole_downloads(fake) == 1


def test_a_download_is_hashed_as_it_arrives_not_read_back(
    fake: FakeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh download is checked against the index's sha256 without reading the file again
    (it was written whole, then read whole to be hashed: twice the I/O of a 500 MB wheel)."""
    hashed: list[Path] = []
    real = download.sha256_of
    monkeypatch.setattr(download, "sha256_of", lambda p: hashed.append(p) or real(p))
    path = download_wheel(the_wheel(fake), PackageIndex(fake.url).client)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == fake.sha256
    assert hashed == [], "the bytes were hashed as they came"
    assert whole_downloads(fake) == 1


def test_build_wheel_on_a_garbled_cached_wheel_downloads_it_again_and_records_its_sha(
    fake: FakeIndex, tmp_path: Path
) -> None:
    """The issue's worst case: a corrupt cached wheel gave a corrupt patched wheel, exit 0."""
    dist = tmp_path / "dist"
    args = ["build-wheel", *index_args(fake), "--dist", str(dist), "--allow-noop"]
    code, _, err = cli(*args, "--patchset", "kimi-k2-eagle3")
    assert code == 0, err
    cached = cached_wheel_path(the_wheel(fake))
    flip_a_byte(cached, len(cached.read_bytes()) // 3)  # inside the padding: a valid zip still
    shutil.rmtree(dist)
    code, _, err = cli(*args, "--patchset", "kimi-k2-eagle3")
    assert code == 0, err
    assert whole_downloads(fake) == 2
    (built,) = dist.glob("*.whl")
    with zipfile.ZipFile(built) as archive:
        assert archive.testzip() is None
        info = next(n for n in archive.namelist() if n.endswith(PROVENANCE))
        provenance = json.loads(archive.read(info))
    assert provenance["source_sha256"] == hashlib.sha256(cached.read_bytes()).hexdigest()
    assert provenance["source_sha256"] == fake.sha256
    assert stat.S_IMODE(built.stat().st_mode) == 0o644


# --- cached members and results carry their own checksum -----------------------------------


def diff(fake: FakeIndex) -> str:
    code, out, err = cli("diff", *index_args(fake), "--allow-drift")  # the stand-in drifts
    assert code == 0, err
    return out


def test_an_emptied_cached_member_is_fetched_again(fake: FakeIndex, cache: Path) -> None:
    first = diff(fake)
    assert "kimi_k2" in first
    (member,) = cache.glob(f"checked/members/*/files/{SPECULATIVE_PATH}")
    member.write_bytes(b"")
    fetched = fake.wheel.bytes_sent
    assert diff(fake) == first
    assert fake.wheel.bytes_sent > fetched, "the member came from the index again"


@pytest.mark.parametrize("garbage", [b"[]", b"", b'["vllm/__init__.py"]'])
def test_a_damaged_names_listing_is_made_again(
    fake: FakeIndex, cache: Path, garbage: bytes
) -> None:
    first = diff(fake)
    (listing,) = cache.glob("checked/members/*/names.json")
    listing.write_bytes(garbage)
    assert diff(fake) == first


def test_damaged_codemod_runs_are_recomputed(fake: FakeIndex, cache: Path) -> None:
    first = diff(fake)
    runs = list(cache.glob("checked/codemods/*.json"))
    assert runs
    for run in runs:  # each now claims its codemod had nothing to do
        run.write_text(json.dumps({"status": "not-needed", "detail": "", "changed": {}}))
    assert diff(fake) == first


def test_a_damaged_outcome_entry_is_dropped() -> None:
    outcomes = {"eagle3-whitelist": Outcome(Status.APPLIED, "added kimi_k2")}
    results_cache.store("digest", "sha256:x", outcomes)
    assert results_cache.load("digest", "sha256:x") == outcomes
    (entry,) = (Path(os.environ[CACHE_ENV]) / "checked" / "results").glob("*.json")
    entry.write_bytes(entry.read_bytes()[:-5])
    assert results_cache.load("digest", "sha256:x") is None
    assert not entry.exists()


def test_a_damaged_index_listing_is_fetched_again(fake: FakeIndex, cache: Path) -> None:
    PackageIndex(fake.url).release(VERSION)
    (listing,) = cache.glob("checked/index/*.json")
    listing.write_bytes(b'{"files": [')
    PackageIndex(fake.url).release(VERSION)
    assert fake.page.attempts == 2


# --- a source wheel is checked against its RECORD ------------------------------------------


def rewrite(wheel: Path, changes: dict[str, bytes | None]) -> None:
    """The same wheel with some members' bytes replaced (None: removed), RECORD untouched."""
    with zipfile.ZipFile(wheel) as archive:
        members = [(i, archive.read(i)) for i in archive.infolist()]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            replaced = changes.get(info.filename, data)
            if replaced is not None:
                archive.writestr(info, replaced)


def build(wheel: Path, dist: Path) -> tuple[int, str, str]:
    return cli(
        "build-wheel", "--wheel", str(wheel), "--dist", str(dist), "--patchset", "kimi-k2-eagle3",
        "--allow-noop",
    )  # fmt: skip


def record_with(wheel: Path, row: bytes) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(f"{INFO}/RECORD") + row


def record_row_changed(wheel: Path, field: int, value: str) -> dict[str, bytes | None]:
    """RECORD with one field of vllm/__init__.py's row replaced."""
    with zipfile.ZipFile(wheel) as archive:
        lines = archive.read(f"{INFO}/RECORD").decode().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("vllm/__init__.py,"):
            fields = line.rstrip("\n").split(",")
            fields[field] = value
            lines[i] = ",".join(fields) + "\n"
    return {f"{INFO}/RECORD": "".join(lines).encode()}


DAMAGES = {
    "garbled member": lambda w: {"vllm/__init__.py": b"import os; os.system('x')\n"},
    "wrong RECORD hash": lambda w: record_row_changed(w, 1, "sha256=" + "A" * 43),
    "wrong RECORD size": lambda w: record_row_changed(w, 2, "7"),
    "no RECORD hash": lambda w: record_row_changed(w, 1, ""),
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_wheel_disagreeing_with_its_record_is_refused(tmp_path: Path, damage) -> None:
    wheel = small_wheel(tmp_path)
    rewrite(wheel, damage(wheel))
    code, _, err = build(wheel, tmp_path / "dist")
    assert "member vllm/__init__.py: " in one_line_error(code, err)
    assert nothing_in(tmp_path / "dist")


def test_a_wheel_rewritten_in_place_with_its_mtime_put_back_is_checked_again(
    tmp_path: Path,
) -> None:
    """A repack remembers a --wheel's sha256 by its size, mtime and inode, so that the next one
    need not inflate every member again; but that is a hint, confirmed by hashing the bytes it
    copies. One byte flipped in place, the size, inode and mtime kept: refused, not trusted."""
    wheel = small_wheel(tmp_path)
    code, _, err = build(wheel, tmp_path / "dist")
    assert code == 0, err
    with zipfile.ZipFile(wheel) as archive:
        member = archive.getinfo("vllm/__init__.py")
    before = wheel.stat()
    with wheel.open("r+b") as handle:
        handle.seek(member.header_offset + 30 + len(member.filename) + member.compress_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(wheel, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = wheel.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (
        before.st_size,
        before.st_ino,
        before.st_mtime_ns,
    )
    code, _, err = build(wheel, tmp_path / "again")
    line = one_line_error(code, err)
    # refused where the flipped byte is first met: the inflate of the member, or its hash check
    assert "vllm/__init__.py" in line
    assert "cannot read" in line or "member vllm/__init__.py: " in line
    assert nothing_in(tmp_path / "again")


def test_a_member_missing_from_record_is_refused(tmp_path: Path) -> None:
    wheel = small_wheel(tmp_path)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("vllm/extra.py", "x = 1\n")
    code, _, err = build(wheel, tmp_path / "dist")
    assert one_line_error(code, err).endswith("member vllm/extra.py is not listed in RECORD")
    assert nothing_in(tmp_path / "dist")


def test_a_corrupt_deflate_stream_is_one_line(tmp_path: Path) -> None:
    """Garbage inside a member's compressed bytes: zlib.error, a traceback before."""
    wheel = small_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(SPECULATIVE_PATH)
    data = bytearray(wheel.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start : start + 8] = b"\xff" * 8  # an invalid deflate block type
    wheel.write_bytes(bytes(data))
    message = one_line_error(
        *cli("diff", "--wheel", str(wheel), "--patchset", "kimi-k2-eagle3")[::2]
    )
    assert SPECULATIVE_PATH in message
    message = one_line_error(*build(wheel, tmp_path / "dist")[::2])
    assert SPECULATIVE_PATH in message
    assert nothing_in(tmp_path / "dist")


RECORD_ROWS = {
    "short row": b"vllm/__init__.py,sha256=x\n",
    "binary row": b"vllm/\x00\xff\xfe,,\n",
    "not UTF-8": b"vllm/\xff\xfe.py,sha256=x,1\n",
}


@pytest.mark.parametrize("row", RECORD_ROWS.values(), ids=RECORD_ROWS.keys())
def test_a_record_that_is_not_rows_is_one_line(tmp_path: Path, row: bytes) -> None:
    wheel = small_wheel(tmp_path)
    rewrite(wheel, {f"{INFO}/RECORD": record_with(wheel, row)})
    message = one_line_error(*build(wheel, tmp_path / "dist")[::2])
    assert "RECORD" in message
    assert nothing_in(tmp_path / "dist")


def test_a_wheel_without_metadata_is_refused(tmp_path: Path) -> None:
    wheel = small_wheel(tmp_path)
    rewrite(wheel, {f"{INFO}/METADATA": None})
    message = one_line_error(*build(wheel, tmp_path / "dist")[::2])
    assert message.endswith(f"no {INFO}/METADATA; not a vLLM wheel")


@pytest.mark.network
@pytest.mark.slow
def test_a_garbled_copy_of_the_real_wheel_is_refused(tmp_path: Path) -> None:
    """The real 0.16.0 wheel (from the shared cache, downloaded once), one byte of its
    biggest member flipped in a copy: refused, naming that member."""
    os.environ.pop(CACHE_ENV)  # the shared cache, where the real wheel already is
    index = PackageIndex()
    official = download_wheel(index.release("0.16.0").require_wheel("x86_64"), index.client)
    copy = tmp_path / official.name
    shutil.copyfile(official, copy)
    with zipfile.ZipFile(copy) as archive:
        biggest = max(archive.infolist(), key=lambda i: i.compress_size)
    flip_a_byte(
        copy, biggest.header_offset + 30 + len(biggest.filename) + biggest.compress_size // 2
    )
    os.environ[CACHE_ENV] = str(tmp_path / "cache")
    code, _, err = cli("build-wheel", "--wheel", str(copy), "--dist", str(tmp_path / "dist"))
    message = one_line_error(code, err)
    assert f"member {biggest.filename}: its bytes are corrupt" in message
    assert nothing_in(tmp_path / "dist")


# --- refusals come from the range reads, before the download -------------------------------


def test_an_unsupported_release_is_refused_before_the_download(
    fake: FakeIndex, wheel_bytes: bytes, tmp_path: Path
) -> None:
    # the text-only patchset needs DeepseekV3ForCausalLM, which the fake release lacks
    code, out, err = cli(
        "build-wheel", *index_args(fake), "--patchset", "kimi-k2-eagle3",
        "--dist", str(tmp_path / "dist"),
    )  # fmt: skip
    # kimi-k2-eagle3 declares needs-patch for 0.16.0: drift, exit 1 (issue 41; was 2)
    assert code == 1 and err.splitlines()[-1].startswith("patcher: error: ")
    assert "came out unsupported" in err.splitlines()[-1]
    assert "verdict: unsupported" in err and out == ""  # the table is context: on stderr
    assert whole_downloads(fake) == 0
    assert 0 < fake.wheel.bytes_sent < len(wheel_bytes) // 4


REFUSED_FLAGS = {
    "invalid local label": (["--local-label", "bad label!"], "is not a PEP 440 local version"),
    "empty local label": (["--local-label", ""], "is not a PEP 440 local version"),
    "dist is a file": (["--dist", "{tmp}/file"], "is not a directory"),
    "dist is read-only": (["--dist", "{tmp}/ro/dist"], "cannot write to"),
}


@pytest.mark.parametrize(("flags", "says"), REFUSED_FLAGS.values(), ids=REFUSED_FLAGS.keys())
def test_bad_build_flags_are_refused_before_the_download(
    fake: FakeIndex, wheel_bytes: bytes, tmp_path: Path, read_only, flags: list[str], says: str
) -> None:
    (tmp_path / "file").write_text("a file, not a folder\n")
    read_only(tmp_path / "ro")
    flags = [f.format(tmp=tmp_path) for f in flags]
    if "--dist" not in flags:
        flags += ["--dist", str(tmp_path / "dist")]
    code, _, err = cli(
        "build-wheel", *index_args(fake), "--patchset", "kimi-k2-eagle3", "--allow-noop", *flags
    )
    assert says in one_line_error(code, err)
    assert whole_downloads(fake) == 0
    assert fake.wheel.bytes_sent < len(wheel_bytes) // 4
    assert not list((tmp_path / "ro").iterdir())


def test_verify_on_an_unsupported_release_is_refused_before_the_download(
    fake: FakeIndex, wheel_bytes: bytes
) -> None:
    code, _, err = cli("verify", *index_args(fake), "--patchset", "kimi-k2-eagle3")
    assert one_line_error(code, err) == f"vllm {VERSION} is unsupported for kimi-k2-eagle3"
    assert whole_downloads(fake) == 0
    assert fake.wheel.bytes_sent < len(wheel_bytes) // 4


# --- other faults that were tracebacks -----------------------------------------------------


def test_an_empty_vllm_version_is_one_line(fake: FakeIndex) -> None:
    code, _, err = cli("diff", "--vllm", "", "--index-url", fake.url)
    assert one_line_error(code, err) == "'' is not a valid version"


@pytest.mark.parametrize(
    "entry",
    [{"hashes": ["sha256", "00"]}, {"size": "12"}, {"hashes": {"sha256": 5}}, {"size": True}],
    ids=["hashes a list", "size a string", "sha256 a number", "size a bool"],
)
def test_malformed_index_entries_are_one_line(fake: FakeIndex, entry: dict) -> None:
    page = json.loads(fake.page.body)
    page["files"][0].update(entry)
    fake.page.body = json.dumps(page).encode()
    code, _, err = cli("diff", *index_args(fake))
    message = one_line_error(code, err)
    assert message.startswith(f"{fake.page_url}: the index answered something that is not")


def test_a_cache_dir_that_is_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeIndex
) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "file"))
    message = one_line_error(*cli("diff", *index_args(fake))[::2])
    assert str(tmp_path / "file") in message and CACHE_ENV in message


def test_a_read_only_cache_dir_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeIndex, read_only
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(read_only(tmp_path / "cache-ro")))
    message = one_line_error(*cli("diff", *index_args(fake))[::2])
    assert message.startswith(f"cannot write {tmp_path / 'cache-ro'}/")


def test_a_full_cache_dir_is_one_line(fake: FakeIndex, cache: Path) -> None:
    """The kernel refuses writes past RLIMIT_FSIZE as a full disk does (EFBIG); the first
    cache entry, the index page, is bigger than the cap."""
    process = run_cli("diff", *index_args(fake), limit_file_size=100)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    assert err.startswith(f"patcher: error: cannot write {cache}/") and err.count("\n") == 1
    assert not [p for p in cache.rglob("*") if p.is_file() and p.suffix != ".lock"]


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
@pytest.mark.parametrize("where", ["a directory", "in a read-only directory"])
def test_matrix_output_that_cannot_be_written_is_one_line(
    fake: FakeIndex, tmp_path: Path, read_only, flag: str, where: str
) -> None:
    target = tmp_path / "out" if where == "a directory" else read_only(tmp_path / "ro") / "out"
    if where == "a directory":
        target.mkdir()
    code, _, err = cli(
        "matrix", "--versions", VERSION, "--index-url", fake.url, "--platform", "x86_64",
        "--patchset", "kimi-k2-eagle3", flag, str(target),
    )  # fmt: skip
    assert one_line_error(code, err).startswith(f"cannot write {target}: ")


# --- output files follow the umask; stale temporary files go --------------------------------


def test_outputs_follow_the_umask(tmp_path: Path) -> None:
    atomic_write(tmp_path / "report.json", b"{}\n")
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o644
    os.umask(0o027)
    wheel = small_wheel(tmp_path)
    assert build(wheel, tmp_path / "dist")[0] == 0
    (built,) = (tmp_path / "dist").glob("*.whl")
    assert stat.S_IMODE(built.stat().st_mode) == 0o640


def test_stale_partial_files_are_removed(fake: FakeIndex, tmp_path: Path, cache: Path) -> None:
    """Files a SIGKILLed build or download left: old ones go, fresh ones (in use) stay."""
    dist = tmp_path / "dist"
    dist.mkdir()
    old, fresh = (
        dist / f".{FILENAME}.abc.patcher.partial",
        dist / f".{FILENAME}.def.patcher.partial",
    )
    abandoned = cache / "wheels" / ("0" * 64) / "vllm-0.15.0-x.whl.part"
    abandoned.parent.mkdir(parents=True)
    for path in (old, fresh, abandoned):
        path.write_bytes(b"half a wheel")
    long_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (long_ago, long_ago))
    os.utime(abandoned, (long_ago, long_ago))
    code, _, err = cli(
        "build-wheel", *index_args(fake), "--dist", str(dist), "--patchset", "kimi-k2-eagle3",
        "--allow-noop",
    )  # fmt: skip
    assert code == 0, err
    assert not old.exists() and not abandoned.exists()
    assert fresh.exists()
