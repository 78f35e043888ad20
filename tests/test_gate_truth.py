"""eagle3-whitelist against generated gates: mutations of the real 0.16.0 and 0.33.0 files.

Each case rewrites the EAGLE-3 model-type check of the real ``vllm/config/speculative.py``
(0.16.0 has the check; 0.33.0 has none, so the check is put into its ``_verify_args``) in one
way a fork or a release could: its polarity (an allowlist that raises on absence, a denylist
that raises on presence), its control flow (guard clauses, elif, match, assert, a helper here or
imported), its data flow (shadowing, filters, ``.remove``, lists built up) and where it is (moved
to the proposer, copied there, a second check beside it). Each case states the true answer for
the kimi-k2.5-eagle3 model types, worked out by hand when the case was written:

- ``reject``: the unpatched check refuses them; ``patchable`` says whether extending a literal
  list the check iterates lets them through (then ``applied``, else ``failed``);
- ``accept``: it lets them through already (``present``);
- ``absent``: there is no such check anywhere (``not-needed``);
- ``undecidable``: what it does depends on what the tree cannot show (``failed``);
- ``ambiguous``: a check in a file the codemod does not decide as well (``ambiguous``).

A false claim is ``applied``, ``present`` or ``not-needed`` where the truth differs: the test
fails on any. Every ``applied`` is run again on its own output, which must be ``present``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from codemod_helpers import KIMI

from patcher.codemods.base import Status, Tree
from patcher.codemods.eagle3_whitelist import Eagle3Whitelist
from patcher.codemods.options import FileOptions
from patcher.sources.base import Source

pytestmark = pytest.mark.network

SPECULATIVE = "vllm/config/speculative.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
HELPERS = "vllm/config/eagle3_targets.py"
RELEASES = ("0.16.0", "0.33.0")

WITHOUT = '["llama", "qwen", "minicpm", "gpt_oss"]'
WITH = '["llama", "qwen", "kimi_k2", "deepseek_v3"]'
DENY_WITHOUT = '["gemma", "mllama"]'
DENY_WITH = '["gemma", "kimi_k2"]'
TYPE = "self.target_model_config.hf_text_config.model_type"


@dataclass(frozen=True)
class Case:
    name: str
    gate: str  # the check, as statements at the indentation of _verify_args' body
    truth: str
    patchable: bool = False
    module_prefix: str = ""  # module-level code put before the class
    proposer: Callable[[str], str] | None = None  # how the proposer file changes
    helpers: str | None = None  # a module of its own, imported by the gate
    also: frozenset[Status] = frozenset()  # a safe answer besides the true one (failed)


def indent(text: str, by: str = "        ") -> str:
    return "".join(by + line if line.strip() else line for line in text.splitlines(True))


def allow(listing: str, name: str = "supported") -> str:
    return (
        f"{name} = {listing}\n"
        f'if (\n    self.method == "eagle3"\n    and self.target_model_config\n'
        f"    and not any(s in {TYPE} for s in {name})\n):\n"
        f'    raise ValueError(f"Eagle3 is only supported for {{{name}}}")\n'
    )


def deny(listing: str) -> str:
    return (
        f"unsupported = {listing}\n"
        f'if (\n    self.method == "eagle3"\n    and self.target_model_config\n'
        f"    and any(u in {TYPE} for u in unsupported)\n):\n"
        f'    raise ValueError("Eagle3 does not support this target")\n'
    )


def control_shapes(listing: str) -> Iterator[tuple[str, str, bool]]:
    """(name, gate, patchable) for an allowlist ``listing`` in each control-flow shape."""
    check = f"not any(s in {TYPE} for s in supported)"
    head = f"supported = {listing}\n"
    yield "plain", allow(listing), True
    yield (
        "guard-return",
        head + 'if self.method != "eagle3":\n    return self\n'
        f"if self.target_model_config and {check}:\n    raise ValueError('no')\n",
        True,
    )
    yield (
        "elif-chain",
        head
        + f'if self.method != "eagle3":\n    pass\nelif {check}:\n    raise ValueError("no")\n',
        True,
    )
    yield (
        "nested-if",
        head + f'if self.method == "eagle3":\n    if {check}:\n        raise ValueError("no")\n',
        True,
    )
    yield (
        "assert",
        head + f'if self.method == "eagle3":\n    assert not ({check}), "no"\n',
        False,
    )
    yield (
        "match",
        head + f'match self.method:\n    case "eagle3":\n        if {check}:\n'
        '            raise ValueError("no")\n    case _:\n        pass\n',
        True,
    )
    yield (
        "local-helper",
        head + f'if self.method == "eagle3" and {check}:\n'
        "    _refuse_target(self.target_model_config)\n",
        True,
    )
    yield (
        "flag",
        head + f"ok = not ({check})\n"
        'if self.method == "eagle3" and not ok:\n    raise ValueError("no")\n',
        False,
    )
    yield (
        "eagle-constant",
        head + f"if self.method == EAGLE3_METHOD and {check}:\n    raise ValueError('no')\n",
        True,
    )


LOCAL_HELPER = "\ndef _refuse_target(target):\n    raise ValueError(f'Eagle3 not for {target}')\n\n"
EAGLE3_CONSTANT = 'EAGLE3_METHOD = "eagle3"\n'


def proposer_copy(listing: str, guarded: bool = False) -> Callable[[str], str]:
    def change(text: str) -> str:
        if guarded:  # a guard clause: no test in it names both EAGLE-3 and the model type
            return text + (
                "\n\ndef check_eagle3_target(method, target_model):\n"
                '    if method != "eagle3":\n        return\n'
                f"    if not any(s in target_model.config.model_type for s in {listing}):\n"
                '        raise ValueError("Eagle3 is not supported for this target")\n'
            )
        copy = (
            "\n\ndef check_eagle3_target(method, target_model):\n"
            f'    if method == "eagle3" and not any(\n'
            f"        s in target_model.config.model_type for s in {listing}\n    ):\n"
            '        raise ValueError("Eagle3 is not supported for this target")\n'
        )
        return text + copy

    return change


def cases() -> Iterator[Case]:
    # polarity x control flow: the truth follows from the list and the polarity
    listings = (
        (WITHOUT, "without", False),
        (WITH, "with", True),
        ('["llama", "kimi", "deepseek"]', "substrings", True),
        ('["llama", "kimi_k2"]', "partial", False),
    )
    for listing, label, has in listings:
        for name, gate, patchable in control_shapes(listing):
            yield Case(
                f"allow-{label}-{name}",
                gate,
                "accept" if has else "reject",
                patchable,
                module_prefix=(LOCAL_HELPER if name == "local-helper" else "")
                + (EAGLE3_CONSTANT if name == "eagle-constant" else ""),
            )
    yield Case("deny-without", deny(DENY_WITHOUT), "accept")
    yield Case("deny-with", deny(DENY_WITH), "reject", False)
    yield Case(
        "deny-elif",
        f'unsupported = {DENY_WITH}\nif self.method != "eagle3":\n    pass\n'
        f"elif any(u in {TYPE} for u in unsupported):\n    raise ValueError('no')\n",
        "reject",
        False,
    )
    yield Case(
        "exact-membership",
        f'supported = {WITHOUT}\nif self.method == "eagle3" and {TYPE} not in supported:\n'
        "    raise ValueError('no')\n",
        "reject",
        False,
    )
    yield Case(
        "exact-membership-with",
        'supported = ("kimi_k2", "deepseek_v3")\n'
        f'if self.method == "eagle3" and {TYPE} not in supported:\n'
        "    raise ValueError('no')\n",
        "accept",
    )
    yield Case(
        "single-string",
        f'if self.method == "eagle3" and "llama" not in {TYPE}:\n    raise ValueError("no")\n',
        "reject",
        True,
    )
    # data flow
    yield Case(
        "shadowed-module-list",
        allow(WITHOUT),
        "reject",
        True,
        module_prefix=f"supported = {WITH}\n",
    )
    yield Case(
        "module-list-only-with",
        allow(WITH, "MODULE_SUPPORTED").split("\n", 1)[1],
        "accept",
        module_prefix=f"MODULE_SUPPORTED = {WITH}\n",
    )
    yield Case(
        "module-list-only-without",
        allow(WITHOUT, "MODULE_SUPPORTED").split("\n", 1)[1],
        "reject",
        True,
        module_prefix=f"MODULE_SUPPORTED = {WITHOUT}\n",
    )
    yield Case(
        "filtered-by-comprehension",
        allow(WITH).replace(
            "\nif (", '\nsupported = [s for s in supported if s != "kimi_k2"]\nif (', 1
        ),
        "reject",
        False,
    )
    yield Case(
        "narrowed-by-remove",
        allow(WITH).replace("\nif (", '\nsupported.remove("kimi_k2")\nif (', 1),
        "reject",
        False,
    )
    yield Case(
        "grown-by-append",
        allow(WITHOUT).replace(
            "\nif (", '\nsupported.append("kimi_k2")\nsupported.append("deepseek_v3")\nif (', 1
        ),
        "accept",
    )
    yield Case(
        "grown-by-plus-equals",
        allow(WITHOUT).replace("\nif (", '\nsupported += ["kimi_k2", "deepseek_v3"]\nif (', 1),
        "accept",
    )
    yield Case(
        "built-by-concatenation",
        allow('BASE + ["kimi_k2", "deepseek_v3"]'),
        "accept",
        module_prefix='BASE = ["llama"]\n',
    )
    yield Case(
        "if-else-lists-unknown-condition",
        allow(WITHOUT).replace(
            f"supported = {WITHOUT}\n",
            f"if self.disable_log_stats:\n    supported = {WITH}\n"
            f"else:\n    supported = {WITHOUT}\n",
        ),
        "undecidable",
    )
    yield Case(
        "if-else-lists-on-method",
        allow(WITHOUT).replace(
            f"supported = {WITHOUT}\n",
            f'if self.method == "eagle3":\n    supported = {WITH}\n'
            f"else:\n    supported = {WITHOUT}\n",
        ),
        "accept",
    )
    yield Case(
        "imported-tuple",
        "from vllm.config.eagle3_targets import EAGLE3_TARGETS\n"
        + allow(WITHOUT).split("\n", 1)[1].replace("for s in supported", "for s in EAGLE3_TARGETS"),
        "undecidable",
        helpers=f"EAGLE3_TARGETS = {WITH}\n",
    )
    yield Case(
        "helper-from-another-module",
        "from vllm.config.eagle3_targets import refuse_target\n"
        f"supported = {WITHOUT}\n"
        f'if self.method == "eagle3" and not any(s in {TYPE} for s in supported):\n'
        "    refuse_target(self.target_model_config)\n",
        "undecidable",
        helpers="def refuse_target(target):\n    raise ValueError('no')\n",
    )
    yield Case(
        "try-wrapped",
        "try:\n" + indent(allow(WITHOUT), "    ") + "except KeyError:\n    pass\n",
        "undecidable",
    )
    yield Case(
        "loop-else",
        f"for s in {WITHOUT}:\n    if s in {TYPE}:\n        break\n"
        "else:\n    if self.method == 'eagle3':\n        raise ValueError('no')\n",
        "undecidable",
    )
    yield Case(
        "dead-and-false",
        allow(WITHOUT).replace('self.method == "eagle3"', 'self.method == "eagle3" and False'),
        "absent",
        also=frozenset({Status.FAILED}),  # the shape search behind not-needed still sees it
    )
    # location and duplication
    yield Case("gone", "", "absent")
    yield Case("moved-to-proposer", "", "undecidable", proposer=proposer_copy(WITHOUT))
    yield Case(
        "copied-to-proposer", allow(WITHOUT), "ambiguous", True, proposer=proposer_copy(WITHOUT)
    )
    yield Case(
        "moved-to-proposer-guarded",
        "",
        "undecidable",
        proposer=proposer_copy(WITHOUT, guarded=True),
    )
    yield Case(
        "copied-to-proposer-guarded",
        allow(WITHOUT),
        "ambiguous",
        True,
        proposer=proposer_copy(WITHOUT, guarded=True),
    )
    yield Case(
        "present-and-copy-accepting",
        allow(WITH),
        "ambiguous",
        proposer=proposer_copy(WITH),
    )
    yield Case(
        "second-check-over-imported-tuple",
        "from vllm.config.eagle3_targets import EAGLE3_TARGETS\n"
        + allow(WITHOUT)
        + f'if self.method == "eagle3" and not any(s in {TYPE} for s in EAGLE3_TARGETS):\n'
        "    raise ValueError('no')\n",
        "undecidable",
        helpers=f"EAGLE3_TARGETS = {WITH}\n",
    )
    yield Case(
        "two-checks-both-lists",
        allow(WITHOUT) + allow(WITHOUT, "supported_again"),
        "reject",
        True,
    )


ALLOWED = {
    "accept": {Status.PRESENT},
    "absent": {Status.NOT_NEEDED},
    "undecidable": {Status.FAILED},
    "ambiguous": {Status.AMBIGUOUS},
}
CLAIMS = {Status.APPLIED, Status.PRESENT, Status.NOT_NEEDED}


def allowed(case: Case) -> set[Status]:
    if case.truth == "reject":
        return {Status.APPLIED} if case.patchable else {Status.FAILED}
    return ALLOWED[case.truth]


class Files(Source):
    """A searchable tree of the few files a case touches (a stand-in for the whole release)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def names(self) -> list[str]:
        return list(self.files)

    def read(self, path: str) -> bytes | None:
        text = self.files.get(path)
        return None if text is None else text.encode()


def mutate(release: str, speculative: str, proposer: str, case: Case) -> dict[str, str]:
    if release == "0.16.0":
        start = speculative.index("        eagle3_target_supported = [")
        end = speculative.index(
            "        self.verify_equal_vocab_size_if_draft_model()\n        return"
        )
    else:
        start = end = speculative.index('        if self.rejection_sample_method == "synthetic":')
    body = speculative[:start] + indent(case.gate) + speculative[end:]
    if case.module_prefix:
        at = body.index("\nlogger = ")
        body = body[:at] + "\n" + case.module_prefix + body[at:]
    files = {SPECULATIVE: body, PROPOSER: case.proposer(proposer) if case.proposer else proposer}
    if case.helpers is not None:
        files[HELPERS] = case.helpers
    compile(files[SPECULATIVE], SPECULATIVE, "exec")
    return files


ALL_CASES = list(cases())


@pytest.fixture(scope="module")
def originals(release) -> dict[str, tuple[str, str]]:
    found = {}
    for version in RELEASES:
        source = release(version)
        texts = [(source.read(p) or b"").decode() for p in (SPECULATIVE, PROPOSER)]
        found[version] = (texts[0], texts[1])
    return found


def run(files: dict[str, str]) -> tuple[Status, str, Tree]:
    tree = Tree(Files(files))
    outcome = Eagle3Whitelist(KIMI, FileOptions()).run(tree)
    return outcome.status, outcome.detail, tree


def test_generated_gates_make_no_false_claim(originals):
    """Over every case on both releases: no applied, present or not-needed that the truth
    does not allow; and every applied patch, run again, is present."""
    false_claims = []
    conservative = []
    total = 0
    for version, case in itertools.product(RELEASES, ALL_CASES):
        total += 1
        files = mutate(version, *originals[version], case)
        status, detail, tree = run(files)
        ok = allowed(case) | case.also
        if status not in ok:
            (false_claims if status in CLAIMS else conservative).append(
                f"{version} {case.name}: {status} ({detail}); truth {case.truth}"
            )
            continue
        if status is Status.APPLIED:
            again, detail_again, _ = run({p: tree.text(p) or "" for p in files})
            if again is not Status.PRESENT:
                false_claims.append(
                    f"{version} {case.name}: applied, but its output is {again} ({detail_again})"
                )
        if status is Status.FAILED:
            assert ".py:" in detail, f"{version} {case.name}: failed without a place: {detail}"
    print(f"{total} cases, {len(false_claims)} false claims, {len(conservative)} failed-safe")
    assert not false_claims, "\n".join(false_claims)
    assert not conservative, "\n".join(conservative)
    assert total >= 100


@pytest.mark.parametrize("version", RELEASES)
def test_the_real_file_is_judged_as_it_is(originals, version):
    """0.16.0 rejects the Kimi types (applied); 0.33.0 has no check (not-needed)."""
    speculative, proposer = originals[version]
    status, detail, _ = run({SPECULATIVE: speculative, PROPOSER: proposer})
    expected = Status.APPLIED if version == "0.16.0" else Status.NOT_NEEDED
    assert status is expected, detail
    if status is Status.APPLIED:
        assert "kimi_k2, deepseek_v3 rejected -> accepted" in detail
