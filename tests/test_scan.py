"""``patcher scan`` and ``--write-patchset``: the scan itself on real releases (cached); the TOML
printer, the table and the page on literal findings; an unreadable registry on small wheels."""

from __future__ import annotations

import json
import subprocess

import pytest
from commandline import PATCHER
from conftest import one_error_line
from packaging.version import Version
from verify_helpers import fake_wheel

from patcher import patchset as patchsets
from patcher.cli.commands.scan import show
from patcher.cli.parser import main
from patcher.codemods.base import Verdict
from patcher.engine import run_patchset
from patcher.scan import (
    OFFICIAL_REFUSAL,
    REGISTRY,
    Backbone,
    Entry,
    Finding,
    Fit,
    Scan,
    expectations,
    markdown,
    measured_expectations,
    patchset_toml,
    totals_markdown,
)

MODELS = "vllm/model_executor/models"
GLM4_LITE = Finding(
    Entry("Glm4MoeLiteForCausalLM", "text", f"{MODELS}/glm4_moe_lite.py", "Glm4MoeLiteForCausalLM"),
    Fit.APPLIES,
    "Glm4MoeLiteModel.forward returns auxiliary hidden states",
    multimodal=False,
    defined_in=f"{MODELS}/glm4_moe_lite.py:500",
    backbone=Backbone(
        f"{MODELS}/glm4_moe_lite.py", "Glm4MoeLiteForCausalLM", "Glm4MoeLiteModel", "model"
    ),
    model_types=("glm4_moe_lite",),
    model_types_from="the module's name",
)
GEMMA3_MM = Finding(
    Entry(
        "Gemma3ForConditionalGeneration",
        "multimodal",
        f"{MODELS}/gemma3_mm.py",
        "Gemma3ForConditionalGeneration",
    ),
    Fit.NO_BACKBONE,
    "it wraps a registered language model (self.language_model = ...)",
    multimodal=True,
    image_token="config.image_token_index (fallback)",
)


def test_the_printed_patchset_loads_with_patchers_own_loader():
    text = patchset_toml(GLM4_LITE) + expectations("0.33.0")
    patchset = patchsets.parse(text.encode(), "printed")
    assert patchset.name == "glm4-moe-lite-eagle3"
    assert patchset.model.types == ("glm4_moe_lite",)
    assert patchset.model.architecture == "Glm4MoeLiteForCausalLM"
    assert patchset.patch_names == ["eagle3-whitelist", "eagle3-backbone"]
    options = patchset.patches[1].options
    assert (options.module, options.causal_lm, options.backbone, options.attribute) == (
        f"{MODELS}/glm4_moe_lite.py",
        "Glm4MoeLiteForCausalLM",
        "Glm4MoeLiteModel",
        "model",
    )
    assert [(r.module, r.class_name) for r in patchset.requires] == [
        (f"{MODELS}/glm4_moe_lite.py", "Glm4MoeLiteForCausalLM"),
        (f"{MODELS}/interfaces.py", "SupportsEagle3"),
    ]
    assert patchset.expected(Version("0.33.0")) == "needs-patch"
    assert patchset.expected(Version("0.32.0")) is None  # only what the scan measured
    # As the built-in backbone patchsets spell them; GLM-4.7-Flash has a replica recipe.
    assert patchset.local_label == "glm4moelite.eagle3"
    assert patchset.serve is not None and patchset.serve.official_refuses == OFFICIAL_REFUSAL
    assert patchset.verify == ("eagle3-backbone", "eagle3-model-type")


OLMOE = Finding(
    Entry("OlmoeForCausalLM", "text", f"{MODELS}/olmoe.py", "OlmoeForCausalLM"),
    Fit.APPLIES,
    "OlmoeModel.forward returns auxiliary hidden states",
    multimodal=False,
    backbone=Backbone(f"{MODELS}/olmoe.py", "OlmoeForCausalLM", "OlmoeModel", "model"),
    model_types=("olmoe",),
)


def test_a_class_without_a_replica_recipe_is_verified_by_the_backbone_check_alone():
    patchset = patchsets.parse((patchset_toml(OLMOE) + expectations("0.33.0")).encode(), "p")
    assert patchset.verify == ("eagle3-backbone",)
    assert patchset.local_label == "olmoe.eagle3"


def test_measured_verdicts_become_one_range_per_run_the_newest_open():
    measured = [
        ("0.14.0", Verdict.UNSUPPORTED),
        ("0.14.1", Verdict.UNSUPPORTED),
        ("0.15.0", Verdict.NEEDS_PATCH),
        ("0.33.0", Verdict.NEEDS_PATCH),
    ]
    assert measured_expectations(measured) == (
        "\n"
        "# Measured by `patcher matrix` over 4 releases, 0.14.0 to 0.33.0.\n"
        "[[expect]]\n"
        'versions = ">=0.14.0,<0.15.0"\n'
        'verdict = "unsupported"\n'
        "\n"
        "[[expect]]\n"
        'versions = ">=0.15.0"\n'
        'verdict = "needs-patch"\n'
    )


def test_the_table_is_plain_when_piped_and_keeps_vllm_code_as_text(capsys):
    finding = Finding(
        Entry("DoryForCausalLM", "text", f"{MODELS}/dory.py", "DoryForCausalLM"),
        Fit.LOOP_SHAPE,
        f"{MODELS}/dory.py:265 `for layer in self.layers[:n_in]:` [bold]",
        multimodal=False,
    )
    show(Scan("vllm 0.33.0", "0.33.0", [GLM4_LITE, GEMMA3_MM, finding]))
    shown = capsys.readouterr().out
    assert "┃" not in shown and "━" not in shown  # piped: no box
    rows = {line.split()[0]: line.split() for line in shown.splitlines() if line.strip()}
    assert rows["Glm4MoeLiteForCausalLM"][1:3] == ["text", "applies"]
    assert rows["Gemma3ForConditionalGeneration"][1:4] == [
        "multimodal",
        "no-backbone",
        "config.image_token_index",
    ]
    assert "self.layers[:n_in]:` [bold]" in shown  # vLLM's code is not Rich markup
    assert "1 applies, 1 loop-shape, 1 no-backbone" in shown


def test_the_page_names_the_architectures_one_toml_file_away():
    page = markdown([Scan("vllm 0.33.0", "0.33.0", [GLM4_LITE, OLMOE, GEMMA3_MM])])
    assert "## vllm 0.33.0" in page
    assert "3 architectures: 2 applies, 1 no-backbone." in page
    # A class a built-in patchset covers is not one TOML file away: it is none away.
    # Gemma3ForConditionalGeneration is no-backbone to the scan, yet gemma3-mm-eagle3 covers it.
    covered = (
        "Covered by a built-in patchset: `Glm4MoeLiteForCausalLM` (`glm4-moe-lite-eagle3`), "
        "`Gemma3ForConditionalGeneration` (`gemma3-mm-eagle3`)."
    )
    assert covered in page
    assert "One TOML file away: `OlmoeForCausalLM`." in page
    assert (
        "| `Glm4MoeLiteForCausalLM` | text | applies |  | Glm4MoeLiteModel.forward returns "
        "auxiliary hidden states | `glm4-moe-lite-eagle3` |"
    ) in page
    assert (
        "| `Gemma3ForConditionalGeneration` | multimodal | no-backbone | "
        "config.image_token_index (fallback) | it wraps a registered language model "
        "(self.language_model = ...) | `gemma3-mm-eagle3` |"
    ) in page


def test_a_patchset_covers_only_the_releases_it_expects_to_patch():
    """glm4-moe-lite-eagle3 expects needs-patch from 0.15.0: on an older release its class is
    one TOML file away, as far as the page can tell."""
    page = markdown([Scan("vllm 0.14.1", "0.14.1", [GLM4_LITE])])
    assert "Covered by a built-in patchset" not in page
    assert "One TOML file away: `Glm4MoeLiteForCausalLM`." in page


def test_the_matrix_summary_has_a_row_of_totals_per_release_and_the_reason_for_a_missing_one():
    scans = [
        ("0.14.1", Scan("vllm 0.14.1", "0.14.1", [GLM4_LITE, OLMOE])),
        ("0.15.0", Scan("vllm 0.15.0", "0.15.0", [GLM4_LITE, OLMOE, GEMMA3_MM])),
        ("0.7.0", "vllm 0.7.0 has no model registry (a|b)"),
    ]
    assert totals_markdown("vllm", scans) == [
        "## Architectures and EAGLE-3 on vllm (patcher scan)",
        "",
        "| release | architectures | present | applies | loop-shape | no-backbone | hybrid "
        "| unsupported | covered |",
        "|---|---|---|---|---|---|---|---|---|",
        "| 0.14.1 | 2 | 0 | 2 | 0 | 0 | 0 | 0 | 0 |",  # before glm4-moe-lite-eagle3's range
        "| 0.15.0 | 3 | 0 | 2 | 0 | 1 | 0 | 0 | 1 |",
        "| 0.7.0 | registry not read: vllm 0.7.0 has no model registry (a\\|b) "
        "|  |  |  |  |  |  |  |",
        "",
    ]


@pytest.mark.network
def test_the_matrix_markdown_ends_with_the_scan_totals_of_its_releases(tmp_path):
    table = tmp_path / "m.md"
    argv = ["matrix", "--versions", "0.14.1,0.15.0", "--patchset", "glm4-moe-lite-eagle3"]
    assert main([*argv, "--markdown", str(table)]) == 0
    text = table.read_text()
    assert text.startswith("# vLLM compatibility matrix")
    section = text.split("## Architectures and EAGLE-3 on vllm (patcher scan)\n", 1)[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| 0.")]
    assert [row[0] for row in rows] == ["| 0.14.1", "| 0.15.0"]
    for row in rows:
        counts = [int(cell.strip(" |")) for cell in row[1:]]
        assert counts[0] == sum(counts[1:-1]) > 0  # every architecture has one answer
    covered = {row[0]: int(row[-1].strip(" |")) for row in rows}
    assert covered["| 0.15.0"] == covered["| 0.14.1"] + 1  # Glm4MoeLiteForCausalLM arrives


@pytest.mark.parametrize(
    ("modules", "words"),
    [
        ({}, f"vllm 0.16.0 has no model registry ({REGISTRY})"),
        ({REGISTRY: "_TEXT_GENERATION_MODELS = {\n"}, f"cannot read its model registry {REGISTRY}"),
        (
            {REGISTRY: "_VLLM_MODELS = {}\n"},
            "no _TEXT_GENERATION_MODELS or _MULTIMODAL_MODELS dict in its model registry",
        ),
    ],
)
def test_a_registry_that_cannot_be_read_is_one_line_and_exit_2(tmp_path, capsys, modules, words):
    wheel = fake_wheel(tmp_path, modules)
    for extra in ([], ["--write-patchset", "Glm4MoeForCausalLM"]):
        assert main(["scan", "--wheel", str(wheel), *extra]) == 2
        assert words in one_error_line(capsys)


def test_write_patchset_refuses_a_class_not_in_the_registry(tmp_path, capsys):
    registry = '_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}\n'
    wheel = fake_wheel(tmp_path, {REGISTRY: registry})
    assert main(["scan", "--wheel", str(wheel), "--write-patchset", "NoSuchForCausalLM"]) == 2
    assert one_error_line(capsys) == (
        "patcher: error: NoSuchForCausalLM is not in the model registry of vllm 0.16.0 "
        "(its text-generation and multimodal sections)"
    )
    assert capsys.readouterr().out == ""


def scanned(capsys, version: str) -> dict[str, dict]:
    assert main(["scan", "--vllm", version, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    return {row["architecture"]: row for row in data["architectures"]}


@pytest.mark.network
def test_0_33_0_answers_for_the_architectures_the_issue_names(capsys):
    rows = scanned(capsys, "0.33.0")
    fits = {name: row["fit"] for name, row in rows.items()}
    for name in (
        "Glm4MoeLiteForCausalLM",
        "MixtralForCausalLM",
        "Qwen2MoeForCausalLM",
        "Gemma2ForCausalLM",
        "CohereForCausalLM",
        "InternLM2ForCausalLM",  # its backbone class is __init__'s parameter default
        "BailingMoeForCausalLM",
        "LongcatFlashForCausalLM",
        "Exaone4ForCausalLM",
        "OlmoeForCausalLM",
        "Glm4MoeForCausalLM",  # patchset glm4-moe-eagle3
        "Gemma3ForCausalLM",  # gemma3-eagle3
    ):
        assert fits[name] == "applies", rows[name]
    assert fits["JambaForCausalLM"] == "hybrid"
    assert "IsHybrid" in rows["JambaForCausalLM"]["detail"]
    for name in (
        "Gemma3ForConditionalGeneration",
        "Glm4vMoeForConditionalGeneration",
        "KimiVLForConditionalGeneration",
    ):
        assert fits[name] == "no-backbone", rows[name]
        assert "init_vllm_registered_model" in rows[name]["detail"]
        assert rows[name]["image_token"] == "config.image_token_index (fallback)"
    assert rows["LlamaForCausalLM"]["present"] and fits["DeepseekV3ForCausalLM"] == "present"
    kimi = rows["KimiK25ForConditionalGeneration"]
    assert kimi["present"] and kimi["multimodal"]
    assert kimi["image_token"] == "config.media_placeholder_token_id (named)"
    # Orion's and Step-3.5's layers add their own residual and return one tensor (c090281)
    for name in ("OrionForCausalLM", "Step3p5ForCausalLM", "BailingMoeV2ForCausalLM"):
        assert fits[name] == "applies", rows[name]
    loop = rows["IQuestLoopCoderForCausalLM"]  # the nearest loop, with file and line
    assert loop["fit"] == "loop-shape"
    where = f"nearest candidate: {MODELS}/iquest_loopcoder.py:452 "
    assert f"{where}`for loop_idx in range(self.loop_num):`" in loop["detail"]
    # Its config class is imported under ``if TYPE_CHECKING:`` (read there too).
    assert "(Glm4MoeLiteConfig)" in rows["Glm4MoeLiteForCausalLM"]["model_types_from"]
    assert rows["Glm4MoeLiteForCausalLM"]["backbone"] == {
        "module": f"{MODELS}/glm4_moe_lite.py",
        "causal_lm": "Glm4MoeLiteForCausalLM",
        "backbone": "Glm4MoeLiteModel",
        "attribute": "model",
    }


@pytest.mark.parametrize("name", ["Glm4MoeLiteForCausalLM", "MixtralForCausalLM"])
@pytest.mark.network
def test_the_written_patchset_passed_by_path_gives_a_needs_patch_diff(
    tmp_path, capsys, release, name
):
    assert main(["scan", "--vllm", "0.33.0", "--write-patchset", name]) == 0
    path = tmp_path / "proposed.toml"
    path.write_text(capsys.readouterr().out)
    patchset = patchsets.load(str(path))
    result = run_patchset(patchset, release("0.33.0"))
    assert result.verdict == "needs-patch" and not result.drift, result.outcomes
    assert main(["diff", "--vllm", "0.33.0", "--patchset", str(path)]) == 0
    diff = capsys.readouterr().out
    module = patchset.patches[-1].options.module
    assert f"+++ b/{module}" in diff
    assert "SupportsEagle3" in diff and "_maybe_add_hidden_state" in diff


@pytest.mark.network
def test_write_patchset_since_measures_its_ranges_as_the_built_in_patchset_expects(capsys):
    argv = ["scan", "--vllm", "0.33.0", "--write-patchset", "Glm4MoeLiteForCausalLM"]
    assert main([*argv, "--since", "0.14.0"]) == 0
    written = patchsets.parse(capsys.readouterr().out.encode(), "written")
    built_in = patchsets.load("glm4-moe-lite-eagle3")
    assert [(sorted(str(e.versions).split(",")), e.verdict) for e in written.expectations] == [
        (["<0.15.0", ">=0.14.0"], "unsupported"),
        ([">=0.15.0"], "needs-patch"),
    ]
    for version in ("0.14.0", "0.14.1", "0.15.0", "0.21.0", "0.33.0"):
        assert written.expected(Version(version)) == built_in.expected(Version(version))
    assert written.patches == built_in.patches and written.serve == built_in.serve
    assert (written.local_label, written.verify) == (built_in.local_label, built_in.verify)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("JambaForCausalLM", "(hybrid): a hybrid or recurrent layer stack"),
        ("LlamaForCausalLM", "(present): LlamaForCausalLM implements SupportsEagle3"),
        ("IQuestLoopCoderForCausalLM", f"(loop-shape): {MODELS}/iquest_loopcoder.py: expected"),
        ("Gemma3ForConditionalGeneration", "(no-backbone): it wraps a registered language model"),
        ("NoSuchForCausalLM", "NoSuchForCausalLM is not in the model registry of vllm 0.33.0"),
    ],
)
@pytest.mark.network
def test_write_patchset_refuses_what_the_codemod_cannot_patch_with_the_scans_reason(
    capsys, name, reason
):
    assert main(["scan", "--vllm", "0.33.0", "--write-patchset", name]) == 2
    assert reason in one_error_line(capsys)
    assert capsys.readouterr().out == ""


@pytest.mark.network
def test_the_console_script_prints_a_plain_table_when_piped():
    done = subprocess.run(
        [PATCHER, "scan", "--vllm", "0.33.0"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("EAGLE-3 across the model registry of vllm 0.33.0")
    row = next(line for line in lines if line.split()[:1] == ["MixtralForCausalLM"])
    assert row.split()[1:3] == ["text", "applies"]
    assert "━" not in done.stdout


LLAMA_WHEEL = {
    REGISTRY: '_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}\n',
    f"{MODELS}/interfaces.py": "class SupportsEagle3(Protocol):\n    pass\n",
    f"{MODELS}/llama.py": (
        "from .interfaces import SupportsEagle3\n\n\n"
        "class LlamaForCausalLM(nn.Module, SupportsEagle3):\n    pass\n"
    ),
}


def test_a_stored_scan_is_used_and_a_garbled_one_is_recomputed(tmp_path, monkeypatch):
    from patcher import scan as scans
    from patcher.sources.wheel import WheelSource

    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    wheel = fake_wheel(tmp_path, LLAMA_WHEEL)
    with WheelSource(wheel) as source:
        first = scans.scan(source).to_json()
    assert first["totals"]["present"] == 1
    (stored,) = (tmp_path / "cache" / "checked" / "scans").glob("*.json")
    read_registry = scans.read_registry

    def unread(source):
        raise AssertionError("the registry was read again")

    monkeypatch.setattr(scans, "read_registry", unread)
    with WheelSource(wheel) as source:
        assert scans.scan(source).to_json() == first  # from the store, not read again
    garbled = stored.read_bytes().replace(b'"fit": "present"', b'"fit": "applies"')
    assert garbled != stored.read_bytes()
    stored.write_bytes(garbled)
    monkeypatch.setattr(scans, "read_registry", read_registry)
    with WheelSource(wheel) as source:
        assert scans.scan(source).to_json() == first  # not whole: recomputed
