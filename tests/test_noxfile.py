"""The sessions the patchsets declare agree with the matrix, so no needs-patch release goes
unverified and no session proves a release that needs nothing."""

from __future__ import annotations

import functools
import importlib.util
from collections import defaultdict
from pathlib import Path

import pytest
from backbones import backbone_patchsets

from patcher import patchset as patchsets
from patcher.matrix import build_matrix, select_releases

pytestmark = [pytest.mark.network, pytest.mark.heavy]
"""Heavy: each builds the matrix of its patchsets over every release since 0.8.0 (1,640 s of a
cold CI's worker time on 2026-12-07); run by ``nox -s tests -- -m heavy``."""


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


def needs_patch(index, name: str, versions: list[str] | None = None) -> list[str]:
    """The releases since 0.8.0 (or of versions) that the matrix says need this patchset."""
    patchset = patchsets.load(name)
    releases = select_releases(index, versions, None if versions else "0.8.0")
    rows = build_matrix([patchset], index, releases, "x86_64")
    return [str(r.version) for r in rows[patchset.name] if r.verdict == "needs-patch"]


def by_patchset(session: str) -> dict[str, list[str]]:
    releases: dict[str, list[str]] = defaultdict(list)
    for vllm, patchset in noxfile().declared(session):
        releases[patchset].append(vllm)
    return dict(releases)


def test_verify_covers_every_needs_patch_release_and_the_upstream_reference(index):
    assert (
        dict.fromkeys([*needs_patch(index, "kimi-k2.5-eagle3"), "0.18.0"], "kimi-k2.5-eagle3")
        == noxfile().VERIFY
    )


def test_verify_mla_covers_the_first_and_newest_affected_release(index):
    affected = needs_patch(index, "kimi-k2.5-eagle3-mla")
    assert (
        dict.fromkeys([affected[0], affected[-1]], "kimi-k2.5-eagle3-mla") == noxfile().VERIFY_MLA
    )


def test_verify_aux_ids_v2_covers_the_first_and_newest_affected_release(index):
    affected = needs_patch(index, "eagle3-aux-ids-v2")
    assert (
        dict.fromkeys([affected[0], affected[-1]], "eagle3-aux-ids-v2")
        == noxfile().VERIFY_AUX_IDS_V2
    )


def test_verify_pp_covers_the_first_and_newest_affected_release_and_0_33_0(index):
    affected = needs_patch(index, "deepseek-pp-eagle3")
    assert affected[0] == "0.30.0"
    assert (
        dict.fromkeys([affected[0], "0.33.0", affected[-1]], "deepseek-pp-eagle3")
        == noxfile().VERIFY_PP
    )


NOT_VERIFIED = {
    "ling2-eagle3": "BailingMoeModel calls its layers (hidden_states, position_ids, residual)",
    "step3p5-eagle3": "Step3p5Model's layers take (positions, hidden_states) and return one",
}
"""Backbone patchsets with no verify-models session: patcher verify's stand-in layers are called
(positions, hidden_states, residual) and return the pair, which these backbones do not do."""


def test_verify_models_covers_every_backbone_patchset_on_a_needs_patch_release(index):
    declared = by_patchset("verify-models")
    assert sorted(declared) == sorted(set(backbone_patchsets()) - set(NOT_VERIFIED))
    for name, releases in declared.items():
        # only the declared releases are settled: each must need its patchset (cold, settling
        # every release since 0.8.0 for ten patchsets took 887 s of CI)
        assert sorted(needs_patch(index, name, releases)) == sorted(releases), name


def test_serve_cpu_serves_patchsets_with_a_replica_that_need_a_patch_on_those_releases(cpu_index):
    """Each serve-cpu session has an official wheel that refuses and a patch to build."""
    from patcher.replica.spec import known

    for name, versions in by_patchset("serve-cpu").items():
        patchset = patchsets.load(name)
        assert patchset.model.architecture in known()
        rows = build_matrix(
            [patchset], cpu_index, select_releases(cpu_index, versions, None), "x86_64"
        )
        assert {str(r.version): r.verdict for r in rows[name]} == dict.fromkeys(
            versions, "needs-patch"
        )


def test_serve_cpu_serves_kimi_k25_where_it_needs_its_patch_on_the_harness(cpu_index):
    """Kimi-K2.5's sessions: needs-patch for the patchset, and for the harness under it."""
    versions = by_patchset("serve-cpu")["kimi-k2.5-eagle3"]
    releases = select_releases(cpu_index, versions, None)
    harness = patchsets.load("cpu-eagle-backport")
    rows = build_matrix([harness], cpu_index, releases, "x86_64")[harness.name]
    assert {str(r.version): r.verdict for r in rows} == dict.fromkeys(versions, "needs-patch")
