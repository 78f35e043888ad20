"""The overlay wheel in a real venv: installed with uv beside a vLLM, its finder serving the
patched modules at import, all or nothing, and gone with an uninstall.

The vLLM here is a stand-in: a three-module ``vllm`` distribution made by the test, installed
from its own wheel with a real RECORD, so the finder's hashing, the all-or-nothing rule and the
uninstall are what they are against any release. The real releases are proven by
``patcher verify --overlay`` (tests/test_overlay_verify.py and ``nox -s verify``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.outputs.overlay import PACKAGE, OverlayPlan, build_overlay, wheel_bytes
from patcher.records import Hash

UV = str(Path(sys.executable).with_name("uv"))
OFFICIAL = b'VALUE = "official"\n'
PATCHED = b'VALUE = "patched"\nimport os as _os\nHERE = _os.path.dirname(__file__)\n'
OTHER_OFFICIAL = b'OTHER = "official"\n'
OTHER_PATCHED = b'OTHER = "patched"\n'
TARGET = "vllm/config/speculative.py"
BOTH = (
    "import vllm.config.speculative as s, vllm.v1.spec_decode.eagle as e; print(s.VALUE, e.OTHER)"
)
OTHER = "vllm/v1/spec_decode/eagle.py"


WRITES_BYTECODE = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The environment with byte code written, so where it goes is seen."""


def stand_in_wheel(folder: Path, version: str, files: dict[str, bytes]) -> Path:
    """A wheel of a ``vllm`` distribution holding ``files``, with a RECORD."""
    info = f"vllm-{version}.dist-info"
    members = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{n},{Hash.of(d)},{len(d)}\n" for n, d in members.items())
    members[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = folder / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def tree(target: bytes = OFFICIAL, other: bytes = OTHER_OFFICIAL) -> dict[str, bytes]:
    return {
        "vllm/__init__.py": b"",
        "vllm/config/__init__.py": b"",
        TARGET: target,
        "vllm/v1/__init__.py": b"",
        "vllm/v1/spec_decode/__init__.py": b"",
        OTHER: other,
    }


def plan(**changes) -> OverlayPlan:
    fields = dict(
        distribution="vllm",
        vllm="0.16.0",
        version=Version("0.16.0+kimi.eagle3"),
        patchsets=("kimi-k2.5-eagle3",),
        modules=((TARGET, OFFICIAL, PATCHED), (OTHER, OTHER_OFFICIAL, OTHER_PATCHED)),
    )
    fields.update(changes)
    return OverlayPlan(**fields)


def uv(*args: str) -> None:
    subprocess.run(
        [UV, *args], check=True, capture_output=True, env={**os.environ, "UV_OFFLINE": "1"}
    )


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "venv" / "bin" / "python"
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True
        )
        (self.site,) = (root / "venv" / "lib").glob("python*/site-packages")

    def install(self, *wheels: Path) -> None:
        uv("pip", "install", "--no-deps", "--python", str(self.python), *map(str, wheels))

    def uninstall(self, name: str) -> None:
        uv("pip", "uninstall", "--python", str(self.python), name)

    def run(self, code: str, *flags: str, env: dict[str, str] | None = None):
        done = subprocess.run(
            [str(self.python), *flags, "-c", code],
            capture_output=True,
            text=True,
            env={**WRITES_BYTECODE, **(env or {})},
            cwd=self.root,
            timeout=60,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def values(self, **kw) -> tuple[str, str, str]:
        code = BOTH.replace("e.OTHER)", "e.OTHER, s.__file__)")
        done = self.run(code, **kw)
        assert done.returncode == 0, done.stderr
        value, other, file = done.stdout.split()
        return value, other, file


def official_state(env: Env) -> dict[str, str]:
    """Every file of the stand-in vLLM with its sha256, __pycache__ left out."""
    root = env.site / "vllm"
    return {
        str(p.relative_to(env.site)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.py"))
    }


@pytest.fixture
def env(tmp_path) -> Env:
    made = Env(tmp_path)
    made.install(stand_in_wheel(tmp_path, "0.16.0", tree()))
    return made


@pytest.fixture
def overlay(tmp_path) -> Path:
    return build_overlay(plan(), tmp_path / "dist")


def test_serves_the_patched_modules_and_touches_no_vllm_file(env, overlay):
    before = official_state(env)
    assert env.values()[:2] == ("official", "official")
    for cache in (env.site / "vllm").rglob("__pycache__"):  # the official run's byte code
        for compiled in cache.iterdir():
            compiled.unlink()
    env.install(overlay)
    value, other, file = env.values()
    assert (value, other) == ("patched", "patched")
    assert Path(file).is_relative_to(env.site / PACKAGE / "modules"), file
    assert official_state(env) == before
    # byte code of the patched files under the overlay's own folder, never in vLLM's
    assert not list((env.site / "vllm" / "config" / "__pycache__").glob("speculative.*"))
    assert list((env.site / PACKAGE / "modules" / "vllm" / "config" / "__pycache__").glob("*"))
    env.uninstall("vllm-patcher-overlay")
    assert not (env.site / PACKAGE).exists()
    assert not list(env.site.glob(f"{PACKAGE}*"))
    assert env.values()[:2] == ("official", "official")
    assert official_state(env) == before


def test_without_the_finder_nothing_is_patched(env, overlay):
    """The .pth and .start files are what activate it: without them, official."""
    env.install(overlay)
    (env.site / f"{PACKAGE}.pth").unlink()
    assert env.values()[:2] == ("official", "official")


def test_a_spawned_child_is_patched_too(env, overlay):
    env.install(overlay)
    code = (
        "import multiprocessing as mp\n"
        "def child(q):\n"
        "    import vllm.config.speculative as s; q.put(s.VALUE)\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('spawn'); q = ctx.Queue()\n"
        "    p = ctx.Process(target=child, args=(q,))\n"
        "    p.start(); print(q.get(timeout=30)); p.join()\n"
    )
    script = env.root / "spawn.py"
    script.write_text(code)
    done = subprocess.run(
        [str(env.python), str(script)], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "patched", done.stderr


def warned(done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("patcher overlay: off, vLLM runs as official: "), lines[0]
    return lines[0]


def test_an_edited_target_turns_the_whole_overlay_off(env, overlay):
    env.install(overlay)
    other = env.site / OTHER
    other.write_bytes(other.read_bytes() + b"# edited by hand\n")
    done = env.run(BOTH)
    assert done.stdout.split() == ["official", "official"], done.stderr  # no mix: both official
    assert str(other) in warned(done)


def test_another_release_turns_it_off_naming_both_versions(tmp_path, overlay):
    env = Env(tmp_path)
    env.install(stand_in_wheel(tmp_path, "0.17.0", tree(target=b'VALUE = "official"\n# 0.17\n')))
    env.install(overlay)
    done = env.run("import vllm.config.speculative as s; print(s.VALUE)")
    assert done.stdout.split() == ["official"]
    line = warned(done)
    assert "vllm 0.16.0" in line and "vllm 0.17.0" in line, line


def test_the_kill_switch(env, overlay):
    env.install(overlay)
    for value in ("0", "off", "false", "no"):
        done = env.run(
            "import vllm.config.speculative as s; print(s.VALUE)", env={"PATCHER_OVERLAY": value}
        )
        assert (done.stdout.split(), done.stderr) == (["official"], "")


def broken_manifests() -> list[tuple[str, object]]:
    """Every field of the manifest given the wrong kind of value, and whole-file breakage."""
    good = plan().manifest()
    cases: list[tuple[str, object]] = [
        ("not-json", b"{"),
        ("list", []),
        ("empty", {}),
        ("not-utf8", b"\xff\xfe"),
    ]
    for key in ("format", "distribution", "version", "modules"):
        for bad in (None, 0, "", [], {}, 2.5):
            cases.append((f"{key}={bad!r}", {**good, key: bad}))
    entry = good["modules"]["vllm.config.speculative"]
    for key in ("file", "official_sha256", "patched_sha256"):
        for bad in (None, 1, "", "../../etc/passwd", "0" * 63, "G" * 64, []):
            modules = {**good["modules"], "vllm.config.speculative": {**entry, key: bad}}
            cases.append((f"modules.{key}={bad!r}", {**good, "modules": modules}))
    for name in ("os", "vllm", "../x", "vllm..x", "vllm.a-b", 7):
        modules = {**good["modules"], str(name) if name != 7 else "7": entry}
        cases.append((f"module name {name!r}", {**good, "modules": modules}))
    cases.append(("entry not an object", {**good, "modules": {"vllm.config.speculative": "x"}}))
    for bad in ("0" * 64, ["G" * 64], [None], {"a": 1}):
        modules = {**good["modules"], "vllm.config.speculative": {**entry, "states_sha256": bad}}
        cases.append((f"modules.states_sha256={bad!r}", {**good, "modules": modules}))
    return cases


def test_a_broken_manifest_is_one_line_and_official(env, overlay):
    env.install(overlay)
    manifest = env.site / PACKAGE / "manifest.json"
    failures = []
    for name, content in broken_manifests():
        manifest.write_bytes(
            content if isinstance(content, bytes) else json.dumps(content).encode()
        )
        done = env.run(BOTH)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        if (
            done.stdout.split() != ["official", "official"]
            or len(lines) != 1
            or "Traceback" in done.stderr
        ):
            failures.append((name, done.stdout, done.stderr))
    assert not failures, failures[:3]


def test_two_overlays_in_one_interpreter_turn_both_off(env, overlay, tmp_path):
    env.install(overlay)
    second = tmp_path / "second"
    second.mkdir()
    with zipfile.ZipFile(overlay) as archive:
        archive.extractall(second)
    (second / PACKAGE).rename(second / "second_overlay")  # another copy, under its own name
    (env.site / "zz-second.pth").write_text(
        f"{second}\nimport second_overlay; second_overlay.activate()\n"
    )
    done = env.run("import vllm.config.speculative as s; print(s.VALUE)")
    assert done.stdout.split() == ["official"], done.stderr
    assert "two overlays" in warned(done)


def test_plugin_says_whether_the_targets_came_from_the_overlay(env, overlay):
    env.install(overlay)
    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')\n"
        "import vllm.config.speculative\n"
        f"import {PACKAGE} as o; o.plugin()\n"
    )
    assert (
        "patcher overlay: active, 2 modules of vllm 0.16.0 patched (kimi-k2.5-eagle3)"
        in env.run(code).stdout
    )
    # -S: site is not run, so neither is the .pth; the plugin, called by hand, says so
    flags_code = f"import sys; sys.path.append({str(env.site)!r})\n" + code
    done = env.run(flags_code, "-S")
    assert "installed but not active" in done.stdout, (done.stdout, done.stderr)


def test_the_wheel_is_small_reproducible_and_complete():
    first, second = wheel_bytes(plan()), wheel_bytes(plan())
    assert first == second
    names = zipfile.ZipFile(io.BytesIO(first)).namelist()
    assert f"{PACKAGE}.pth" in names and f"{PACKAGE}.start" in names
    assert f"{PACKAGE}/modules/{TARGET}" in names
    entry_points = zipfile.ZipFile(io.BytesIO(first)).read(
        f"{PACKAGE}-0.16.0+kimi.eagle3.dist-info/entry_points.txt"
    )
    assert b"[vllm.general_plugins]" in entry_points


@pytest.mark.parametrize(
    "modules, problem",
    [
        ((), "no patched module"),
        ((("vllm/x.py", b"a", b"a"),), "the patched bytes are the official ones"),
        ((("../x.py", b"a", b"b"),), "not a module of the vllm package"),
        ((("vllm/a-b.py", b"a", b"b"),), "not a module of the vllm package"),
        ((("torch/x.py", b"a", b"b"),), "not a module of the vllm package"),
    ],
)
def test_a_plan_reports_its_problems(modules, problem):
    from patcher.errors import PatcherError

    with pytest.raises(PatcherError, match=problem):
        plan(modules=modules)


@pytest.mark.parametrize(
    "states, problem",
    [
        ((("vllm/other.py", ("0" * 64,)),), "which the overlay does not patch"),
        (((TARGET, ()),), "not sha256"),
        (((TARGET, ("G" * 64,)),), "not sha256"),
    ],
)
def test_a_plan_reports_bad_states(states, problem):
    from patcher.errors import PatcherError

    with pytest.raises(PatcherError, match=problem):
        plan(states=states)


def patcher(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    from commandline import PATCHER

    return subprocess.run(
        [PATCHER, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


def test_status_sees_the_overlay_active_or_off(env, overlay):
    env.install(overlay)
    shown = patcher(
        "status", "--installed", "--python", str(env.python), "--format", "json", cwd=env.root
    )
    data = json.loads(shown.stdout)
    assert data["overlay"]["active"] is True, shown.stderr
    assert data["overlay"]["modules"] == ["vllm.config.speculative", "vllm.v1.spec_decode.eagle"]
    (env.site / TARGET).write_bytes(b"# edited\n")
    data = json.loads(
        patcher(
            "status", "--installed", "--python", str(env.python), "--format", "json", cwd=env.root
        ).stdout
    )
    assert data["overlay"]["active"] is False
    assert str(env.site / TARGET) in data["overlay"]["why"]


def test_apply_installed_is_not_stacked_on_an_overlay(env, overlay):
    env.install(overlay)
    before = official_state(env)
    done = patcher("apply", "--installed", "--python", str(env.python), cwd=env.root)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("patcher: error: an overlay (kimi-k2.5-eagle3 for vllm 0.16.0)"), line
    assert "Traceback" not in done.stderr
    assert official_state(env) == before


def test_untouched_names_the_vllm_files_that_differ_from_their_record(env, overlay):
    """What serve-bench --with-overlay checks after serving: every vLLM file as RECORD says."""
    from patcher.serving.venv import ServingVenv, untouched

    env.install(overlay)
    venv = ServingVenv(env.root / "venv", overlay, "", False, 0.0, None)  # type: ignore[arg-type]
    env.values()  # served once: byte code written, none of it in vLLM's RECORD
    assert untouched(venv) == []
    (env.site / OTHER).write_bytes(b"# edited\n")
    assert untouched(venv) == [OTHER]


AT_THE_NAME = {
    "other-bytes": (lambda t: t.write_bytes(b"a wheel of mine"), True),
    "read-only": (lambda t: (t.write_bytes(b"mine"), t.chmod(0o444)), True),
    "link-out": (lambda t: t.symlink_to(t.parent.parent / "outside.whl"), True),
    "dangling-link": (lambda t: t.symlink_to("no-such.whl"), True),
    "a-folder": (lambda t: (t.mkdir(), (t / "inside").write_text("mine")), False),
    "empty-file": (lambda t: t.write_bytes(b""), True),
}
"""What may already be at the overlay's name in --dist; whether --force replaces it."""


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("case", AT_THE_NAME)
def test_overlay_overwrites_a_file_at_its_name_only_with_force(case, force, tmp_path):
    from patcher.errors import PatcherError

    make, replaceable = AT_THE_NAME[case]
    (tmp_path / "outside.whl").write_bytes(b"outside")
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "notes.txt").write_text("mine")
    target = dist / plan().wheel_name
    make(target)

    def state():
        return {
            p.name: (p.is_symlink(), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(tmp_path.rglob("*"))
        }

    before = state()
    if force and replaceable:
        assert build_overlay(plan(), dist, replace_other=True) == target
        assert target.read_bytes() == wheel_bytes(plan()) and not target.is_symlink()
        assert (tmp_path / "outside.whl").read_bytes() == b"outside"
        assert (dist / "notes.txt").read_text() == "mine"
        return
    with pytest.raises(PatcherError, match="nothing was written"):
        build_overlay(plan(), dist, replace_other=force)
    assert state() == before


def test_an_overlay_over_its_own_bytes_needs_no_force(tmp_path):
    first = build_overlay(plan(), tmp_path, replace_other=False)
    assert build_overlay(plan(), tmp_path, replace_other=False) == first


BREAKAGES = {
    "runtime-gone": lambda site: (site / PACKAGE / "runtime.py").unlink(),
    "runtime-broken": lambda site: (site / PACKAGE / "runtime.py").write_text("def (:\n"),
    "runtime-raises": lambda site: (site / PACKAGE / "runtime.py").write_text("1/0\n"),
    "own-module-gone": lambda site: (site / PACKAGE / "modules" / OTHER).unlink(),
    "own-module-broken": lambda site: (site / PACKAGE / "modules" / OTHER).write_text("def (:\n"),
    "own-module-edited": lambda site: (site / PACKAGE / "modules" / OTHER).write_text(
        "OTHER = 1\n"
    ),
}
"""The overlay's own files broken after install (third hostile pass): each must leave the
process official, with one line, never a traceback or a mix."""


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_overlay_of_its_own_is_official_with_one_line(env, overlay, breakage):
    env.install(overlay)
    BREAKAGES[breakage](env.site)
    done = env.run(BOTH)
    assert done.stdout.split() == ["official", "official"], done.stderr
    warned(done)


def test_the_off_line_escapes_what_a_manifest_or_a_path_holds(env, overlay):
    env.install(overlay)
    manifest = env.site / PACKAGE / "manifest.json"
    data = json.loads(manifest.read_text())
    data["version"] = "0.16.0\x1b[2J\rpatcher: error: forged"
    manifest.write_text(json.dumps(data))
    (env.site / TARGET).write_bytes(OFFICIAL + b"# edited\n")
    done = env.run(BOTH)
    assert done.stdout.split() == ["official", "official"]
    line = warned(done)
    assert "\x1b" not in done.stderr and "\r" not in done.stderr and "\\x1b" in line, line


def test_a_second_overlay_after_one_served_leaves_the_first_serving(env, overlay, tmp_path):
    """Activated late (site.addsitedir after a target was served): turning the first off would
    mix; the newcomer is off, the first keeps serving."""
    env.install(overlay)
    second = tmp_path / "second"
    second.mkdir()
    with zipfile.ZipFile(overlay) as archive:
        archive.extractall(second)
    (second / PACKAGE).rename(second / "second_overlay")
    code = (
        "import vllm.config.speculative as s\n"
        f"import sys; sys.path.insert(0, {str(second)!r})\n"
        "import second_overlay; second_overlay.activate()\n"
        "import vllm.v1.spec_decode.eagle as e; print(s.VALUE, e.OTHER)\n"
    )
    done = env.run(code)
    assert done.stdout.split() == ["patched", "patched"], done.stderr
    assert "two overlays" in done.stderr and len(done.stderr.strip().splitlines()) == 1
