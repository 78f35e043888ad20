"""The one way codemod tests run a codemod: literal source before, literal source after.

Like libcst's ``CodemodTest.assertCodemod``: a test states the files it starts from and every
file's whole text afterwards, so a reader sees the change and any other change fails the test.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.version import Version

from patcher.codemods.base import Codemod, Model, Outcome, Status, Tree
from patcher.engine import run_fresh
from patcher.sources.base import Source

KIMI = Model(
    types=("kimi_k2", "deepseek_v3"),
    architecture="KimiK25ForConditionalGeneration",
    image_token_attribute="media_placeholder_token_id",
)
"""The model of the kimi-k2.5-eagle3 patchset, the one most codemod tests patch for."""

UNCHANGED: Mapping[str, str] = {}
"""``after`` for a codemod that must leave every file as it was."""


def dedent(text: str) -> str:
    """A snippet as written in a test (indented, after an opening newline) as file text."""
    return textwrap.dedent(text).lstrip("\n")


class MemorySource(Source):
    """A tree of a few files written for a test."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = {path: dedent(text) for path, text in files.items()}
        self.version = Version("0.16.0")
        self.description = "test snippet"

    def names(self) -> Sequence[str]:
        return list(self.files)

    def read(self, path: str) -> bytes | None:
        text = self.files.get(path)
        return None if text is None else text.encode()


def assert_codemod(
    codemod: type[Codemod[Any]],
    before: Mapping[str, str],
    after: Mapping[str, str],
    status: Status,
    *,
    options: Mapping[str, Any] | None = None,
    model: Model = KIMI,
) -> Outcome:
    """Run ``codemod`` on the files ``before``; its status must be ``status``, each file ``after``
    names must read exactly as given (and compile), and every other file must be unchanged.

    Returns the outcome, for a test that also checks what its detail says.
    """
    assert set(after) <= set(before), f"after names files not in before: {set(after) - set(before)}"
    tree = Tree(MemorySource(before))
    # as the engine runs it: a failing or ambiguous outcome leaves no change behind
    outcome = run_fresh(codemod(model, codemod.options_type()(**(options or {}))), tree)
    assert outcome.status is status, outcome.detail
    expected = {path: dedent(after.get(path, text)) for path, text in before.items()}
    assert {path: tree.text(path) for path in before} == expected
    for path in after:
        compile(expected[path], path, "exec")
    return outcome
