"""Patchset files: every wrong type, missing key and unknown key is one line naming the file and
the key, all of a file's problems at once, before anything is fetched."""

from __future__ import annotations

from pathlib import Path

import pytest
from backbones import backbone_patchsets

from patcher import patchset as patchsets
from patcher.cli.parser import main
from patcher.codemods.base import FileOptions
from patcher.codemods.eagle3_interface import InterfaceOptions
from patcher.errors import PatcherError

BUILTIN = (patchsets.builtin_dir() / "kimi-k2.5-eagle3.toml").read_text()


def edited(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    text = BUILTIN
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "edited.toml"
    path.write_text(text)
    return path


def error_lines(capsys) -> list[str]:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("patcher: error: ") for line in err), err
    return [line.removeprefix("patcher: error: ") for line in err]


def test_the_builtin_patchsets_read_into_each_codemods_options():
    patchset = patchsets.load("kimi-k2.5-eagle3")
    assert patchset.model.types == ("kimi_k2", "deepseek_v3")
    options = [p.options for p in patchset.patches]
    assert options[0] == FileOptions() and options[1] == FileOptions()
    assert options[2] == InterfaceOptions(
        text_module="vllm/model_executor/models/deepseek_v2.py",
        text_class="DeepseekV2ForCausalLM",
        backbone_class="DeepseekV2Model",
        backbone_attribute="model",
        wrapper_module="vllm/model_executor/models/kimi_k25.py",
        wrapper_class="KimiK25ForConditionalGeneration",
        wrapper_attribute="language_model",
    )
    for name in patchsets.available():
        patchsets.load(name)


@pytest.mark.parametrize(
    ("replacement", "line"),
    [
        (
            ('types = ["kimi_k2", "deepseek_v3"]', 'types = "kimi_k2"'),
            "model.types: expected a list of strings, got the string 'kimi_k2'",
        ),
        (('types = ["kimi_k2", "deepseek_v3"]', "types = 5"), "model.types: expected a list"),
        (('types = ["kimi_k2", "deepseek_v3"]', "types = []"), "model: types: expected at least"),
        (
            ('text_class = "DeepseekV2ForCausalLM"', "text_class = 42"),
            "patches[2].text_class: expected a string, got the number 42",
        ),
        (('name = "kimi-k2.5-eagle3"', "name = 5"), "name: expected a string, got the number 5"),
        (
            ('versions = "<0.15.0"', "versions = 15"),
            "expect[0].versions: expected a string, got the number 15",
        ),
        (
            ('versions = "<0.15.0"', 'versions = "soon"'),
            "expect[0].versions: 'soon' is not a version specifier",
        ),
        (('verdict = "unsupported"', 'verdict = "fine"'), "expect[0].verdict: 'fine' is not one"),
        (
            ('text_module = "vllm/model_executor/models/deepseek_v2.py"\n', ""),
            "patches[2].text_module: missing",
        ),
        (('codemod = "mm-image-token"', 'codemod = "mm-image-token"\ntypo = 1'), "patches[1].typo"),
        (
            ('wrapper_class = "KimiK25ForConditionalGeneration"\n', ""),
            "patches[2]: wrapper_module and",
        ),
        (
            ('codemod = "mm-image-token"', 'codemod = "mm-image"'),
            "patches[1].codemod: 'mm-image' is",
        ),
        (('name = "kimi-k2.5-eagle3"', 'nmae = "x"'), "nmae: unknown key"),
        (
            ('codemod = "mm-image-token"', 'codemod = "eagle3-whitelist"'),
            "patches[1].codemod: eagle3",
        ),
        (('verify = ["speculative-config"', 'verify = ["speculative"'), "verify[0]: 'speculative'"),
        (("[[requires]]\nmodule", "[[requires]]\nmodul"), "requires[0].modul: unknown key"),
        # codemods write these into code: a quote or a space would write broken or foreign code
        (
            ('types = ["kimi_k2", "deepseek_v3"]', 'types = ["kimi_k2", \'kimi", "x\']'),
            "model.types[1]: 'kimi\", \"x' is not a model type",
        ),
        (
            ('backbone_attribute = "model"', 'backbone_attribute = "model; import os"'),
            "patches[2].backbone_attribute: 'model; import os' is not a Python identifier",
        ),
        (
            ('wrapper_attribute = "language_model"', 'wrapper_attribute = "class"'),
            "patches[2].wrapper_attribute: 'class' is not a Python identifier",
        ),
        (
            (
                'image_token_attribute = "media_placeholder_token_id"',
                'image_token_attribute = "a b"',
            ),
            "model.image_token_attribute: 'a b' is not a Python identifier",
        ),
        (
            ('text_class = "DeepseekV2ForCausalLM"', 'text_class = "Deepseek V2"'),
            "patches[2].text_class: 'Deepseek V2' is not a Python identifier",
        ),
        # a module outside the tree would be read, and rewritten by apply, wherever it is
        (
            (
                'text_module = "vllm/model_executor/models/deepseek_v2.py"',
                'text_module = "../outside/deepseek_v2.py"',
            ),
            "patches[2].text_module: '../outside/deepseek_v2.py' is not a .py path inside the tree",
        ),
        (
            (
                'module = "vllm/model_executor/models/kimi_k25.py"',
                'module = "/etc/kimi_k25.py"',
            ),
            "requires[0].module: '/etc/kimi_k25.py' is not a .py path inside the tree",
        ),
    ],
)
def test_each_problem_is_one_line_naming_the_file_and_the_key(tmp_path, capsys, replacement, line):
    path = edited(tmp_path, replacement)
    assert main(["diff", "--vllm", "0.16.0", "--patchset", str(path)]) == 2
    lines = error_lines(capsys)
    assert any(found.startswith(f"{path}: {line}") for found in lines), lines


@pytest.mark.parametrize(
    ("patches", "line"),
    [
        ('patches = "x"', "patches: expected a list of tables"),
        ("", "patches: missing"),
        ("patches = [5]", "patches[0]: expected a table"),
        ("patches = [{}]", "patches[0].codemod: missing"),
    ],
)
def test_patches_that_are_not_a_list_of_codemod_tables(tmp_path, capsys, patches, line):
    path = tmp_path / "small.toml"
    path.write_text(f'name = "small"\n{patches}\n\n[model]\ntypes = ["kimi_k2"]\n')
    assert main(["diff", "--vllm", "0.16.0", "--patchset", str(path)]) == 2
    assert error_lines(capsys)[0].startswith(f"{path}: {line}")


def test_every_problem_of_a_file_is_reported_at_once(tmp_path, capsys):
    path = edited(
        tmp_path,
        ('name = "kimi-k2.5-eagle3"', "name = 5"),
        ('types = ["kimi_k2", "deepseek_v3"]', 'types = "kimi_k2"'),
        ('text_class = "DeepseekV2ForCausalLM"', "text_class = 42"),
        ('codemod = "mm-image-token"', 'codemod = "mm-image-token"\nfiles = "eagle.py"'),
    )
    assert main(["diff", "--vllm", "0.16.0", "--patchset", str(path)]) == 2
    assert error_lines(capsys) == [
        f"{path}: name: expected a string, got the number 5",
        f"{path}: model.types: expected a list of strings, got the string 'kimi_k2'",
        f"{path}: patches[1].files: expected a list of strings, got the string 'eagle.py'",
        f"{path}: patches[2].text_class: expected a string, got the number 42",
    ]


def test_a_files_override_is_read_as_globs(tmp_path):
    path = edited(
        tmp_path,
        ('codemod = "eagle3-whitelist"', 'codemod = "eagle3-whitelist"\nfiles = ["vllm/x/*.py"]'),
    )
    whitelist = patchsets.load(str(path)).codemods()[0]
    assert whitelist.paths(["vllm/x/spec.py", "vllm/config/speculative.py"]) == ["vllm/x/spec.py"]


def test_a_patchset_that_is_not_a_readable_file(tmp_path):
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    with pytest.raises(PatcherError, match="cannot read"):
        patchsets.load(str(folder))


IMAGE_TOKEN_FIRST = {"glm4v-moe-eagle3": "object has no attribute 'image_token_index'"}
"""Where the official wheel dies on the proposer's image token before the interface is asked."""


def test_the_backbone_patchsets_expect_the_official_wheel_to_refuse_in_vllms_words():
    for name in backbone_patchsets():
        serve = patchsets.load(name).serve
        words = IMAGE_TOKEN_FIRST.get(name, "does not support EAGLE3")
        assert serve is not None and words in serve.official_refuses
    assert patchsets.load("kimi-k2.5-eagle3-mla").serve is None  # the official wheel serves it


@pytest.mark.parametrize(
    ("table", "line"),
    [
        ("[serve]\nofficial_refuses = 3\n", "serve.official_refuses: expected a string"),
        ('[serve]\nofficial_refuses = ""\n', "serve.official_refuses: expected a non-empty"),
        ("[serve]\n", "serve.official_refuses: missing"),
        ('[serve]\nofficial = "x"\n', "serve.official: unknown key"),
    ],
)
def test_a_serve_table_that_is_wrong_is_one_line(table, line):
    text = 'name = "small"\npatches = []\n\n[model]\ntypes = ["glm4_moe"]\n\n' + table
    with pytest.raises(PatcherError) as error:
        patchsets.parse(text.encode(), "small.toml")
    assert any(found.startswith(f"small.toml: {line}") for found in str(error.value).splitlines())


@pytest.mark.parametrize(
    ("table", "line"),
    [
        ('[sessions]\nverfy = ["0.16.0"]\n', "sessions.verfy: unknown key"),
        ('[sessions]\nverify = "0.16.0"\n', "sessions.verify: expected a list of"),
        (
            '[sessions]\nserve-cpu = ["latest"]\n',
            "sessions.serve-cpu[0]: 'latest' is not a release",
        ),
    ],
)
def test_a_sessions_table_that_is_wrong_is_one_line(table, line):
    """noxfile.py reads [sessions] without patcher; patcher is what refuses a wrong one."""
    text = 'name = "small"\npatches = []\n\n[model]\ntypes = ["glm4_moe"]\n\n' + table
    with pytest.raises(PatcherError) as error:
        patchsets.parse(text.encode(), "small.toml")
    assert any(found.startswith(f"small.toml: {line}") for found in str(error.value).splitlines())


SMALL = '{head}\npatches = [{{ codemod = "eagle3-whitelist" }}]\n\n[model]\ntypes = ["kimi_k2"]\n'


@pytest.mark.parametrize(
    ("head", "line"),
    [
        ('name = "../../../outside/x"', "name: '../../../outside/x' is not letters and digits"),
        ('name = "a b"', "name: 'a b' is not letters"),
        ('name = "a/b"', "name: 'a/b' is not letters"),
        ('name = "a..b"', "name: 'a..b' is not letters"),
        ('name = "small"\nlocal_label = "a/../b c;rm"', "local_label: 'a/../b c;rm' is not"),
        ('name = "small-.x"', "name: 'small-.x' is not"),
        # nested past what Python's TOML reader follows: one line, not a RecursionError
        ('name = "small"\nx = ' + "[" * 100_000 + "]" * 100_000, "not a TOML patchset"),
    ],
)
def test_a_name_or_label_that_is_not_a_plain_token_is_refused(tmp_path, capsys, head, line):
    """A patchset's name is a folder of the proofs' cache and part of file names, its label a
    wheel's local version (second hostile pass: both were taken as given, exit 0)."""
    path = tmp_path / "small.toml"
    path.write_text(SMALL.format(head=head))
    assert main(["diff", "--vllm", "0.16.0", "--patchset", str(path)]) == 2
    assert line in error_lines(capsys)[0]
