"""Generated moved and aliased gates, made from the real 0.16.0 tree (issue 38, class 1).

test_gate_moved has a handful of hand-made shapes; this generates them. Each shape takes every
``vllm/**.py`` of the real 0.16.0 release (fetched from the index, cached) and moves the
EAGLE-3 model-type check, or the proposer's image-token lookup, somewhere the release could
put it: a generic helper in another module handed the target's config, the model type or the
list; a method of ``ModelConfig``; the model type read into a local, through
``get_text_config()``, ``getattr`` with a name in pieces, or a helper that returns it; the
method's name built from strings; the lookup moved into a module under
``vllm/model_executor/models/``. Every shape still refuses Kimi (or still reads
``image_token_index`` for it), so no shape may come out ``not-needed`` or ``present``; one
that moved out of the file the codemod patches may not come out ``applied`` either. Where the
check stayed in the file, ``applied`` is allowed only if running again on the output says
``present``.

The shapes run in-process over one in-memory copy of the tree; a few go through the console
script, which must exit non-zero and write nothing.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from codemod_helpers import KIMI
from commandline import PATCHER

from patcher.codemods.base import Status, Tree
from patcher.codemods.eagle3_whitelist import Eagle3Whitelist
from patcher.codemods.mm_image_token import MmImageToken
from patcher.codemods.options import FileOptions
from patcher.sources.base import Source

pytestmark = pytest.mark.network

SPECULATIVE = "vllm/config/speculative.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
MODEL_CONFIG = "vllm/config/model.py"
GATE_START = "        eagle3_target_supported = ["
GATE_END = "        self.verify_equal_vocab_size_if_draft_model()\n        return self\n"
LIST = (
    '        eagle3_target_supported = [\n            "llama",\n            "qwen",\n'
    '            "minicpm",\n            "gpt_oss",\n        ]\n'
)
TYPE = "self.target_model_config.hf_text_config.model_type"


@dataclass(frozen=True)
class Shape:
    name: str
    changes: Mapping[str, Callable[[str | None], str]]  # path -> new text from the old
    moved: bool = True  # the refusing check is outside the file the codemod patches
    extra: Mapping[str, str] = field(default_factory=dict)


class Memory(Source):
    """The release's files with a shape's changes on top, searchable like a folder."""

    def __init__(self, base: Mapping[str, bytes], changed: Mapping[str, str]) -> None:
        self.base, self.changed = base, changed
        self._names = sorted({*base, *changed})

    def names(self) -> list[str]:
        return self._names

    def read(self, path: str) -> bytes | None:
        if path in self.changed:
            return self.changed[path].encode()
        return self.base.get(path)


def gate_replaced(body: str) -> Callable[[str | None], str]:
    """speculative.py with the EAGLE-3 check (list and ``if``) replaced by ``body``, indented
    as ``_verify_args``' statements; the list kept at its head unless ``body`` replaces it."""

    def change(text: str | None) -> str:
        assert text is not None
        start, end = text.index(GATE_START), text.index(GATE_END)
        return text[:start] + body + GATE_END + text[end + len(GATE_END) :]

    return change


def appended(code: str, imports: str = "") -> Callable[[str | None], str]:
    def change(text: str | None) -> str:
        return (imports + (text or "")).rstrip("\n") + "\n\n\n" + code

    return change


def in_model_config(method: str) -> Callable[[str | None], str]:
    """vllm/config/model.py with ``method`` added to ``ModelConfig``, after its
    ``get_vocab_size``."""

    def change(text: str | None) -> str:
        assert text is not None
        at = text.index("    def get_vocab_size(self) -> int:")
        return text[:at] + method + "\n" + text[at:]

    return change


# The pieces a moved whitelist check is made of -------------------------------------------
HELPER_MODULES = {
    "config-utils": ("vllm/config/utils.py", "vllm.config.utils"),
    "new-module": ("vllm/utils/spec_targets.py", "vllm.utils.spec_targets"),
    "models-utils": ("vllm/model_executor/models/utils.py", "vllm.model_executor.models.utils"),
    "transformers-utils": ("vllm/transformers_utils/config.py", "vllm.transformers_utils.config"),
}
EAGLE3_TESTS = {
    "literal": 'self.method == "eagle3"',
    "concatenated": 'self.method == "eagle" + "3"',
    "f-string": 'self.method == f"eagle{3}"',
    "lowered": 'self.method == "EAGLE3".lower()',
    "startswith": 'self.method.startswith("eagle")',
}
# how the helper decides, given ``mt`` (the model type) and ``allowed`` (the list)
DECISIONS = {
    "any": "    if not any(s in mt for s in allowed):\n        raise ValueError(f'{mt} refused')\n",
    "loop-guard": "    for s in allowed:\n        if s in mt:\n            return\n"
    "    raise ValueError(f'{mt} refused')\n",
    "assert": "    assert any(s in mt for s in allowed), mt\n",
    "raise-helper": "    if not any(s in mt for s in allowed):\n        _refuse(mt)\n",
    "split-membership": "    if mt.split('_')[0] not in allowed:\n        raise ValueError(mt)\n",
}
REFUSE = "\n\ndef _refuse(mt):\n    raise ValueError(f'{mt} refused')\n"
# how the helper gets the model type: (parameters, the line that binds mt, the call's args)
INPUTS = {
    "config": (
        "config, allowed",
        "    mt = config.hf_text_config.model_type\n",
        "self.target_model_config, eagle3_target_supported",
    ),
    "model-type": ("mt, allowed", "", f"{TYPE}, eagle3_target_supported"),
    "keywords": ("allowed, *, mt", "", f"allowed=eagle3_target_supported, mt={TYPE}"),
    "text-config": (
        "config, allowed",
        "    mt = config.hf_config.get_text_config().model_type\n",
        "self.target_model_config, eagle3_target_supported",
    ),
    "getattr-pieces": (
        "config, allowed",
        '    mt = getattr(config.hf_text_config, "model_" + "type")\n',
        "self.target_model_config, eagle3_target_supported",
    ),
}


def helper_shapes() -> Iterator[Shape]:
    """A generic helper in another module, handed the list and the model type (or the
    target's config), called on the EAGLE-3 path of ``_verify_args``: the check that still
    refuses Kimi is there, not in speculative.py."""
    combos = itertools.product(HELPER_MODULES.items(), INPUTS.items(), DECISIONS.items())
    for i, ((where, (path, dotted)), (given, (params, bind, args)), (how, decision)) in enumerate(
        combos
    ):
        if i % 2:  # every other combination: enough to cover each piece in each place
            continue
        test = list(EAGLE3_TESTS.values())[i % len(EAGLE3_TESTS)]
        name = f"verify_target_type_{i}"
        code = f"def {name}({params}):\n{bind}{decision}" + (
            REFUSE if "_refuse" in decision else ""
        )
        call = (
            f"{LIST}        if {test}:\n"
            f"            from {dotted} import {name}\n\n"
            f"            {name}({args})\n"
        )
        yield Shape(
            f"helper-{where}-{given}-{how}",
            {SPECULATIVE: gate_replaced(call), path: appended(code)},
        )


def other_call_shapes() -> Iterator[Shape]:
    """The same check reached in other ways: a module alias, an import at the top, a method
    of ModelConfig, a guard clause, a helper of a helper."""
    code = (
        "def allow_target(config, allowed):\n"
        "    mt = config.hf_text_config.model_type\n"
        "    if not any(s in mt for s in allowed):\n"
        "        raise ValueError(mt)\n"
    )
    utils = "vllm/config/utils.py"
    yield Shape(
        "module-alias",
        {
            SPECULATIVE: gate_replaced(
                f'{LIST}        if self.method == "eagle3":\n'
                "            from vllm.config import utils as config_utils\n\n"
                "            config_utils.allow_target(self.target_model_config, "
                "eagle3_target_supported)\n"
            ),
            utils: appended(code),
        },
    )
    yield Shape(
        "top-import",
        {
            SPECULATIVE: lambda text: gate_replaced(
                f'{LIST}        if self.method == "eagle3":\n'
                "            allow_target(self.target_model_config, eagle3_target_supported)\n"
            )(
                (text or "").replace(
                    "from vllm.config.utils import config\n",
                    "from vllm.config.utils import allow_target, config\n",
                )
            ),
            utils: appended(code),
        },
    )
    for test_name, test in EAGLE3_TESTS.items():
        yield Shape(
            f"model-config-method-{test_name}",
            {
                SPECULATIVE: gate_replaced(
                    f"{LIST}        if {test}:\n"
                    "            self.target_model_config.allow_target_type("
                    "eagle3_target_supported)\n"
                ),
                MODEL_CONFIG: in_model_config(
                    "    def allow_target_type(self, allowed):\n"
                    "        if not any(s in self.hf_text_config.model_type for s in allowed):\n"
                    "            raise ValueError(self.hf_text_config.model_type)\n"
                ),
            },
        )
    yield Shape(
        "guard-clause-then-helper",
        {
            SPECULATIVE: (
                lambda text: gate_replaced(
                    f'{LIST}        if self.method == "eagle3" and self.target_model_config:\n'
                    "            self._check_target(eagle3_target_supported)\n"
                )(text).replace(
                    "    def verify_equal_vocab_size_if_draft_model(self):",
                    "    def _check_target(self, allowed):\n"
                    "        from vllm.config.utils import allow_target\n\n"
                    "        allow_target(self.target_model_config, allowed)\n\n"
                    "    def verify_equal_vocab_size_if_draft_model(self):",
                )
            ),
            utils: appended(code),
        },
    )
    yield Shape(
        "helper-of-a-helper",
        {
            SPECULATIVE: gate_replaced(
                f'{LIST}        if self.method == "eagle3":\n'
                "            from vllm.config.utils import check_spec_target\n\n"
                "            check_spec_target(self.target_model_config, "
                "eagle3_target_supported)\n"
            ),
            utils: appended(
                "def check_spec_target(config, allowed):\n"
                "    _check_type(config.hf_text_config.model_type, allowed)\n\n\n"
                "def _check_type(mt, allowed):\n"
                "    if not any(s in mt for s in allowed):\n"
                "        raise ValueError(mt)\n"
            ),
        },
    )
    yield Shape(
        "whole-check-moved-named-in-pieces",
        {
            SPECULATIVE: gate_replaced(
                "        from vllm.utils.spec_targets import verify_spec\n\n"
                "        verify_spec(self.method, self.target_model_config)\n"
            ),
            "vllm/utils/spec_targets.py": appended(
                'SUPPORTED = ["llama", "qwen"]\n\n\n'
                "def verify_spec(method, target_model_config):\n"
                '    if method == "eagle" + "3" and not any(\n'
                "        s in target_model_config.hf_text_config.model_type for s in SUPPORTED\n"
                "    ):\n"
                "        raise ValueError('refused')\n"
            ),
        },
    )


def alias_shapes() -> Iterator[Shape]:
    """The check still in speculative.py, the model type read into a local first, or the
    method's name built from strings."""
    reads = {
        "text-config-getter": "self.target_model_config.hf_config.get_text_config().model_type",
        "getattr-pieces": 'getattr(self.target_model_config.hf_text_config, "model_" + "type")',
        "getattr": 'getattr(self.target_model_config.hf_text_config, "model_type")',
        "two-steps": None,
    }
    for (read_name, read), (test_name, test) in itertools.product(
        reads.items(), EAGLE3_TESTS.items()
    ):
        bind = (
            f"        mt = {read}\n"
            if read is not None
            else "        text_config = self.target_model_config.hf_text_config\n"
            "        mt = text_config.model_type\n"
        )
        yield Shape(
            f"alias-{read_name}-{test_name}",
            {
                SPECULATIVE: gate_replaced(
                    f"{LIST}{bind}        if {test} and not any(\n"
                    "            s in mt for s in eagle3_target_supported\n        ):\n"
                    "            raise ValueError(f'Eagle3 does not support {mt}')\n"
                )
            },
            moved=False,
        )
    helper = (
        "def target_model_type(config):\n"
        "    text_config = config.hf_text_config\n"
        "    return text_config.model_type\n"
    )
    for test_name, test in EAGLE3_TESTS.items():
        yield Shape(
            f"alias-from-a-helper-{test_name}",
            {
                SPECULATIVE: gate_replaced(
                    f"{LIST}        from vllm.transformers_utils.config import "
                    "target_model_type\n\n"
                    "        mt = target_model_type(self.target_model_config)\n"
                    f"        if {test} and not any(s in mt for s in eagle3_target_supported):\n"
                    "            raise ValueError(mt)\n"
                ),
                "vllm/transformers_utils/config.py": appended(helper),
            },
        )


def whitelist_shapes() -> list[Shape]:
    return [*helper_shapes(), *other_call_shapes(), *alias_shapes()]


# The image-token lookup ---------------------------------------------------------------------
CHAIN_START = "            if self.get_model_name(target_model) in ["
CHAIN_END = (
    "            else:\n"
    "                self.model.config.image_token_index = (\n"
    "                    target_model.config.image_token_index\n"
    "                )\n"
)
IMAGE_HELPER_MODULES = {
    "models-utils": ("vllm/model_executor/models/utils.py", "vllm.model_executor.models.utils"),
    "models-new": (
        "vllm/model_executor/models/image_tokens.py",
        "vllm.model_executor.models.image_tokens",
    ),
    "multimodal": ("vllm/multimodal/utils.py", "vllm.multimodal.utils"),
}
IMAGE_READS = {
    "attribute": "config.image_token_index",
    "getattr-pieces": 'getattr(config, "image_" + "token_index")',
    "f-string": "getattr(config, f\"image_token_{'index'}\")",
    "dict-key": 'vars(config)["image_token_index"]',
}


def chain_replaced(body: str) -> Callable[[str | None], str]:
    def change(text: str | None) -> str:
        assert text is not None
        start = text.index(CHAIN_START)
        end = text.index(CHAIN_END) + len(CHAIN_END)
        return text[:start] + body + text[end:]

    return change


def image_shapes() -> Iterator[Shape]:
    """The whole architecture chain, or only its fallback, moved into a helper elsewhere."""
    for (where, (path, dotted)), (read_name, read) in itertools.product(
        IMAGE_HELPER_MODULES.items(), IMAGE_READS.items()
    ):
        helper = (
            "def image_token_id_of(target_model, name):\n"
            "    config = target_model.config\n"
            '    if name in ["Qwen2_5_VLForConditionalGeneration"]:\n'
            "        return config.image_token_id\n"
            f"    return {read}\n"
        )
        yield Shape(
            f"image-chain-moved-{where}-{read_name}",
            {
                PROPOSER: chain_replaced(
                    f"            from {dotted} import image_token_id_of\n\n"
                    "            self.model.config.image_token_index = image_token_id_of(\n"
                    "                target_model, self.get_model_name(target_model)\n"
                    "            )\n"
                ),
                path: appended(helper),
            },
        )
    yield Shape(
        "image-fallback-moved",
        {
            PROPOSER: lambda text: (text or "").replace(
                CHAIN_END,
                "            else:\n"
                "                from vllm.model_executor.models.utils import fallback_token\n\n"
                "                self.model.config.image_token_index = fallback_token(\n"
                "                    target_model\n                )\n",
            ),
            "vllm/model_executor/models/utils.py": appended(
                "def fallback_token(target_model):\n"
                "    return target_model.config.image_token_index\n"
            ),
        },
    )


# Running them -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files_0_16(release) -> dict[str, bytes]:
    """Every Python file of the real vLLM 0.16.0 package, once for the module."""
    return python_files(release("0.16.0"))


def python_files(source: Source) -> dict[str, bytes]:
    """Every Python file of ``source``'s vllm package, read at once."""
    wanted = [n for n in source.names() if n.startswith("vllm/") and n.endswith(".py")]
    source.prefetch(wanted)
    found = {}
    for path in wanted:
        data = source.read(path)
        assert data is not None, path
        found[path] = data
    return found


def shaped(base: Mapping[str, bytes], shape: Shape) -> dict[str, str]:
    changed = {}
    for path, change in shape.changes.items():
        old = base.get(path)
        changed[path] = change(None if old is None else old.decode())
        compile(changed[path], path, "exec")
    return changed


def judge(codemod: type, base: Mapping[str, bytes], shape: Shape) -> str | None:
    """What is wrong with the codemod's outcome on ``shape``; None where it is safe."""
    changed = shaped(base, shape)
    tree = Tree(Memory(base, changed))
    outcome = codemod(KIMI, FileOptions()).run(tree)
    status = outcome.status
    if status in (Status.FAILED, Status.AMBIGUOUS):
        return None if ".py:" in outcome.detail else f"{status} without a place: {outcome.detail}"
    if status is Status.APPLIED and not shape.moved:
        output = {p: tree.text(p) or "" for p in tree.overlay}
        again = codemod(KIMI, FileOptions()).run(Tree(Memory(base, {**changed, **output})))
        if again.status is Status.PRESENT:
            return None
        return f"applied, but its output is {again.status} ({again.detail})"
    return f"{status} ({outcome.detail})"


def run_all(codemod: type, base: Mapping[str, bytes], shapes: list[Shape]) -> list[str]:
    wrong = []
    for shape in shapes:
        problem = judge(codemod, base, shape)
        if problem is not None:
            wrong.append(f"{shape.name}: {problem}")
    print(f"{len(shapes)} shapes, {len(wrong)} false claims")
    return wrong


def test_shapes_are_new_and_many():
    names = [s.name for s in whitelist_shapes()]
    assert len(names) == len(set(names)) >= 50
    images = [s.name for s in image_shapes()]
    assert len(images) == len(set(images)) >= 10


def test_a_moved_or_aliased_whitelist_gate_is_never_not_needed(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, whitelist_shapes())
    assert not wrong, "\n".join(wrong)


def test_a_moved_image_token_lookup_is_never_not_needed(files_0_16):
    wrong = run_all(MmImageToken, files_0_16, list(image_shapes()))
    assert not wrong, "\n".join(wrong)


CONSOLE = {
    "helper-config-utils-config-any": "eagle3-whitelist",
    "model-config-method-literal": "eagle3-whitelist",
    "alias-from-a-helper-concatenated": "eagle3-whitelist",
    "image-chain-moved-models-utils-attribute": "mm-image-token",
}


@pytest.fixture(scope="module")
def folder_0_16(files_0_16, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vllm-0.16.0-generated")
    for path, data in files_0_16.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


@pytest.mark.parametrize("name", list(CONSOLE))
def test_apply_writes_nothing_on_a_moved_gate(folder_0_16, files_0_16, tmp_path, name):
    """Through the console script: not-needed nowhere, a non-zero exit, nothing written."""
    shape = next(s for s in [*whitelist_shapes(), *image_shapes()] if s.name == name)
    tree = Path(shutil.copytree(folder_0_16, tmp_path / "tree"))
    for path, text in shaped(files_0_16, shape).items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    done = subprocess.run(
        [
            PATCHER,
            "apply",
            "--source",
            str(tree),
            "--vllm-version",
            "0.16.0",
            "--patchset",
            "kimi-k2.5-eagle3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    patch = CONSOLE[name]
    assert done.returncode != 0, output
    assert not re.search(rf"{patch}\s+(not-needed|present)", output), output
    assert re.search(rf"error: {patch} (failed|ambiguous): .*\.py:\d+", done.stderr), output
    assert "Traceback" not in output
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


def beside_an_accepting_gate() -> Iterator[Shape]:
    """A gate the codemod can judge, already accepting Kimi, and beside it a second check
    that refuses Kimi through what its interpreter does not follow: ``present`` would be false."""
    accepting = (
        '        eagle3_target_supported = ["llama", "kimi_k2", "deepseek_v3"]\n'
        '        if self.method == "eagle3" and not any(\n'
        f"            s in {TYPE} for s in eagle3_target_supported\n"
        "        ):\n            raise ValueError('refused')\n"
    )
    yield Shape(
        "accepting-and-helper-model-type",
        {
            SPECULATIVE: gate_replaced(
                accepting + "        from vllm.transformers_utils.config import "
                "target_model_type\n\n"
                "        mt = target_model_type(self.target_model_config)\n"
                '        if self.method == "eagle3" and not any(s in mt for s in ["llama"]):\n'
                "            raise ValueError(mt)\n"
            ),
            "vllm/transformers_utils/config.py": appended(
                "def target_model_type(config):\n    return config.hf_text_config.model_type\n"
            ),
        },
    )
    yield Shape(
        "accepting-and-helper-check",
        {
            SPECULATIVE: gate_replaced(
                accepting + '        if self.method == "eagle3":\n'
                "            from vllm.config.utils import allow_target\n\n"
                '            allow_target(self.target_model_config, ["llama"])\n'
            ),
            "vllm/config/utils.py": appended(
                "def allow_target(config, allowed):\n"
                "    if not any(s in config.hf_text_config.model_type for s in allowed):\n"
                "        raise ValueError('refused')\n"
            ),
        },
    )


def test_a_second_check_beside_an_accepting_gate_is_never_present(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, list(beside_an_accepting_gate()))
    assert not wrong, "\n".join(wrong)
