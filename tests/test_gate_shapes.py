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


# A second hostile pass (a helper that had not read these tests), on the real 0.16.0 gate's
# shape: module-level code that narrows the list after it is made, an assert over a value whose
# truth is unknown, a method of another class of the same name, model-type reads through
# vars/to_dict/getattr/split, a nested helper under another name, an assignment before the
# raise, a shadowed builtin. Each still refuses Kimi; none may come out accept or absent.
GATE = """
class SpeculativeConfig:
    def _verify_args(self):
        model_type = self.target_model_config.hf_text_config.model_type
        if self.method == "eagle3" and self.target_model_config and not any(
            s in model_type for s in TARGETS
        ):
            raise ValueError("no")
"""
PATCHED_LIST = 'TARGETS = ["llama", "qwen", "kimi_k2"]\n'


def gate_reading(read: str, test: str = "not any(s in mt for s in TARGETS)") -> str:
    return (
        PATCHED_LIST
        + "class SpeculativeConfig:\n    def _verify_args(self):\n"
        + f"        cfg = self.target_model_config.hf_text_config\n        mt = {read}\n"
        + f'        if self.method == "eagle3" and {test}:\n            raise ValueError("no")\n'
    )


MODULE_SHAPES = {
    "module-for-remove": PATCHED_LIST
    + 'for _b in ("kimi_k2",):\n    if _b in TARGETS:\n        TARGETS.remove(_b)\n'
    + GATE,
    "module-slice-assign": PATCHED_LIST + 'TARGETS[:] = ["llama"]\n' + GATE,
    "module-global-call": PATCHED_LIST
    + 'def _narrow():\n    global TARGETS\n    TARGETS = ["llama"]\n\n_narrow()\n'
    + GATE,
    "function-rebinds-global": PATCHED_LIST
    + 'def narrow():\n    global TARGETS\n    TARGETS = ["llama"]\n'
    + GATE,
    "module-reassigned-by-call": PATCHED_LIST + "TARGETS = external(TARGETS)\n" + GATE,
    "assert-unknown-truth": PATCHED_LIST.replace(', "kimi_k2"', "")
    + "class SpeculativeConfig:\n    def _verify_args(self):\n"
    + "        model_type = self.target_model_config.hf_text_config.model_type\n"
    + '        assert not (self.method == "eagle3" and self.target_model_config and not any(\n'
    + '            s in model_type for s in TARGETS)), "no"\n',
    "method-of-another-class": "class SpeculativeConfig:\n    def _verify_args(self):\n"
    + '        if self.method == "eagle3" and not self._target_ok():\n'
    + '            raise ValueError("no")\n\n    def _target_ok(self):\n'
    + "        t = self.target_model_config.hf_text_config.model_type\n"
    + '        return t.startswith(("llama", "qwen"))\n\n\nclass _Legacy:\n'
    + "    def _target_ok(self):\n        return True\n",
    "vars": gate_reading('vars(cfg)["model_type"]'),
    "to-dict": gate_reading('cfg.to_dict()["model_type"]'),
    "getattr-concat": gate_reading('getattr(cfg, "model" + "_type")').replace(
        PATCHED_LIST, PATCHED_LIST.replace(', "kimi_k2"', "")
    ),
    "split": gate_reading('cfg.model_type.split("_")[0]'),
    "partition": gate_reading('cfg.model_type.partition("_")[0]'),
    "nested-helper-renamed": PATCHED_LIST.replace(', "kimi_k2"', "")
    + "class SpeculativeConfig:\n    def _verify_args(self):\n"
    + "        def _require():\n"
    + "            if not any(s in self.target_model_config.hf_text_config.model_type\n"
    + "                       for s in TARGETS):\n"
    + '                raise ValueError("unsupported target")\n'
    + "        require = _require\n"
    + '        if self.method == "eagle3" and self.target_model_config:\n'
    + "            require()\n",
    "assignment-before-raise": PATCHED_LIST.replace(', "kimi_k2"', "")
    + GATE.replace(
        '            raise ValueError("no")',
        '            self.method = "eagle"\n            raise ValueError("no")',
    ),
    "shadowed-any": "def any(values):\n    return all(values)\n\n\n"
    + PATCHED_LIST.replace('"qwen", "kimi_k2"', '"kimi_k2", "qwen"')
    + GATE.replace("s in model_type for s in TARGETS", "model_type == s for s in TARGETS"),
}


@pytest.mark.parametrize("text", list(MODULE_SHAPES.values()), ids=list(MODULE_SHAPES))
def test_a_gate_narrowed_or_read_out_of_sight_is_never_said_to_accept_kimi(text):
    decision = decide(text, "kimi_k2")
    assert decision.verdict in ("reject", "undecidable"), (decision, text)


def test_the_plain_module_list_gate_is_still_worked_out():
    """The real gate's shape with a module-level list nobody changes: accept where listed."""
    assert decide(PATCHED_LIST + GATE, "kimi_k2").verdict == "accept"
    assert decide(PATCHED_LIST + GATE, "gemma3").verdict == "reject"
