"""Issue 38, 3: no command deletes or overwrites a file it did not write, unless the user
names it with a flag that says so (``--force``, shown in help).

Generated: each output folder of each writing command is given contents of its own before the
command runs (files, links in and out, nested folders, empty folders, read-only files and
folders, an earlier output changed since, an earlier output of an older patcher), and the
whole tree (paths, bytes, modes, link targets) must come out as it went in, the command
refusing in one line with exit 2; with ``--force``, what it replaces is gone and nothing
outside its output changes.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import one_error_line

sys.path.insert(0, str(Path(__file__).parent))

from patcher.cli.parser import main
from patcher.replica.write import MANIFEST


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (``root`` itself too): kind, mode, bytes or link target."""
    found: dict[str, tuple] = {}
    paths = [root] if root.exists() or root.is_symlink() else []
    if root.is_dir() and not root.is_symlink():
        for top, dirs, files in os.walk(root):
            paths += [Path(top) / n for n in (*dirs, *files)]
    for path in paths:
        info = path.lstat()
        name = str(path.relative_to(root.parent))
        if stat.S_ISLNK(info.st_mode):
            found[name] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[name] = ("dir", stat.S_IMODE(info.st_mode))
        elif stat.S_ISREG(info.st_mode):
            found[name] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
        else:  # a FIFO: never opened (that would wait for a writer)
            found[name] = ("other", info.st_mode)
    return found


def replica(folder: Path) -> None:
    """An earlier replica, as this patcher writes it."""
    assert main(["replica", "--out", str(folder)]) == 0


def old_replica(folder: Path) -> None:
    """An earlier replica of a patcher whose manifest listed no files."""
    replica(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    del manifest["files"]
    (folder / MANIFEST).write_text(json.dumps(manifest))


def with_(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        for step in steps:
            step(folder)

    return make


def put(relative: str, data: bytes = b"mine\n", mode: int | None = None) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if mode is not None:
            path.chmod(mode)

    return make


def link(relative: str, target: str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        (folder / relative).symlink_to(target)

    return make


def folder_(relative: str, mode: int | None = None) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        (folder / relative).mkdir(parents=True, exist_ok=True)
        if mode is not None:
            (folder / relative).chmod(mode)

    return make


def edit(relative: str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        path = folder / relative
        path.write_bytes(path.read_bytes() + b" ")

    return make


def remove(relative: str) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        (folder / relative).unlink()

    return make


ADDED = {
    "notes-at-the-top": put("my-notes.txt"),
    "drafter-weights": put("drafter/model.safetensors", b"\0" * 64),
    "target-weights": put("target/model-00001-of-00002.safetensors", b"\1" * 64),
    "nested-folder": put("runs/1/log.txt"),
    "empty-folder": folder_("scratch"),
    "empty-folder-in-target": folder_("target/extra"),
    "read-only-file": put("readonly.txt", mode=0o444),
    "read-only-file-in-drafter": put("drafter/readonly.bin", mode=0o400),
    "hidden-file": put(".keep"),
    "link-in": link("alias.json", "target/config.json"),
    "link-out": link("outside", "/etc/hostname"),
    "dangling-link": link("dangling", "no/such/file"),
    "link-to-folder": link("tgt", "target"),
    "edited-config": edit("target/config.json"),
    "edited-drafter-config": edit("drafter/config.json"),
    "edited-tokenizer": edit("target/tokenizer.json"),
    "config-replaced-by-link": with_(
        remove("drafter/config.json"), link("drafter/config.json", "../target/config.json")
    ),
    "a-fifo": lambda f: os.mkfifo(f / "pipe"),
}
"""What a user adds to, or changes in, an earlier replica."""

REFUSED_EVEN_WITH_FORCE = {
    "not-a-replica": put("notes.txt"),
    "not-a-replica-nested": put("a/b/c.txt"),
    "read-only-folder-in-replica": with_(replica, folder_("locked", 0o555)),
    "read-only-target-folder": with_(replica, lambda f: (f / "target").chmod(0o555)),
}


def existing_cases() -> dict[str, tuple[Callable[[Path], None], bool]]:
    """Each folder's contents, and whether ``--force`` may replace it."""
    cases: dict[str, tuple[Callable[[Path], None], bool]] = {
        f"replica+{name}": (with_(replica, make), True) for name, make in ADDED.items()
    }
    cases |= {f"old-replica+{n}": (with_(old_replica, m), True) for n, m in list(ADDED.items())[:4]}
    cases["old-replica"] = (old_replica, True)
    cases |= {name: (make, False) for name, make in REFUSED_EVEN_WITH_FORCE.items()}
    return cases


CASES = existing_cases()


@pytest.fixture(autouse=True)
def restore_modes(tmp_path: Path):
    yield
    for top, dirs, _ in os.walk(tmp_path):
        for name in dirs:
            path = Path(top) / name
            if not path.is_symlink():
                path.chmod(0o755)


def prepared(tmp_path: Path, make: Callable[[Path], None]) -> Path:
    out = tmp_path / "work" / "R"
    out.mkdir(parents=True)
    make(out)
    (tmp_path / "work" / "beside.txt").write_text("a file beside the output")
    return out


@pytest.mark.parametrize("case", CASES)
def test_replica_out_over_contents_it_did_not_write_refuses_and_changes_nothing(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, _ = CASES[case]
    out = prepared(tmp_path, make)
    capsys.readouterr()
    before = snapshot(tmp_path / "work")
    assert main(["replica", "--out", str(out), "--drafter-kind", "llama"]) == 2
    said = one_error_line(capsys)
    assert str(out) in said
    assert snapshot(tmp_path / "work") == before


@pytest.mark.parametrize("case", CASES)
def test_replica_out_with_force_replaces_only_a_replica(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, replaceable = CASES[case]
    out = prepared(tmp_path, make)
    capsys.readouterr()
    before = snapshot(tmp_path / "work")
    code = main(["replica", "--out", str(out), "--drafter-kind", "llama", "--force"])
    after = snapshot(tmp_path / "work")
    if not replaceable:
        assert code == 2
        one_error_line(capsys)
        assert after == before
        return
    assert code == 0, capsys.readouterr().err
    written = json.loads((out / MANIFEST).read_text())
    assert written["drafter_kind"] == "llama"
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == sorted(
        [MANIFEST, *written["files"]]
    )
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["R", "beside.txt"]


@pytest.mark.parametrize("how", ["--out", "rerun"])
def test_an_earlier_replica_left_as_written_is_replaced_without_force(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "R"
    replica(out)
    assert main(["replica", "--out", str(out), "--drafter-kind", "llama"]) == 0
    assert json.loads((out / MANIFEST).read_text())["drafter_kind"] == "llama"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R"]


def test_an_empty_folder_and_a_link_to_one_take_a_replica(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["replica", "--out", str(empty)]) == 0
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert main(["replica", "--out", str(tmp_path / "link")]) == 0
    assert (tmp_path / "link").is_symlink() and (target / MANIFEST).is_file()


def test_help_shows_force(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["replica", "--help"])
    assert "--force" in capsys.readouterr().out


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][1]][:12])
def test_serve_bench_replica_and_preflight_workdir_refuse_before_any_work(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """serve-bench --replica DIR and preflight's WORKDIR/replica (no --force there): a folder
    with files the replica did not write is refused before any download or venv."""
    make, _ = CASES[case]
    out = prepared(tmp_path, make)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    before = snapshot(tmp_path / "work")
    for argv in (
        [
            "serve-bench",
            "--device",
            "cpu",
            "--wheel",
            str(tmp_path / "none.whl"),
            "--replica",
            str(out),
        ],
        [
            "preflight",
            "--wheel",
            str(tmp_path / "none.whl"),
            "--model",
            str(model),
            "--drafter",
            str(model),
            "--workdir",
            str(out.parent),
        ],
    ):
        if argv[0] == "preflight":
            (out.parent / "replica").mkdir(exist_ok=True)
            make(out.parent / "replica")
            before = snapshot(tmp_path / "work")
        capsys.readouterr()
        assert main(argv) == 2
        said = one_error_line(capsys)
        assert "patcher did not write" in said or "not a replica" in said, said
        assert snapshot(tmp_path / "work") == before


WHEEL_NAME = "vllm-0.16.0+kimik2.eagle3-cp38-abi3-manylinux_2_31_x86_64.whl"
AT_THE_NAME: dict[str, tuple[Callable[[Path], None], bool]] = {
    "other-bytes": (put(WHEEL_NAME, b"a wheel of mine"), True),
    "read-only-other-bytes": (put(WHEEL_NAME, b"a wheel of mine", mode=0o444), True),
    "link-to-a-file-outside": (link(WHEEL_NAME, "../outside.whl"), True),
    "dangling-link": (link(WHEEL_NAME, "no-such.whl"), True),
    "a-folder": (with_(folder_(WHEEL_NAME), put(f"{WHEEL_NAME}/inside")), False),
    "empty-file": (put(WHEEL_NAME, b""), True),
}
"""What may already be at the patched wheel's name in --dist; whether --force replaces it."""
BESIDE = with_(
    put("notes.txt"),
    put("vllm-0.15.0+kimik2.eagle3-cp38-abi3-manylinux_2_31_x86_64.whl", b"older"),
    put(f".{WHEEL_NAME}.1234abcd.patcher.partial", b"a build running now"),
    folder_("sub"),
)
"""Files beside it, which no build-wheel touches."""


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_build_wheel import small_wheel

    return small_wheel(tmp_path_factory.mktemp("official"))


def build(official: Path, dist: Path, *extra: str) -> int:
    argv = ["build-wheel", "--wheel", str(official), "--dist", str(dist)]
    return main([*argv, "--patchset", "kimi-k2-eagle3", "--allow-noop", *extra])


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("case", AT_THE_NAME)
def test_build_wheel_overwrites_a_file_at_its_name_only_with_force(
    case: str, force: bool, official: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, replaceable = AT_THE_NAME[case]
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "outside.whl").write_bytes(b"outside")
    dist = tmp_path / "work" / "dist"
    dist.mkdir()
    with_(BESIDE, make)(dist)
    beside = {k: v for k, v in snapshot(dist).items() if WHEEL_NAME not in k or "partial" in k}
    before = snapshot(tmp_path / "work")
    capsys.readouterr()
    code = build(official, dist, *(["--force"] if force else []))
    if not (force and replaceable):
        assert code == 2
        said = one_error_line(capsys)
        assert WHEEL_NAME in said, said
        if not force:
            assert "--force" in said
        assert snapshot(tmp_path / "work") == before
        return
    assert code == 0, capsys.readouterr().err
    after = snapshot(dist)
    assert {k: v for k, v in after.items() if k in beside} == beside
    built = dist / WHEEL_NAME
    assert built.is_file() and not built.is_symlink()
    assert (tmp_path / "work" / "outside.whl").read_bytes() == b"outside"


def test_build_wheel_over_its_own_wheel_needs_no_force(
    official: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dist = tmp_path / "dist"
    assert build(official, dist) == 0
    first = (dist / WHEEL_NAME).read_bytes()
    assert build(official, dist) == 0
    assert (dist / WHEEL_NAME).read_bytes() == first


FIX_OUT: dict[str, Callable[[Path], None]] = {
    "a-file": lambda w: (w / "OUT").write_text("mine"),
    "an-empty-folder": lambda w: (w / "OUT").mkdir(),
    "a-folder-with-files": with_(put("OUT/mine.txt"), folder_("OUT/sub")),
    "a-link-to-a-folder": with_(folder_("elsewhere"), link("OUT", "elsewhere")),
    "a-dangling-link": link("OUT", "nowhere"),
    "a-read-only-file": put("OUT", mode=0o444),
}


@pytest.mark.parametrize("case", FIX_OUT)
def test_doctor_fix_never_writes_into_what_exists(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    drafter = work / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    FIX_OUT[case](work)
    before = snapshot(work)
    argv = ["doctor", "--drafter", str(drafter), "--wheel", str(work / "none.whl")]
    assert main([*argv, "--fix", str(work / "OUT")]) == 2
    assert "--fix writes a new folder" in one_error_line(capsys)
    assert snapshot(work) == before
