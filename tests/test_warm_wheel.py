"""A warm ``build-wheel --wheel`` (``patcher.cli.warm_wheel``): the same command line run again
writes, by the kernel's copy, the wheel the build wrote, and trusts nothing that changed."""

from __future__ import annotations

import errno
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from installer.sources import WheelFile
from test_build_wheel import small_wheel

import patcher.cli.parser
from patcher.cache import CACHE_ENV
from patcher.cli import main as console
from patcher.cli import warm_wheel
from patcher.outputs import raw_copy, wheel

WHITELIST_PATCHSET = """\
name = "warm-whitelist"
description = "eagle3-whitelist alone, for the small wheel of tests/test_build_wheel.py"
local_label = "warm"

[model]
types = ["kimi_k2"]

[[patches]]
codemod = "eagle3-whitelist"

[[expect]]
versions = ">=0.1"
verdict = "needs-patch"
"""
SPECULATIVE = "vllm/config/speculative.py"
BIG = "vllm/zz_big.bin"
BIG_SIZE = wheel.ALIGNED_RANGE + 1_000_003  # a range the patched module before it aligns


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(root))
    return root


@pytest.fixture
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The files the tests write count as settled at once, as they would two seconds later:
    every write after a build began changes a ctime here (nanoseconds, a fine clock)."""
    monkeypatch.setattr(raw_copy, "SETTLE_NS", 0)
    monkeypatch.setattr(warm_wheel, "SETTLE_NS", 0)


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The command lines the parser ran: the ones that were not warm."""
    calls: list[list[str]] = []
    real = patcher.cli.parser.main

    def spy(argv: list[str] | None = None) -> int:
        calls.append(list(argv or []))
        return real(argv)

    monkeypatch.setattr(patcher.cli.parser, "main", spy)
    yield calls


def official_wheel(folder: Path) -> Path:
    """The small wheel, with a member of a few megabytes right after the module the patchset
    changes (so the patched wheel's ranges are more than one, and the long one is aligned)."""
    big = os.urandom(BIG_SIZE // 2).hex()
    path = small_wheel(folder, extra={BIG: big})
    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    first = ["vllm/__init__.py", SPECULATIVE, BIG]
    members.sort(key=lambda m: first.index(m[0].filename) if m[0].filename in first else 3)
    path.unlink()
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in members:
            stored = zipfile.ZIP_STORED if info.filename == BIG else zipfile.ZIP_DEFLATED
            archive.writestr(info.filename, data, compress_type=stored)
    return path


def argv(official: Path, dist: Path, patchset: Path, *extra: str) -> list[str]:
    return [
        "build-wheel", "--wheel", str(official), "--dist", str(dist),
        "--patchset", str(patchset), *extra,
    ]  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    patchset = tmp_path / "whitelist.toml"
    patchset.write_text(WHITELIST_PATCHSET)
    return official_wheel(tmp_path), patchset


def run(capsys: pytest.CaptureFixture[str], words: list[str]) -> tuple[int, str, str]:
    code = console.main(words)
    out, err = capsys.readouterr()
    return code, out, err


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.usefixtures("settled_at_once")
@pytest.mark.parametrize(
    "extra", [[], ["--format", "json"], ["-q"]], ids=["table", "json", "quiet"]
)
def test_a_warm_build_writes_the_wheel_the_build_wrote(
    tmp_path: Path,
    setup: tuple[Path, Path],
    parsed: list[list[str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
) -> None:
    official, patchset = setup
    words = argv(official, tmp_path / "dist", patchset, *extra)
    code, cold_out, cold_err = run(capsys, words)
    assert code == 0, cold_err
    (built,) = (tmp_path / "dist").glob("*.whl")
    cold = built.read_bytes()
    built.unlink()
    assert len(parsed) == 1
    code, warm_out, warm_err = run(capsys, words)
    assert code == 0, warm_err
    assert len(parsed) == 1, "the second run was warm: no parser, no codemod, no gate"
    assert warm_out == cold_out
    assert [line for line in warm_err.splitlines() if not line.startswith("patcher:")] == [
        line for line in cold_err.splitlines() if not line.startswith("patcher:")
    ]  # the status table, unless --quiet or --format json

    # the same wheel as the command writes from an empty cache: every member, RECORD too
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))
    slow = tmp_path / "slow"
    assert patcher.cli.parser.main(argv(official, slow, patchset, *extra)) == 0
    capsys.readouterr()
    (again,) = slow.glob("*.whl")
    assert built.read_bytes() == cold == again.read_bytes()
    assert members(built) == members(again)
    info = next(n for n in members(built) if n.endswith(".dist-info/RECORD"))
    assert members(built)[info] == members(again)[info]
    with WheelFile.open(built) as opened:
        opened.validate_record()
    assert members(built)[BIG] == members(official)[BIG]
    assert b"kimi_k2" in members(built)[SPECULATIVE]


def test_the_long_range_after_a_patched_module_keeps_its_alignment(
    tmp_path: Path, setup: tuple[Path, Path]
) -> None:
    """The kernel copies a range fastest where its offsets in the two files differ by a
    multiple of ``ALIGNMENT``: the patched module before a long range is padded for it."""
    official, patchset = setup
    assert patcher.cli.parser.main(argv(official, tmp_path / "dist", patchset)) == 0
    (built,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(official) as before, zipfile.ZipFile(built) as after:
        old, new = before.getinfo(BIG).header_offset, after.getinfo(BIG).header_offset
        patched = after.getinfo(SPECULATIVE)
    assert (new - old) % wheel.ALIGNMENT == 0
    with built.open("rb") as handle:
        handle.seek(patched.header_offset + 28)
        extra = int.from_bytes(handle.read(2), "little")
        handle.seek(len(SPECULATIVE), os.SEEK_CUR)
        assert int.from_bytes(handle.read(2), "little") == wheel.PADDING_ID
    assert extra >= 4


def flip_a_byte_keeping_size_and_mtime(path: Path, at: int) -> None:
    before = path.stat()
    with path.open("r+b") as handle:
        handle.seek(at)
        byte = handle.read(1)
        handle.seek(at)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (
        before.st_size,
        before.st_ino,
        before.st_mtime_ns,
    )


@pytest.mark.usefixtures("settled_at_once")
@pytest.mark.parametrize("member", ["vllm/__init__.py", BIG])
def test_a_tampered_official_wheel_is_not_trusted(
    tmp_path: Path,
    setup: tuple[Path, Path],
    parsed: list[list[str]],
    capsys: pytest.CaptureFixture[str],
    member: str,
) -> None:
    """A byte flipped in place with the size, inode and mtime put back: its ctime says so, so
    neither the warm path nor the repack's remembered sha256 vouches for the bytes; they are
    verified against RECORD, and refused."""
    official, patchset = setup
    dist = tmp_path / "dist"
    words = argv(official, dist, patchset)
    assert run(capsys, words)[0] == 0
    for built in dist.glob("*.whl"):
        built.unlink()
    with zipfile.ZipFile(official) as archive:
        info = archive.getinfo(member)
    data_at = info.header_offset + 30 + len(info.filename) + len(info.extra)
    flip_a_byte_keeping_size_and_mtime(official, data_at + max(info.compress_size // 2 - 1, 0))
    assert warm_wheel.run(words) is None
    code, out, err = run(capsys, words)
    assert len(parsed) == 2, "not warm: the command ran as usual"
    assert code == 2 and out == ""
    assert f"member {member}: " in err.splitlines()[-1] or "cannot read" in err.splitlines()[-1]
    assert not any(dist.iterdir())


def test_a_wheel_written_as_the_build_began_is_not_remembered(
    tmp_path: Path, setup: tuple[Path, Path], cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write in the same tick of the kernel's clock as the wheel's last change would leave
    its ctime as it was: a wheel changed less than ``SETTLE_NS`` before the build is built,
    and its build is not kept for the next run."""
    official, patchset = setup
    assert run(capsys, argv(official, tmp_path / "dist", patchset))[0] == 0
    assert not (cache / "checked" / warm_wheel.KIND).exists()


@pytest.mark.usefixtures("settled_at_once")
def test_what_the_warm_path_watches(
    tmp_path: Path,
    setup: tuple[Path, Path],
    parsed: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wheel already at the name is compared by the command (without --force), a changed
    patchset file or another command line is run as usual; with --force the wheel is replaced
    warm."""
    official, patchset = setup
    dist = tmp_path / "dist"
    words = argv(official, dist, patchset)
    assert run(capsys, words)[0] == 0
    assert run(capsys, words)[0] == 0  # its own wheel there: the command compares the bytes
    assert len(parsed) == 2
    forced = [*words, "--force"]
    assert run(capsys, forced)[0] == 0
    assert run(capsys, forced)[0] == 0
    assert len(parsed) == 3
    patchset.write_text(WHITELIST_PATCHSET.replace("warm-whitelist", "warm-whitelist-2"))
    assert run(capsys, forced)[0] == 0
    assert len(parsed) == 4
    assert sorted(p.name for p in dist.iterdir()) == [
        "vllm-0.16.0+warm-cp38-abi3-manylinux_2_31_x86_64.whl"
    ]


def test_a_range_the_kernel_cannot_copy_is_copied_another_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "source"
    source.write_bytes(os.urandom(300_000))
    pieces: list[raw_copy.Piece] = [(5, 70_000), b"new", (100_000, 150_000), b"end"]
    expected = b"".join(
        p if isinstance(p, bytes) else source.read_bytes()[p[0] : p[0] + p[1]] for p in pieces
    )

    def refused(*args: object) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    for broken in ([], ["copy_file_range"], ["copy_file_range", "sendfile"]):
        with monkeypatch.context() as patched:
            for name in broken:
                patched.setattr(os, name, refused)
            out = tmp_path / f"out-{len(broken)}"
            with source.open("rb") as src, out.open("wb") as dst:
                assert raw_copy.write_pieces(pieces, src.fileno(), dst.fileno()) == len(expected)
        assert out.read_bytes() == expected


@pytest.mark.usefixtures("settled_at_once")
def test_an_interrupted_warm_build_leaves_nothing_and_says_so(
    tmp_path: Path,
    setup: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    official, patchset = setup
    dist = tmp_path / "dist"
    words = argv(official, dist, patchset, "--force")
    assert run(capsys, words)[0] == 0
    (built,) = dist.iterdir()
    before = built.read_bytes()

    def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(warm_wheel, "write_pieces", interrupted)
    assert run(capsys, words) == (130, "", "patcher: interrupted\n")
    assert list(dist.iterdir()) == [built] and built.read_bytes() == before
