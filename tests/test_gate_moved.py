"""A gate that moved is drift, not ``not-needed``: the shapes of issue 22, made from real 0.16.0.

Each test starts from every ``vllm/**.py`` of the real 0.16.0 release, fetched from the index
(cached), changes one thing the way a fork or a later release could, and runs the installed
``patcher apply --source``. Where the barrier is still in the tree, apply must say ``failed``
at its file and line and write nothing; where it is really gone, ``not-needed``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from commandline import PATCHER
from test_apply_installed import state, synthetic

pytestmark = pytest.mark.network

SPECULATIVE = "vllm/config/speculative.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
GATE_TEST = 'self.method == "eagle3"\n            and self.target_model_config'
GATE_RAISE = (
    "            raise ValueError(\n"
    '                f"Eagle3 is only supported for {eagle3_target_supported} models. "'
    "  # noqa: E501\n"
    '                f"Got {self.target_model_config.hf_text_config.model_type=}"\n'
    "            )\n"
)
IMAGE_TOKEN_FALLBACK = (
    "self.model.config.image_token_index = (\n"
    "                    target_model.config.image_token_index\n"
)


@pytest.fixture(scope="module")
def whole_0_16(release, tmp_path_factory) -> Path:
    """Every Python file of the real vLLM 0.16.0 package, read from the index by range."""
    source = release("0.16.0")
    wanted = [n for n in source.names() if n.startswith("vllm/") and n.endswith(".py")]
    source.prefetch(wanted)
    root = tmp_path_factory.mktemp("vllm-0.16.0-whole")
    for path in wanted:
        data = source.read(path)
        assert data is not None, path
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


@pytest.fixture
def tree(whole_0_16, tmp_path) -> Path:
    return Path(shutil.copytree(whole_0_16, tmp_path / "vllm-tree", symlinks=True))


def edit(tree: Path, path: str, old: str, new: str) -> None:
    """Replace ``old``, which the real release has exactly once, with ``new``."""
    file = tree / path
    text = file.read_text()
    assert text.count(old) == 1, f"{path} no longer has {old!r}"
    file.write_text(text.replace(old, new))


def files(tree: Path) -> dict[str, bytes | str]:
    """Every file's bytes, and every symlink's target."""
    return {
        str(p.relative_to(tree)): (str(p.readlink()) if p.is_symlink() else p.read_bytes())
        for p in tree.rglob("*")
        if p.is_symlink() or p.is_file()
    }


def apply(tree: Path, patchset: str = "kimi-k2.5-eagle3") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            PATCHER,
            "apply",
            "--source",
            str(tree),
            "--vllm-version",
            "0.16.0",
            "--patchset",
            patchset,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


def renamed(tree: Path) -> str:
    (tree / SPECULATIVE).rename(tree / "vllm/config/speculative_config.py")
    return r"vllm/config/speculative_config\.py:698"


def against_a_constant(tree: Path) -> str:
    edit(tree, SPECULATIVE, GATE_TEST, GATE_TEST.replace('"eagle3"', "EAGLE3"))
    edit(tree, SPECULATIVE, "\nlogger = ", '\nEAGLE3 = "eagle3"\nlogger = ')
    return rf"{SPECULATIVE}:\d+"


def raise_in_a_helper(tree: Path) -> str:
    edit(tree, SPECULATIVE, GATE_RAISE, "            _refuse_target(self.target_model_config)\n")
    with (tree / SPECULATIVE).open("a") as module:
        module.write(
            "\n\ndef _refuse_target(target):\n"
            '    raise ValueError(f"Eagle3 does not support {target.hf_text_config.model_type}")\n'
        )
    return rf"{SPECULATIVE}:698"


def image_token_by_getattr(tree: Path) -> str:
    edit(
        tree,
        PROPOSER,
        IMAGE_TOKEN_FALLBACK,
        IMAGE_TOKEN_FALLBACK.replace(
            "target_model.config.image_token_index",
            'getattr(target_model.config, "image_token_index")',
        ),
    )
    return rf"{PROPOSER}:\d+"


def emptied(tree: Path) -> str:
    (tree / SPECULATIVE).write_bytes(b"")
    return rf"{SPECULATIVE}:1"


def dangling_symlink(tree: Path) -> str:
    (tree / SPECULATIVE).unlink()
    (tree / SPECULATIVE).symlink_to("speculative-gone.py")
    return re.escape(SPECULATIVE)


MODELS = "vllm/model_executor/models"


def wrapper_module_renamed(tree: Path) -> str:
    """The class every patch of kimi-k2.5-eagle3 requires, in a module of another name."""
    (tree / MODELS / "kimi_k25.py").rename(tree / MODELS / "kimi_k2_5.py")
    return rf"{MODELS}/kimi_k2_5\.py:309: class KimiK25ForConditionalGeneration is here"


def text_module_renamed(tree: Path) -> str:
    (tree / MODELS / "deepseek_v2.py").rename(tree / MODELS / "deepseek.py")
    return rf"{MODELS}/deepseek\.py:\d+: class DeepseekV2ForCausalLM is here"


def backbone_class_moved(tree: Path) -> str:
    """glm4-moe-eagle3's backbone class moved out of the module the patchset names."""
    module = tree / MODELS / "glm4_moe.py"
    text = module.read_text()
    start = text.index("class Glm4MoeModel(")
    end = text.index("\nclass ", start) + 1
    module.write_text(text[:start] + text[end:])
    (tree / MODELS / "glm4_moe_model.py").write_text(text[start:end])
    return rf"{MODELS}/glm4_moe_model\.py:1: class Glm4MoeModel is here"


@pytest.mark.parametrize(
    ("shape", "patch", "patchset"),
    [
        (wrapper_module_renamed, "eagle3-whitelist", "kimi-k2.5-eagle3"),
        (text_module_renamed, "eagle3-interface", "kimi-k2.5-eagle3"),
        (backbone_class_moved, "eagle3-backbone", "glm4-moe-eagle3"),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_a_class_in_another_module_is_failed_not_unsupported(tree, shape, patch, patchset):
    """A class a patchset names, not where it says: moved, not missing from the release."""
    where = shape(tree)
    before = files(tree)
    done = apply(tree, patchset)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert not re.search(rf"{patch}\s+unsupported", output), output
    assert re.search(rf"error: {patch} failed: {where}", done.stderr), output
    assert files(tree) == before


@pytest.mark.parametrize(
    ("shape", "patch"),
    [
        (renamed, "eagle3-whitelist"),
        (image_token_by_getattr, "mm-image-token"),
        (emptied, "eagle3-whitelist"),
        (dangling_symlink, "eagle3-whitelist"),
    ],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_a_gate_still_in_the_tree_fails_at_its_line_and_nothing_is_written(tree, shape, patch):
    where = shape(tree)
    before = files(tree)
    done = apply(tree)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "patched" not in done.stdout, output
    assert not re.search(rf"{patch}\s+not-needed", output), output
    assert re.search(rf"error: {patch} failed: {where}", done.stderr), output
    assert "Traceback" not in output
    assert files(tree) == before


@pytest.mark.parametrize("shape", [against_a_constant, raise_in_a_helper], ids=lambda f: f.__name__)
def test_a_gate_of_another_shape_is_decided_by_meaning(tree, shape):
    """``self.method == EAGLE3`` with ``EAGLE3 = "eagle3"`` at module level, or the raise in a
    helper of the same module, is the same check: patched, and shown as the decision it changed
    (issue 28); test_gate_truth has a helper from another module, which is failed."""
    shape(tree)
    done = apply(tree)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert re.search(
        r"eagle3-whitelist\s+applied\s+.*kimi_k2, deepseek_v3 rejected -> accepted", output
    )


def test_a_gate_really_gone_is_still_not_needed(tree):
    """The whole check removed: the search finds nothing elsewhere in the release, and the
    other patches apply (the proposer's bare-backbone read is gone since 0.16.0 too)."""
    text = (tree / SPECULATIVE).read_text()
    start = text.index("        if (\n            " + GATE_TEST)
    end = text.index(GATE_RAISE) + len(GATE_RAISE)
    (tree / SPECULATIVE).write_text(text[:start] + text[end:])
    done = apply(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"eagle3-whitelist\s+not-needed", done.stderr), done.stderr
    assert re.search(r"eagle-target-backbone\s+not-needed", done.stderr), done.stderr
    assert "patched 3 file(s)" in done.stdout


def test_installed_file_without_its_record_row_is_not_a_gate_gone(tmp_path, release):
    """A synthetic 0.16.0 installation whose RECORD lost the row of the gate's module: the file
    is on disk, so the gate is there, and a file RECORD does not list cannot be patched."""
    python = synthetic(tmp_path, release, "0.16.0")
    record = next((tmp_path / "site").glob("vllm-0.16.0.dist-info")) / "RECORD"
    rows = record.read_text().splitlines(keepends=True)
    record.write_text("".join(r for r in rows if not r.startswith(f"{SPECULATIVE},")))
    before = state(tmp_path / "site")
    done = subprocess.run(
        [PATCHER, "apply", "--installed", "--python", str(python)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert not re.search(r"eagle3-whitelist\s+not-needed", output), output
    assert f"error: {SPECULATIVE} is not listed in {record}" in done.stderr, output
    assert state(tmp_path / "site") == before


def test_a_second_gate_in_the_proposer_is_ambiguous_and_nothing_is_written(tree):
    """The check copied into the proposer module beside the real one (issue 28): the first is
    patchable, but apply must not say applied while the copy still refuses Kimi."""
    with (tree / PROPOSER).open("a") as module:
        module.write(
            "\n\ndef check_eagle3_target(method, target_model):\n"
            '    if method != "eagle3":\n        return\n'
            '    if not any(s in target_model.config.model_type for s in ["llama"]):\n'
            '        raise ValueError("Eagle3 is not supported for this target")\n'
        )
    before = files(tree)
    done = apply(tree)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert re.search(rf"error: eagle3-whitelist ambiguous: .*{PROPOSER}:\d+", done.stderr), output
    assert SPECULATIVE in done.stderr
    assert "Traceback" not in output
    assert files(tree) == before
