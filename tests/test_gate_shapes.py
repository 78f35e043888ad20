"""The gate's verdict for Kimi is never ``accept`` or ``absent`` while the gate still refuses
it, whatever shape the refusal takes (issue 28's hostile pass: a flag set in a loop, a while, a
try over ``index``, a guarded match case, a helper five calls deep, a list narrowed through an
alias, a helper or an unknown call). Each shape is tried in the checking function itself and
behind a helper method the EAGLE-3 branch calls; each list holds kimi_k2 (as a patch would
have put it) unless the shape takes it out again."""

from __future__ import annotations

import pytest

from patcher.codemods._gate_decision import decide

DIRECT = """
class SpeculativeConfig:
    def _verify_args(self):
        if self.method != "eagle3":
            return
"""
BEHIND_A_HELPER = """
class SpeculativeConfig:
    def _verify_args(self):
        if self.method == "eagle3":
            self.check_target()

    def check_target(self):
"""
LISTS = {
    "without": '        supported = ["llama", "qwen"]\n',
    "narrowed": '        supported = ["llama", "qwen", "kimi_k2"]\n',
}
READ = "        model_type = self.target_model_config.hf_text_config.model_type\n"
REFUSE = (
    '        if not any(s in model_type for s in supported):\n            raise ValueError("no")\n'
)
SHAPES = {
    "without": {
        "any": REFUSE,
        "flag-loop": "        ok = False\n        for s in supported:\n"
        "            if s in model_type:\n                ok = True\n"
        '        if not ok:\n            raise ValueError("no")\n',
        "while": "        i = 0\n"
        "        while i < len(supported) and supported[i] not in model_type:\n"
        '            i += 1\n        if i == len(supported):\n            raise ValueError("no")\n',
        "try-index": "        try:\n            supported.index(model_type)\n"
        "        except ValueError:\n            raise\n",
        "match-guard": '        match self.method:\n            case "eagle3" if model_type not in '
        'supported:\n                raise ValueError("no")\n',
        "five-deep": "        self.h1(model_type, supported)\n"
        + "".join(
            f"\n    def h{i}(self, m, s):\n        self.h{i + 1}(m, s)\n" for i in range(1, 5)
        )
        + '\n    def h5(self, m, s):\n        if m not in s:\n            raise ValueError("no")\n',
        "assert": "        assert any(s in model_type for s in supported)\n",
    },
    "narrowed": {
        "alias-del": "        alias = supported\n        del alias[2:]\n" + REFUSE,
        "alias-remove": '        alias = supported\n        alias.remove("kimi_k2")\n' + REFUSE,
        "alias-store": '        alias = supported\n        alias[2] = "x"\n' + REFUSE,
        "method-pops": "        self.narrow(supported)\n"
        + REFUSE
        + "\n    def narrow(self, values):\n        values.pop()\n",
        "function-deletes": "        narrow(supported)\n"
        + REFUSE
        + "\n\ndef narrow(values):\n    del values[-1]\n",
        "unknown-call": "        external.narrow(supported)\n" + REFUSE,
        "comprehension": '        supported = [s for s in supported if s != "kimi_k2"]\n' + REFUSE,
        "filter-flag": "        ok = False\n        for s in supported:\n"
        '            if s in model_type and s != "kimi_k2":\n                ok = True\n'
        '        if not ok:\n            raise ValueError("no")\n',
    },
}
CASES = [
    pytest.param(head + LISTS[kind] + READ + body, id=f"{where}-{name}")
    for where, head in (("direct", DIRECT), ("helper", BEHIND_A_HELPER))
    for kind, shapes in SHAPES.items()
    for name, body in shapes.items()
]


@pytest.mark.parametrize("text", CASES)
def test_a_gate_that_still_refuses_kimi_is_never_said_to_accept_it(text):
    decision = decide(text, "kimi_k2")
    assert decision.verdict in ("reject", "undecidable"), (decision, text)


@pytest.mark.parametrize("where", [DIRECT, BEHIND_A_HELPER])
def test_the_plain_and_flag_gates_are_worked_out_both_ways(where):
    """Not undecidable where the interpreter can follow: a listed type is accepted."""
    for body in (SHAPES["without"]["any"], SHAPES["without"]["flag-loop"]):
        text = where + LISTS["without"] + READ + body
        assert decide(text, "kimi_k2").verdict == "reject"
        assert decide(text, "llama").verdict == "accept"
