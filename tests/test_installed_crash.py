"""apply/revert --installed under faults: a kill at every step, Ctrl-C and SIGTERM, hostile paths,
stale bytecode.

The kill sweep runs on a real install of the official vLLM 0.16.0 wheel (``--no-deps``, the
fixtures of test_apply_installed). The process is stopped by the commit's test hook
(``PATCHER_TEST_HOOK_COMMIT_SIGNAL=N:KILL``, a hook for tests only), which sends it SIGKILL at
step N: N runs from 1 until a run ends by itself, so every rename and removal is a kill point.
After each kill, ``status`` names the interrupted state and how far it got, ``revert`` gives the
official bytes (every RECORD hash true, RECORD the wheel's) and ``apply`` the patched ones.

The hostile paths, the signals and the bytecode run on the synthetic installation of
test_apply_installed (the release's real modules, fetched by range).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import zipfile
from pathlib import Path

import pytest
import test_apply_installed as installed
from commandline import PATCHER
from conftest import one_error_line
from test_apply_installed import INFO, PATCHED, bad_rows, purelib, state, synthetic

from patcher.cli.parser import main

official_wheel = installed.official_wheel  # the fixtures: the official 0.16.0 wheel,
pristine = installed.pristine  # pip-installed --no-deps in a venv,
env = installed.env  # and a copy of that venv (hard links) for each test

HOOK = "PATCHER_TEST_HOOK_COMMIT_SIGNAL"
"""Written here again, not imported: the test hook the commit reads."""


def run(python: Path, command: str, hook: str | None = None) -> subprocess.CompletedProcess:
    """``patcher COMMAND --installed`` in a process of its own, stopped by the hook if given."""
    environ = {k: v for k, v in os.environ.items() if k != HOOK}
    if hook:
        environ[HOOK] = hook
    return subprocess.run(
        [PATCHER, command, "--installed", "--python", str(python)],
        env=environ,
        cwd="/",  # not the source tree: the patcher imported is the installed one
        capture_output=True,
        text=True,
        timeout=300,
    )


def temporaries(site: Path) -> list[str]:
    """What a commit leaves only when it is stopped: staged and kept-aside files, the journal."""
    return sorted(
        str(p.relative_to(site))
        for p in site.rglob("*")
        if p.name.endswith((".patcher", ".patcher-old")) or p.name == "patcher-journal.json"
    )


def snapshot(site: Path) -> dict[str, bytes]:
    """The bytes of every file of the distribution (not its .so files: large, never written)."""
    return {
        str(p.relative_to(site)): p.read_bytes()
        for p in site.rglob("*")
        if p.is_file() and p.suffix != ".so" and not p.name.endswith(".pth")
    }


def assert_official(site: Path, wheel: Path, official: dict[str, bytes]) -> None:
    assert temporaries(site) == []
    assert bad_rows(site) == []
    with zipfile.ZipFile(wheel) as archive:
        assert (site / INFO / "RECORD").read_bytes() == official[f"{INFO}/RECORD"]
        for path in PATCHED:
            assert (site / path).read_bytes() == archive.read(path)
    assert snapshot(site) == official
    # no folder is left that RECORD does not list: a revert killed after its last removal and
    # finished by the next left the copies' folders empty (second hostile pass)
    assert not (site / INFO / "patcher-originals").exists()


def assert_patched(site: Path, patched: dict[str, bytes]) -> None:
    assert temporaries(site) == []
    assert bad_rows(site) == []
    assert snapshot(site) == patched


def cloned(python: Path, name: str) -> Path:
    """A copy of ``python``'s venv made of hard links (every write is a rename, so the two
    never share a change); its interpreter."""
    venv = python.parent.parent
    copy = venv.with_name(name)
    subprocess.run(["cp", "-al", str(venv), str(copy)], check=True)
    return copy / "bin" / "python"


STRIDES = [
    pytest.param(10, id="every-tenth-step"),
    pytest.param(5, id="every-fifth-step", marks=pytest.mark.heavy),
    pytest.param(1, id="every-step", marks=pytest.mark.heavy),
]
"""By default steps 1 to 3, every tenth after them and the last two, so each kind of step (the
journal's write, renames, removals, the journal's removal) is still killed (issue 29: the full
sweep was 744 s of CI's 58 test minutes; every fifth step took 808 s of a cold CI's worker time
on 2026-12-07); every fifth and every step under ``nox -s tests -- -m heavy``."""


def sweep(python: Path, command: str, official, patched, wheel, capsys, stride: int) -> int:
    """Kill ``command`` at steps 1 to 3, every ``stride``-th after them and the last two; after
    each kill, check status, then revert (here) and apply (in a copy). Returns how many kill
    points there are."""
    site = purelib(python)
    start = patched if command == "revert" else official

    def killed_at(step: int) -> bool:
        """Kill at ``step`` and check what is left; False if the command ran to its end."""
        stopped = run(python, command, f"{step}:KILL")
        if stopped.returncode == 0:  # past the last step: the hook never fired
            assert step > 3, stopped.stdout
            assert_official(site, wheel, official) if command == "revert" else assert_patched(
                site, patched
            )
            if start is patched:  # the next kill starts from patched again
                assert main(["apply", "--installed", "--python", str(python)]) == 0
            else:
                assert main(["revert", "--installed", "--python", str(python)]) == 0
            capsys.readouterr()
            return False
        assert stopped.returncode == -signal.SIGKILL, (step, stopped.stderr)
        capsys.readouterr()
        assert main(["status", "--installed", "--python", str(python)]) == 2
        said = capsys.readouterr()
        assert f"interrupted: {command} of kimi-k2.5-eagle3 stopped with " in said.out, said.out
        errors = said.err.strip().splitlines()
        assert len(errors) == 1 and "Traceback" not in said.err, said.err
        assert "patcher revert --installed makes it official again" in errors[0]
        json_status = ["status", "--installed", "--python", str(python), "--format", "json"]
        assert main(json_status) == 2
        document = json.loads(capsys.readouterr().out)  # one document, though it exits 2
        assert document["patched"]["interrupted"].startswith(f"interrupted: {command} of ")
        copy = cloned(python, f"copy-{command}-{step}")
        assert main(["apply", "--installed", "--python", str(copy)]) == 0, step
        assert_patched(purelib(copy), patched)
        subprocess.run(["rm", "-rf", str(copy.parent.parent)], check=True)
        assert main(["revert", "--installed", "--python", str(python)]) == 0, step
        assert_official(site, wheel, official)
        if start is patched:
            assert main(["apply", "--installed", "--python", str(python)]) == 0
            assert_patched(site, patched)
        capsys.readouterr()
        return True

    killed = set()
    step = 1
    while killed_at(step):  # up: 1, 2, 3, then every stride-th, until a run ends by itself
        killed.add(step)
        step += 1 if step < 3 else stride
    last = step - 1
    while last not in killed and not killed_at(last):  # down to the last step that kills
        last -= 1
    if last - 1 not in killed:
        assert killed_at(last - 1)
    # leave the command's result, as a run to its end would
    assert main([command, "--installed", "--python", str(python)]) == 0
    capsys.readouterr()
    return last


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("stride", STRIDES)
def test_a_kill_at_any_step_of_apply_or_revert_is_named_and_undone(
    env, official_wheel, capsys, stride
):
    """issue 28: killed at any of the first 15 of its 19 renames, apply left a half-patched
    vLLM that status, revert and apply all refused (exit 2), with .patcher files no RECORD
    lists; killed where nothing was replaced yet, status said "patched and the record of how is
    gone". revert killed the same."""
    site = purelib(env)
    official = snapshot(site)
    assert main(["apply", "--installed", "--python", str(env)]) == 0
    patched = snapshot(site)
    assert main(["revert", "--installed", "--python", str(env)]) == 0
    assert_official(site, official_wheel, official)
    points = sweep(env, "apply", official, patched, official_wheel, capsys, stride)
    assert points >= 19 + 2  # each rename and removal, the journal's write and its removal
    assert_patched(site, patched)
    assert sweep(env, "revert", official, patched, official_wheel, capsys, stride) >= 19 + 2
    assert_official(site, official_wheel, official)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.network
@pytest.mark.parametrize("name", ["TERM", "INT"])
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_sigterm_and_ctrl_c_during_the_commit_roll_it_back(name, command, tmp_path, release):
    """issue 28: Transaction.commit rolled back on OSError only; SIGTERM or Ctrl-C left the
    renames done so far in place. Sent at the first rename, half way and at the last."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    before_apply = snapshot(site)
    if command == "revert":
        assert run(python, "apply").returncode == 0
    before = snapshot(site)
    for step in (2, 6, 11):
        stopped = run(python, command, f"{step}:{name}")
        assert stopped.returncode == {"INT": 130, "TERM": 143}[name], (step, stopped.stderr)
        assert stopped.stderr.strip().splitlines()[-1] == "patcher: interrupted", stopped.stderr
        assert "Traceback" not in stopped.stderr
        assert temporaries(site) == [], step
        assert snapshot(site) == before, step
    assert run(python, command).returncode == 0
    assert temporaries(site) == []
    if command == "revert":
        assert snapshot(site) == before_apply


def hostile_provenance(site: Path, member: str, attacker: bytes) -> Path:
    """The attack of issue 28: a provenance entry naming ``member``, its "original" (the
    attacker's bytes) where revert takes originals from, RECORD recomputed to match."""
    from patcher.outputs import site_packages
    from patcher.records import RecordRow
    from patcher.sources.installation import Installation, Provenance

    installation = Installation("python", "vllm", None, site, INFO)  # type: ignore[arg-type]
    provenance_file = site / INFO / "patcher-provenance.json"
    data = json.loads(provenance_file.read_text())
    victim = site / member
    data["patched_in_place"][member] = {
        "original": [f"sha256={_b64(attacker)}", str(len(attacker))],
        "patched": [f"sha256={_b64(victim.read_bytes())}", str(len(victim.read_bytes()))],
        "mtime_ns": 0,
    }
    kept = installation.original(member)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(attacker)
    provenance_file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    provenance = Provenance.from_json(json.loads(provenance_file.read_text()), "the attack")
    original_record = installation.original(f"{INFO}/RECORD").read_bytes()
    row = RecordRow.of(installation.provenance_member, provenance_file.read_bytes())
    record = site_packages.patched_record(installation, original_record, provenance, row)
    (site / INFO / "RECORD").write_bytes(record)
    return victim


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def hostile_members(tmp_path: Path, site: Path) -> list[str]:
    """Paths leading out of site-packages, every way: up, absolute, up after a folder, through
    a symlink to a folder outside."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    (site / "vllm" / "escape").symlink_to(outside, target_is_directory=True)
    return [
        "../victim.txt",
        "../../victim.txt",
        str(tmp_path / "outside" / "absolute.txt"),
        "vllm/../../victim-up.txt",
        "vllm/./config/../../../victim-dot.txt",
        "vllm/escape/victim-link.txt",
    ]


@pytest.mark.network
def test_paths_in_a_provenance_that_lead_outside_are_refused_before_any_write(
    tmp_path, release, capsys
):
    """issue 28: a provenance entry ``../../victim.txt`` with its "original" under the originals
    folder and RECORD recomputed: revert wrote the attacker's bytes outside site-packages and
    exited 0. Each hostile path on its own patched installation."""
    for number in range(6):
        root = tmp_path / f"case{number}"
        root.mkdir()
        python = synthetic(root, release, "0.16.0")
        site = root / "site"
        member = hostile_members(root, site)[number]
        assert main(["apply", "--installed", "--python", str(python)]) == 0
        victim_path = site / member
        victim_path.parent.mkdir(parents=True, exist_ok=True)
        victim_path.write_bytes(b"the victim's own bytes\n")
        hostile_provenance(site, member, b"the attacker's bytes\n")
        capsys.readouterr()
        before = state(root)
        for command in ("revert", "apply", "status"):
            assert main([command, "--installed", "--python", str(python)]) == 2, (member, command)
            error = one_error_line(capsys)
            assert "leads" in error and "outside" in error, (member, error)
        assert victim_path.read_bytes() == b"the victim's own bytes\n", member
        assert state(root) == before, member


@pytest.mark.network
def test_a_record_row_leading_outside_is_refused_before_any_write(tmp_path, release, capsys):
    """A RECORD row of the vllm package that leads out of site-packages: read by apply as one
    of vLLM's files before; now refused, nothing written."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    hostile_members(tmp_path, site)
    (tmp_path / "outside" / "x.py").write_text("x = 1\n")
    for row in ["vllm/../../outside/x.py", "vllm/escape/x.py"]:
        record = site / INFO / "RECORD"
        original = record.read_bytes()
        record.write_bytes(original + f"{row},,\n".encode())
        before = state(tmp_path)
        assert main(["apply", "--installed", "--python", str(python)]) == 2, row
        error = one_error_line(capsys)
        assert "leads" in error and "outside" in error, error
        assert state(tmp_path) == before
        record.write_bytes(original)


@pytest.mark.network
def test_a_journal_naming_a_path_outside_is_refused_before_any_write(tmp_path, release, capsys):
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    for member in hostile_members(tmp_path, site):
        journal = {
            "version": 1,
            "about": {"operation": "apply", "patchset": "kimi-k2.5-eagle3"},
            "entries": [{"path": member, "before": None, "after": digest(b"x")}],
            "folders": [],
        }
        (site / INFO / "patcher-journal.json").write_text(json.dumps(journal))
        before = state(tmp_path)
        for command in ("apply", "revert", "status"):
            assert main([command, "--installed", "--python", str(python)]) == 2, (member, command)
            error = one_error_line(capsys)
            assert "leads" in error and "outside" in error, (member, error)
        assert state(tmp_path) == before


def compile_unchecked(python: Path, module: Path) -> Path:
    """``module``'s bytecode as ``compileall --invalidation-mode unchecked-hash`` writes it:
    never checked against the source, and listed in no RECORD."""
    subprocess.run(
        [str(python), "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", module],
        check=True,
    )
    tag = subprocess.check_output(
        [str(python), "-c", "import sys; print(sys.implementation.cache_tag)"], text=True
    ).strip()
    return module.parent / "__pycache__" / f"{module.stem}.{tag}.pyc"


@pytest.mark.network
def test_bytecode_of_the_patched_modules_is_removed_and_status_checks_it(tmp_path, release, capsys):
    """issue 28: a .pyc compiled with unchecked-hash, not in RECORD, survived apply --installed:
    Python ran the old code while status said patched."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    old = [compile_unchecked(python, site / path) for path in PATCHED]
    old_bytes = [p.read_bytes() for p in old]
    assert main(["apply", "--installed", "--python", str(python)]) == 0
    assert [p for p in old if p.exists()] == []
    capsys.readouterr()
    assert main(["status", "--installed", "--python", str(python)]) == 0
    # compiled from the patched source, as an import compiles it (by timestamp), any level
    for level in ("", "-o1", "-o2"):
        subprocess.run(
            [str(python), "-m", "compileall", "-q", *filter(None, [level])]
            + [str(site / p) for p in PATCHED],
            check=True,
        )
    assert main(["status", "--installed", "--python", str(python)]) == 0
    # the old bytecode put back: status names it, and revert removes it
    old[1].write_bytes(old_bytes[1])
    assert main(["status", "--installed", "--python", str(python)]) == 2
    assert f"{old[1]} is stale bytecode" in one_error_line(capsys)
    fresh = compile_unchecked(python, site / PATCHED[2])  # of the patched source: not stale
    assert main(["status", "--installed", "--python", str(python)]) == 2
    assert str(fresh) not in one_error_line(capsys)
    assert main(["revert", "--installed", "--python", str(python)]) == 0
    assert not old[1].exists() and not fresh.exists()


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("at", [1, 3, 5])
def test_an_interrupt_between_renames_rolls_the_commit_back(tmp_path, monkeypatch, interrupt, at):
    """Without the test hook (so it runs against any version of the code): Ctrl-C (or SIGTERM,
    which patcher turns into KeyboardInterrupt) raised by the rename ``at`` of a commit. The
    commit rolled back on OSError only; it must put every file back for any exception."""
    from patcher.outputs import transaction as module

    files = {tmp_path / f"f{i}.py": f"old {i}\n".encode() for i in range(4)}
    for path, data in files.items():
        path.write_bytes(data)
    commit = module.Transaction()
    for path in files:
        commit.write(path, b"new\n", 0o644)
    commit.write(tmp_path / "sub" / "new.py", b"created\n", 0o644)
    real = os.replace
    calls = []

    def replace(source, target):
        calls.append(target)
        if len(calls) == at:
            raise interrupt()
        return real(source, target)

    monkeypatch.setattr(module.os, "replace", replace)
    with pytest.raises(interrupt):
        commit.commit()
    monkeypatch.setattr(module.os, "replace", real)
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(p.name for p in files)


@pytest.mark.parametrize("journal", [False, True], ids=["plain", "journaled"])
@pytest.mark.parametrize("at", [1, 2, 3, 4])
def test_an_interrupt_landing_just_after_a_rename_rolls_that_rename_back_too(
    tmp_path, monkeypatch, journal, at
):
    """SIGTERM as the hostile pass sent it (strace, on entering rename): the rename completes
    and the handler's KeyboardInterrupt lands before the commit records it. The commit took the
    target for untouched and deleted its kept-aside original: a patched file that status and
    revert called unpatched. Every file must be as before, nothing else left, journal included."""
    from patcher.outputs import transaction as module

    folder = tmp_path / "site"
    folder.mkdir()
    files = {folder / f"f{i}.py": f"old {i}\n".encode() for i in range(4)}
    for path, data in files.items():
        path.write_bytes(data)
    if journal:
        commit = module.Transaction(journal=tmp_path / "journal.json", root=folder)
    else:
        commit = module.Transaction()
    for path in files:
        commit.write(path, b"new\n", 0o644)
    real = os.replace
    calls = []

    def replace(source, target):
        real(source, target)
        calls.append(target)
        if len(calls) == at:
            raise KeyboardInterrupt

    monkeypatch.setattr(module.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        commit.commit()
    monkeypatch.setattr(module.os, "replace", real)
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["site", *(p.name for p in files)])


@pytest.mark.parametrize("window", ["folder-made", "staged", "kept-aside", "removal-aside"])
@pytest.mark.parametrize("journal", [True, False])
def test_a_ctrl_c_landing_between_a_file_made_and_its_record_leaves_nothing(
    tmp_path, monkeypatch, window, journal
):
    """A real SIGINT (not a raised exception) that lands right after the commit made a folder,
    staged a copy or kept an original aside, before it recorded that: the copy was left behind,
    where no rollback knew of it (second hostile pass: Ctrl-C during apply --installed left a
    stray copy in patcher-originals/, which status took for a kept original, and revert and
    apply both refused). Every file must be as before and nothing else left."""
    from patcher.outputs import transaction as module

    folder = tmp_path / "site"
    folder.mkdir()
    files = {folder / f"f{i}.py": f"old {i}\n".encode() for i in range(3)}
    for path, data in files.items():
        path.write_bytes(data)
    doomed = folder / "doomed.py"
    doomed.write_bytes(b"to go\n")
    kw = {"journal": tmp_path / "journal.json", "root": folder} if journal else {}
    commit = module.Transaction(**kw)
    for path in files:
        commit.write(path, b"new\n", 0o644)
    commit.write(folder / "originals" / "deep" / "kept.py", b"kept\n", 0o644)
    commit.remove(doomed)
    name = {
        "folder-made": "make_parents",
        "staged": "stage",
        "kept-aside": "keep_aside",
        "removal-aside": "keep_aside",
    }[window]
    real = getattr(module, name)
    calls = []

    def then_ctrl_c(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(args)
        last_aside = window == "removal-aside" and args[0] == doomed
        if (window != "removal-aside" and len(calls) == 2) or last_aside:
            os.kill(os.getpid(), signal.SIGINT)  # lands at the next bytecode, or when unheld
        return result

    monkeypatch.setattr(module, name, then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        commit.commit()
    monkeypatch.setattr(module, name, real)
    assert {p: p.read_bytes() for p in files} == files
    assert doomed.read_bytes() == b"to go\n"
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert left == sorted(["site", "site/doomed.py", *(f"site/{p.name}" for p in files)])


@pytest.mark.network
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_empty_copy_folders_a_killed_revert_left_are_removed_by_the_next_run(
    tmp_path, release, command
):
    """A revert SIGKILLed after its commit removed the journal, before it removed the copies'
    folders, left an empty patcher-originals/ tree that no RECORD lists, and the next revert
    ('nothing to revert') kept it (second hostile pass). The next apply or revert removes it;
    a folder that holds a file stays."""
    python = synthetic(tmp_path, release, "0.16.0")
    site = tmp_path / "site"
    info = next(site.glob("vllm-*.dist-info"))
    (info / "patcher-originals" / "vllm" / "config").mkdir(parents=True)
    done = run(python, command)
    assert done.returncode == 0, done.stderr
    if command == "apply":  # its copies are there now, in folders of their own
        assert any((info / "patcher-originals").rglob("*.py"))
        assert run(python, "revert").returncode == 0
    assert not (info / "patcher-originals").exists()
