"""The verify report: what ``ok`` means and the JSON that ``--json`` writes."""

from __future__ import annotations

from patcher.verify.report import CheckOutcome, CheckResult, VerifyReport

FAIL = CheckOutcome("fail", "barrier: Eagle3 is only supported for ['llama']", 12.0)
PASS = CheckOutcome("pass", "SpeculativeConfig accepted eagle3", 11.0)
SKIP = CheckOutcome("skip", "vLLM 0.16.0 has no MLA EAGLE-3 drafter class", 10.0)


def report(*checks: CheckResult) -> VerifyReport:
    return VerifyReport(vllm="0.16.0", wheel="patched.whl", checks=checks, setup_seconds=0.0)


def test_fail_then_pass_is_ok_and_reads_before_and_after():
    result = CheckResult("speculative-config", FAIL, PASS)
    assert report(result).ok
    assert report(result).to_json() == {
        "vllm": "0.16.0",
        "wheel": "patched.whl",
        "checks": [
            {
                "name": "speculative-config",
                "before": "fail",
                "after": "pass",
                "detail": f"before: {FAIL.detail} | after: {PASS.detail}",
            }
        ],
    }


def test_a_failure_after_patching_is_not_ok():
    assert not report(CheckResult("a", FAIL, PASS), CheckResult("b", FAIL, FAIL)).ok


def test_skip_is_not_a_failure():
    assert report(CheckResult("mla-drafter", SKIP, SKIP)).ok


def test_the_same_text_on_both_sides_is_shown_once():
    assert CheckResult("mla-drafter", SKIP, SKIP).detail == SKIP.detail


def test_without_a_patched_wheel_the_official_one_is_judged():
    unpatched = report(CheckResult("speculative-config", PASS, None))
    assert unpatched.ok
    assert unpatched.to_json()["checks"][0] == {
        "name": "speculative-config",
        "before": "pass",
        "after": None,
        "detail": PASS.detail,
    }
    assert not report(CheckResult("speculative-config", FAIL, None)).ok
