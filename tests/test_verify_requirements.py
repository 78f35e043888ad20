"""What a verify venv installs: METADATA less the GPU stack, decided by the release's imports."""

from __future__ import annotations

import pytest
from verify_helpers import fake_wheel

from patcher.errors import PatcherError
from patcher.verify import requirements
from patcher.verify.requirements import (
    CPU_TORCH,
    check_python,
    left_out_by,
    plan_for_wheel,
    third_party_imports,
)
from patcher.wheel_metadata import read_metadata


def sources(files: dict[str, str]) -> dict[str, tuple[str, bool]]:
    """Module name -> (source, is_package), as the scanner reads a wheel."""
    found = {}
    for path, text in files.items():
        parts = path.removesuffix(".py").split("/")
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (text, is_package)
    return found


def names(plan_lines: tuple[str, ...]) -> set[str]:
    return {line.split("=")[0].split("<")[0].split(">")[0].split("[")[0] for line in plan_lines}


def test_gpu_stack_is_left_out_and_cpu_torch_replaces_it(tmp_path):
    plan = plan_for_wheel(fake_wheel(tmp_path))
    assert plan.torch == CPU_TORCH
    assert names(plan.install) == {"transformers", "compressed-tensors"}
    left = dict(plan.left_out)
    assert set(left) == {
        "xgrammar==0.1.29",
        "torch==2.9.1",
        "torchvision==0.24.1",
        "flashinfer-python==0.6.3",
        "nvidia-cutlass-dsl>=4.4.0",
        "ray[cgraph]>=2.48.0",
    }
    assert "CPU" in left["torch==2.9.1"]


def test_extras_and_foreign_markers_do_not_apply(tmp_path):
    plan = plan_for_wheel(fake_wheel(tmp_path))
    every = " ".join(plan.install) + " ".join(line for line, _ in plan.left_out)
    assert "pandas" not in every and "never-here" not in every


def test_markers_are_dropped_from_the_pip_lines(tmp_path):
    modules = {"vllm/config/__init__.py": "import xgrammar\n"}
    plan = plan_for_wheel(fake_wheel(tmp_path, modules))
    assert "xgrammar==0.1.29" in plan.install


def test_a_left_out_package_the_release_imports_goes_in(tmp_path):
    """0.33.0's registry imports xgrammar at module level: the venv must have it."""
    modules = {
        "vllm/config/__init__.py": "from vllm.parser import abstract\n",
        "vllm/parser/__init__.py": "",
        "vllm/parser/abstract.py": "from xgrammar import Grammar\n",
    }
    plan = plan_for_wheel(fake_wheel(tmp_path, modules))
    assert "xgrammar==0.1.29" in plan.install
    assert "xgrammar==0.1.29" not in dict(plan.left_out)


def test_never_entries_stay_out_even_when_imported(tmp_path):
    modules = {"vllm/config/__init__.py": "import torch\nimport torchvision\n"}
    plan = plan_for_wheel(fake_wheel(tmp_path, modules))
    assert {"torch==2.9.1", "torchvision==0.24.1"} <= set(dict(plan.left_out))


def test_conditional_optional_and_lazy_imports_are_not_needs():
    found = third_party_imports(
        sources(
            {
                "vllm/__init__.py": "",
                "vllm/config/__init__.py": (
                    "from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    import flashinfer\n"
                    "if current_platform.is_cuda():\n    import deep_gemm\n"
                    "try:\n    import triton\nexcept ImportError:\n    triton = None\n"
                    "try:\n    import ray\nexcept (ValueError, ModuleNotFoundError):\n    pass\n"
                    "def later():\n    import xformers\n"
                    "class Holder:\n    import einops\n"
                    "with open(__file__):\n    import yaml\n"
                ),
            }
        ),
        ["vllm.config"],
    )
    assert found == {"einops", "yaml"}


def test_imports_are_followed_through_relative_and_parent_packages():
    found = third_party_imports(
        sources(
            {
                "vllm/__init__.py": "import regex\n",
                "vllm/a/__init__.py": "from . import b\nfrom .c import thing\n",
                "vllm/a/b.py": "from ..d import e\n",
                "vllm/a/c.py": "import numpy.linalg\nimport json\n",
                "vllm/d/__init__.py": "import msgspec\n",
                "vllm/d/e.py": "import zmq\n",
                "vllm/unreached.py": "import xgrammar\n",
            }
        ),
        ["vllm.a"],
    )
    assert found == {"regex", "numpy", "msgspec", "zmq"}


def test_a_syntax_error_in_one_module_does_not_stop_the_scan():
    found = third_party_imports(
        sources({"vllm/__init__.py": "import regex\nfrom . import bad\n", "vllm/bad.py": "def ("}),
        ["vllm"],
    )
    assert found == {"regex"}


LAZY_BACKEND = (
    "from dataclasses import dataclass, field\n"
    "from typing import TYPE_CHECKING\n"
    "from vllm.utils import LazyLoader\n"
    "if TYPE_CHECKING:\n    import xgrammar as xgr\n"
    "else:\n    xgr = LazyLoader('xgr', globals(), 'xgrammar')\n    import msgspec\n"
    "def compile(spec):\n    return xgr.compile(spec)\n"
)
"""vLLM 0.34.0's ``backend_xgrammar`` in small: the deferred import, used in a function only."""


@pytest.mark.parametrize(
    ("head", "tail", "needed"),
    [
        ("", "", {"msgspec"}),  # only a function touches xgr: not at import
        ("", "@dataclass\nclass Grammar:\n    matcher: xgr.GrammarMatcher = field()\n", None),
        ("from __future__ import annotations\n", "class Grammar:\n    m: xgr.Matcher\n", set()),
        ("", "MATCHER = xgr.GrammarMatcher\n", None),
        ("", "def f(x=xgr.DEFAULT):\n    pass\n", None),
        ("", "def f(x: xgr.Matcher) -> None:\n    pass\n", None),
        ("from __future__ import annotations\n", "def f(x: xgr.Matcher):\n    pass\n", set()),
    ],
)
def test_a_lazy_loader_is_a_need_once_the_module_touches_it_as_it_loads(head, tail, needed):
    """vLLM 0.34.0's verify venv lacked xgrammar: its field annotation ``xgr.GrammarMatcher``
    loads the deferred module at import, which the scan (that skipped every ``if``, and knew
    no ``LazyLoader``) did not see; every check then failed on ``No module named 'xgrammar'``.
    The ``else`` of ``if TYPE_CHECKING`` is what runs (``msgspec``)."""
    found = third_party_imports(
        sources({"vllm/__init__.py": "", "vllm/backend.py": head + LAZY_BACKEND + tail}),
        ["vllm.backend"],
    )
    assert found == ({"msgspec", "xgrammar"} if needed is None else needed | {"msgspec"})


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("nvidia-cudnn-frontend", "nvidia-*"),
        ("Flashinfer_Python", "flashinfer*"),
        ("cupy-cuda12x", "cupy*"),
        ("PyNvVideoCodec", "pynvvideocodec"),
        ("torch", "torch"),
    ],
)
def test_distribution_names_match_canonically(name, pattern):
    entry = left_out_by(name)
    assert entry is not None and entry.pattern == pattern


def test_cpu_packages_are_not_on_the_list():
    for name in ("transformers", "compressed-tensors", "torchao", "numpy", "torch-geometric"):
        assert left_out_by(name) is None


def test_every_left_out_entry_says_why():
    assert all(entry.why and entry.imports for entry in requirements.GPU_STACK)


def test_the_gpu_stack_file_names_every_problem_at_once():
    text = '[[left_out]]\npattern = "x-*"\nimports = "x"\n\n[[left_out]]\nwhy = "y"\nnever = 1\n'
    with pytest.raises(PatcherError) as raised:
        requirements.read_gpu_stack(text)
    message = str(raised.value)
    assert message.startswith("gpu_stack.toml: ") and "\n" not in message
    for problem in (
        "left_out[0].imports: expected",
        "left_out[0].why: missing",
        "left_out[1].pattern: missing",
        "left_out[1].never: expected",
    ):
        assert problem in message
    with pytest.raises(PatcherError, match=r"gpu_stack\.toml: not TOML"):
        requirements.read_gpu_stack("[[left_out]\n")


def test_python_outside_requires_python_is_refused(tmp_path):
    metadata = read_metadata(fake_wheel(tmp_path, requires_python=">=3.12"))
    with pytest.raises(PatcherError, match=r"needs Python >=3\.12, this is 3\.11"):
        check_python(metadata, (3, 11))
    check_python(metadata, (3, 12))


def test_a_file_that_is_not_a_wheel_is_a_patcher_error(tmp_path):
    bogus = tmp_path / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    bogus.write_text("not a zip")
    with pytest.raises(PatcherError, match="cannot read wheel"):
        read_metadata(bogus)
