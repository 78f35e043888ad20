"""The noxfile's verify lists agree with the matrix, so no needs-patch release goes unverified."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest
from backbones import backbone_patchsets

from patcher import patchset as patchsets
from patcher.matrix import build_matrix, select_releases

pytestmark = pytest.mark.network


@functools.cache
def noxfile():
    """The noxfile, loaded once: nox refuses a session registered twice."""
    spec = importlib.util.spec_from_file_location(
        "noxfile", Path(__file__).parent.parent / "noxfile.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def needs_patch(index, name: str) -> list[str]:
    patchset = patchsets.load(name)
    rows = build_matrix([patchset], index, select_releases(index, None, "0.8.0"), "x86_64")
    return [str(r.version) for r in rows[patchset.name] if r.verdict == "needs-patch"]


def test_verify_covers_every_needs_patch_release_and_the_upstream_reference(index):
    assert [*needs_patch(index, "kimi-k2.5-eagle3"), "0.18.0"] == noxfile().VERIFY_RELEASES


def test_verify_mla_covers_the_first_and_newest_affected_release(index):
    affected = needs_patch(index, "kimi-k2.5-eagle3-mla")
    assert [affected[0], affected[-1]] == noxfile().VERIFY_MLA_RELEASES


def test_verify_aux_ids_v2_covers_the_first_and_newest_affected_release(index):
    affected = needs_patch(index, "eagle3-aux-ids-v2")
    assert [affected[0], affected[-1]] == noxfile().VERIFY_AUX_IDS_V2_RELEASES


def test_verify_models_covers_every_backbone_patchset_on_a_needs_patch_release(index):
    backbones = backbone_patchsets()
    assert sorted(noxfile().VERIFY_MODEL_PATCHSETS) == sorted(backbones)
    for name in backbones:
        assert set(noxfile().VERIFY_MODELS_RELEASES) <= set(needs_patch(index, name))


def test_serve_cpu_serves_patchsets_with_a_replica_that_need_a_patch_on_those_releases(cpu_index):
    """Each serve-cpu session has an official wheel that refuses and a patch to build."""
    from patcher.replica.spec import known

    nox_module = noxfile()
    releases = select_releases(cpu_index, nox_module.SERVE_CPU_RELEASES, None)
    for name in nox_module.SERVE_CPU_PATCHSETS:
        patchset = patchsets.load(name)
        assert patchset.model.architecture in known()
        rows = build_matrix([patchset], cpu_index, releases, "x86_64")[name]
        assert {str(r.version): r.verdict for r in rows} == dict.fromkeys(
            nox_module.SERVE_CPU_RELEASES, "needs-patch"
        )


def test_serve_cpu_serves_kimi_k25_where_it_needs_its_patch_on_the_harness(cpu_index):
    """Kimi-K2.5's sessions: needs-patch for the patchset, and for the harness under it."""
    nox_module = noxfile()
    releases = select_releases(cpu_index, nox_module.SERVE_CPU_KIMI_RELEASES, None)
    kimi, harness = patchsets.load("kimi-k2.5-eagle3"), patchsets.load("cpu-eagle-backport")
    rows = build_matrix([kimi, harness], cpu_index, releases, "x86_64")
    for patchset in (kimi, harness):
        verdicts = {str(r.version): r.verdict for r in rows[patchset.name]}
        assert verdicts == dict.fromkeys(nox_module.SERVE_CPU_KIMI_RELEASES, "needs-patch")
    sessions = set(nox_module.SERVE_CPU_SESSIONS)
    assert {(v, "kimi-k2.5-eagle3") for v in nox_module.SERVE_CPU_KIMI_RELEASES} <= sessions
