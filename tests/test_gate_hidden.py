"""Gates hidden behind what Python calls implicitly, or spelled at run time (issue 38, the
fourth hostile pass).

The fourth hostile pass found the whitelist check, still refusing Kimi, judged ``not-needed``
where Python reaches it without a call the search could see (a property read, a metaclass's
``__call__``, ``__init_subclass__``, a dataclass's ``__post_init__``, a dispatch table, a
``functools.partial``), where it refuses by a warning turned into an error, or where
``"eagle3"`` or ``"model_type"`` is built at run time (``chr``, ``bytes.decode``, ``base64``);
and ``applied`` where a second check beside the original still refuses after the patch.

This generates those classes as combinations: each way of reaching the check, with each way of
spelling its test, and each second check beside an accepting or patchable original. The truth
is known by construction: every shape refuses Kimi, so none may come out ``not-needed`` or
``present``, and one whose refusing check is not the one the codemod patches may not come out
``applied`` (``judge`` in test_gate_moved_generated).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from test_gate_moved_generated import (
    LIST,
    SPECULATIVE,
    TYPE,
    Shape,
    appended,
    gate_replaced,
    python_files,
    run_all,
)

from patcher.codemods.eagle3_whitelist import Eagle3Whitelist

pytestmark = pytest.mark.network

# how the method's name is tested: spelled at run time
METHOD_TESTS = {
    "literal": '"eagle3"',
    "chr": '"".join(map(chr, [101, 97, 103, 108, 101, 51]))',
    "bytes": 'b"eagle3".decode()',
    "base64": '__import__("base64").b64decode("ZWFnbGUz").decode()',
    "reversed": '"3elgae"[::-1]',
    "codecs": '__import__("codecs").decode("rntyr3", "rot13")',
}
# how the model type is read: its attribute's name spelled at run time
TYPE_READS = {
    "plain": "cfg.hf_text_config.model_type",
    "chr": 'getattr(cfg.hf_text_config, "".join(map(chr, [109, 111, 100, 101, 108, 95, '
    "116, 121, 112, 101])))",
    "bytes": 'getattr(cfg.hf_text_config, b"model_type".decode())',
    "joined": 'getattr(cfg.hf_text_config, "_".join(["model", "type"]))',
    "vars": 'vars(cfg.hf_text_config)["model" + "_type"]',
}
# the check itself, given ``spec`` (the speculative config); {test} and {read} filled in
CHECK = (
    "    cfg = spec.target_model_config\n"
    "    if spec.method == {test} and not any(\n"
    '        s in {read} for s in ["llama", "qwen", "minicpm", "gpt_oss"]\n'
    "    ):\n"
    "        {refuse}\n"
)
REFUSALS = {
    "raise": 'raise ValueError("refused")',
    "warning-as-error": '__import__("warnings").simplefilter("error"); '
    '__import__("warnings").warn("refused")',
}


def check(test: str, read: str, refuse: str = "raise", indent: str = "") -> str:
    body = CHECK.format(test=test, read=read, refuse=REFUSALS[refuse])
    return "".join(indent + line + "\n" for line in body.splitlines())


def implicit_shapes(test: str, read: str, refuse: str) -> Iterator[tuple[str, Shape]]:
    """The check reached by what Python calls implicitly, from ``_verify_args``."""
    body = check(test, read, refuse, indent="    ")
    yield (
        "property",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: gate_replaced("        self._eagle3_target_ok\n")(
                    text
                ).replace(
                    "    def verify_equal_vocab_size_if_draft_model(self):",
                    "    @property\n    def _eagle3_target_ok(self):\n        spec = self\n"
                    + body
                    + "        return True\n\n"
                    "    def verify_equal_vocab_size_if_draft_model(self):",
                )
            },
            moved=True,
        ),
    )
    yield (
        "metaclass-call",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: appended(
                    "class _TargetMeta(type):\n    def __call__(cls, spec):\n"
                    + body
                    + "        return super().__call__()\n\n\n"
                    "class _TargetCheck(metaclass=_TargetMeta):\n    pass\n"
                )(gate_replaced("        _TargetCheck(self)\n")(text))
            },
        ),
    )
    yield (
        "init-subclass",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: appended(
                    "class _TargetBase:\n"
                    "    def __init_subclass__(cls, spec=None, **kwargs):\n"
                    "        super().__init_subclass__(**kwargs)\n" + body
                )(
                    gate_replaced(
                        "        class _Checked(_TargetBase, spec=self):\n            pass\n"
                    )(text)
                )
            },
        ),
    )
    yield (
        "post-init",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: appended(
                    "@__import__('dataclasses').dataclass\nclass _TargetCheck:\n"
                    "    spec: object\n\n    def __post_init__(self):\n"
                    "        spec = self.spec\n" + body
                )(gate_replaced("        _TargetCheck(self)\n")(text))
            },
        ),
    )
    yield (
        "dispatch-table",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: appended(
                    "def _check_target(spec):\n"
                    + check("spec.method", read, refuse)
                    + "\n\n_TARGET_CHECKS = {"
                    + test
                    + ": _check_target}\n"
                )(
                    gate_replaced(
                        "        _TARGET_CHECKS.get(self.method, lambda spec: None)(self)\n"
                    )(text)
                )
            },
        ),
    )
    yield (
        "partial",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: appended(
                    "def _check_target(method, spec):\n    spec.method = method\n"
                    + check(test, read, refuse)
                )(
                    gate_replaced(
                        "        __import__('functools').partial(_check_target, self.method)"
                        "(self)\n"
                    )(text)
                )
            },
        ),
    )
    yield (
        "plain-helper",
        Shape(
            "",
            {
                SPECULATIVE: lambda text: appended(
                    "def _check_target(spec):\n" + check(test, read, refuse)
                )(gate_replaced("        _check_target(self)\n")(text))
            },
        ),
    )


def hidden_shapes() -> list[Shape]:
    shapes = []
    combos = itertools.product(METHOD_TESTS.items(), TYPE_READS.items(), REFUSALS)
    for i, ((test_name, test), (read_name, read), refuse) in enumerate(combos):
        for j, (how, shape) in enumerate(implicit_shapes(test, read, refuse)):
            if (i + j) % 3:  # a third of the product: each piece in each place still
                continue
            name = f"{how}-{test_name}-{read_name}-{refuse}"
            shapes.append(Shape(name, shape.changes, moved=False))
    return shapes


SECOND_CHECKS = {
    "architectures": (
        '        if self.method == "eagle3" and any(\n'
        '            a.startswith("Kimi") for a in self.target_model_config.architectures\n'
        "        ):\n            raise ValueError('refused')\n"
    ),
    "warning-as-error": (
        '        if self.method == "eagle3" and not any(\n'
        f'            s in {TYPE} for s in ["llama"]\n'
        "        ):\n"
        "            import warnings\n\n"
        '            warnings.simplefilter("error")\n'
        '            warnings.warn("refused")\n'
    ),
    "init-subclass": ("        class _Checked(_TargetBase, spec=self):\n            pass\n"),
    "chr-type": (
        '        if self.method == "eagle3" and "".join(map(chr, [107, 105, 109, 105])) in '
        f"{TYPE}:\n            raise ValueError('refused')\n"
    ),
}
INIT_SUBCLASS_BASE = (
    "class _TargetBase:\n"
    "    def __init_subclass__(cls, spec=None, **kwargs):\n"
    "        super().__init_subclass__(**kwargs)\n"
    '        if spec.method == "eagle3" and "llama" not in '
    "spec.target_model_config.hf_text_config.model_type:\n"
    "            raise ValueError('refused')\n"
)


def second_check_shapes() -> Iterator[Shape]:
    """The original check, patchable or already accepting, and a second one beside it that
    still refuses Kimi after the codemod has done its work."""
    originals = {
        "patchable": LIST + '        if self.method == "eagle3" and not any(\n'
        f"            s in {TYPE} for s in eagle3_target_supported\n"
        "        ):\n            raise ValueError('refused')\n",
        "accepting": '        eagle3_target_supported = ["llama", "kimi_k2", "deepseek_v3"]\n'
        '        if self.method == "eagle3" and not any(\n'
        f"            s in {TYPE} for s in eagle3_target_supported\n"
        "        ):\n            raise ValueError('refused')\n",
    }
    for (original_name, original), (second_name, second) in itertools.product(
        originals.items(), SECOND_CHECKS.items()
    ):
        changes = {SPECULATIVE: gate_replaced(original + second)}
        if second_name == "init-subclass":
            changes = {
                SPECULATIVE: lambda text, o=original, s=second: appended(INIT_SUBCLASS_BASE)(
                    gate_replaced(o + s)(text)
                )
            }
        moved = second_name == "architectures"  # the codemod cannot make that one accept
        yield Shape(f"second-{second_name}-beside-{original_name}", changes, moved=moved)


@pytest.fixture(scope="module")
def files_0_16(release) -> dict[str, bytes]:
    return python_files(release("0.16.0"))


def test_the_shapes_are_many_and_new():
    names = [s.name for s in [*hidden_shapes(), *second_check_shapes()]]
    assert len(names) == len(set(names)) >= 50


def test_a_gate_python_reaches_implicitly_is_never_not_needed(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, hidden_shapes())
    assert not wrong, "\n".join(wrong)


def test_a_second_check_that_still_refuses_is_never_applied_or_present(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, list(second_check_shapes()))
    assert not wrong, "\n".join(wrong)


# The EAGLE-3 test in _verify_args, the refusal in code Python calls for an operation there
# (the refusing code itself names no EAGLE-3 and no method): each dunder and descriptor.
CLASS_CHECK = (
    "    def {name}(self, *args, **kwargs):\n"
    "        cfg = self.spec.target_model_config\n"
    '        if not any(s in {read} for s in ["llama", "qwen"]):\n'
    '            raise ValueError("refused")\n'
    "        return {returns}\n"
)
OPERATIONS = {
    # dunder: (what it returns, the statement in _verify_args that makes Python call it)
    "__enter__": ("self", "with _Target(self):\n                pass"),
    "__iter__": ("iter(())", "for _ in _Target(self):\n                pass"),
    "__bool__": ("True", "if _Target(self):\n                pass"),
    "__len__": ("1", "len(_Target(self))"),
    "__str__": ('"x"', "str(_Target(self))"),
    "__eq__": ("True", "_Target(self) == 1"),
    "__getitem__": ("1", "_Target(self)[0]"),
    "__call__": ("1", "_Target(self)()"),
    "__hash__": ("1", "hash(_Target(self))"),
    "__contains__": ("True", "1 in _Target(self)"),
    "__add__": ("1", "_Target(self) + 1"),
    "__format__": ('"x"', 'f"{_Target(self)}"'),
}


def operation_shapes() -> Iterator[Shape]:
    for (dunder, (returns, statement)), (read_name, read) in itertools.product(
        OPERATIONS.items(), [("plain", TYPE_READS["plain"]), ("chr", TYPE_READS["chr"])]
    ):
        klass = (
            "class _Target:\n    def __init__(self, spec):\n        self.spec = spec\n\n"
            + CLASS_CHECK.format(name=dunder, read=read, returns=returns)
        )
        yield Shape(
            f"operation-{dunder.strip('_')}-{read_name}",
            {
                SPECULATIVE: lambda text, k=klass, s=statement: appended(k)(
                    gate_replaced(f'        if self.method == "eagle3":\n            {s}\n')(text)
                )
            },
            moved=False,
        )
    descriptor = (
        "class _Checked:\n    def __get__(self, spec, owner=None):\n"
        "        cfg = spec.target_model_config\n"
        '        if not any(s in cfg.hf_text_config.model_type for s in ["llama"]):\n'
        '            raise ValueError("refused")\n        return True\n'
    )
    yield Shape(
        "operation-descriptor",
        {
            SPECULATIVE: lambda text: appended(descriptor)(
                gate_replaced('        if self.method == "eagle3":\n            self._checked\n')(
                    text
                ).replace(
                    "    def verify_equal_vocab_size_if_draft_model(self):",
                    "    _checked = _Checked()\n\n"
                    "    def verify_equal_vocab_size_if_draft_model(self):",
                )
            )
        },
        moved=False,
    )
    yield Shape(
        "operation-property-no-eagle3",
        {
            SPECULATIVE: lambda text: gate_replaced(
                '        if self.method == "eagle3":\n            self._target_ok\n'
            )(text).replace(
                "    def verify_equal_vocab_size_if_draft_model(self):",
                "    @property\n    def _target_ok(self):\n"
                "        cfg = self.target_model_config\n"
                '        if not any(s in cfg.hf_text_config.model_type for s in ["llama"]):\n'
                '            raise ValueError("refused")\n        return True\n\n'
                "    def verify_equal_vocab_size_if_draft_model(self):",
            )
        },
        moved=False,
    )


def test_a_refusal_in_what_an_operation_calls_is_never_not_needed(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, list(operation_shapes()))
    assert not wrong, "\n".join(wrong)


# The proposer's image-token lookup, its attribute's name spelled at run time, reached plainly
# or through what Python calls implicitly.
IMAGE_SPELLINGS = {
    "chr": '"".join(map(chr, ' + repr([ord(c) for c in "image_token_index"]) + "))",
    "bytes": 'b"image_token_index".decode()',
    "base64": '__import__("base64").b64decode("aW1hZ2VfdG9rZW5faW5kZXg=").decode()',
    "reversed": '"xedni_nekot_egami"[::-1]',
    "codecs": '__import__("codecs").decode("vzntr_gbxra_vaqrk", "rot13")',
    "lambda": '"".join(map(lambda c: chr(ord(c) - 1), "jnbhf`uplfo`joefy"))',
}


def image_hidden_shapes() -> Iterator[Shape]:
    from test_gate_moved_generated import IMAGE_HELPER_MODULES, chain_replaced

    for (spelling_name, spelling), (where, (path, dotted)) in itertools.product(
        IMAGE_SPELLINGS.items(), IMAGE_HELPER_MODULES.items()
    ):
        yield Shape(
            f"image-{spelling_name}-helper-{where}",
            {
                PROPOSER_PATH: chain_replaced(
                    f"            from {dotted} import image_token_id_of\n\n"
                    "            self.model.config.image_token_index = image_token_id_of(\n"
                    "                target_model\n            )\n"
                ),
                path: appended(
                    "def image_token_id_of(target_model):\n"
                    f"    return getattr(target_model.config, {spelling})\n"
                ),
            },
        )
        yield Shape(
            f"image-{spelling_name}-property-{where}",
            {
                PROPOSER_PATH: chain_replaced(
                    f"            from {dotted} import ImageTokens\n\n"
                    "            self.model.config.image_token_index = ImageTokens(\n"
                    "                target_model\n            ).token\n"
                ),
                path: appended(
                    "class ImageTokens:\n    def __init__(self, target_model):\n"
                    "        self.config = target_model.config\n\n"
                    "    @property\n    def token(self):\n"
                    f"        return getattr(self.config, {spelling})\n"
                ),
            },
        )


PROPOSER_PATH = "vllm/v1/spec_decode/eagle.py"


def test_an_image_token_lookup_spelled_at_run_time_is_never_not_needed(files_0_16):
    from patcher.codemods.mm_image_token import MmImageToken

    shapes = list(image_hidden_shapes())
    assert len(shapes) >= 36
    wrong = run_all(MmImageToken, files_0_16, shapes)
    assert not wrong, "\n".join(wrong)


def code_from_strings() -> Iterator[Shape]:
    """The check run as a string: ``exec``/``eval``/``compile`` on the EAGLE-3 path, in the
    method or in a helper it calls, the source plain or base64-decoded. Nothing can read it."""
    source = (
        "if self.method == 'eagle3' and 'llama' not in "
        "self.target_model_config.hf_text_config.model_type: raise ValueError('refused')"
    )
    encoded = __import__("base64").b64encode(source.encode()).decode()
    runs = {
        "exec": f"        exec({source!r})\n",
        "exec-b64": f"        exec(__import__('base64').b64decode({encoded!r}).decode())\n",
        "eval-compile": f"        eval(compile({source!r}, 'x', 'exec'))\n",
    }
    for name, line in runs.items():
        yield Shape(f"code-{name}-in-method", {SPECULATIVE: gate_replaced(line)}, moved=False)
        helper = "def _run_check(self):\n" + line[4:]
        yield Shape(
            f"code-{name}-in-helper",
            {
                SPECULATIVE: lambda text, h=helper: appended(h)(
                    gate_replaced(
                        '        if self.method == "eagle3":\n            _run_check(self)\n'
                    )(text)
                )
            },
            moved=False,
        )


def test_code_run_from_a_string_is_never_not_needed(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, list(code_from_strings()))
    assert not wrong, "\n".join(wrong)


# An operation that raises on one operand and not on the other, the operand chosen by the
# check's truth: Python refuses Kimi there, with no ``raise`` written (the fifth hostile pass).
# A builtin taken as harmless raises on an argument of the wrong kind, a lookup in a table the
# search cannot read raises KeyError, and making a class runs its decorator, its base's
# ``__init_subclass__`` and its attributes' ``__set_name__``. {ok} is the check, {read} the
# model type; each statement runs under ``if self.method == "eagle3":``.
OK = 'any(s in {read} for s in ["llama", "qwen"])'
REFUSE = 'raise ValueError("refused")'
OPERANDS: dict[str, tuple[str, str]] = {
    # name: (the statements in _verify_args, what the module defines for them)
    "print-file": ('print(end="", file=None if {ok} else {read})', ""),
    "isinstance-class": ("isinstance({read}, str if {ok} else None)", ""),
    "logging-extra": (
        'logger.warning("target", extra={{}} if {ok} else {{"message": {read}}})',
        "",
    ),
    "unread-table": (
        '_ROUTES[{read}.split("_")[0]]',
        '_ROUTES = {"llama": "aux", "qwen": "aux"}\n',
    ),
    "class-decorator": (
        "@_checked({read})\nclass _Holder:\n    pass",
        "def _checked(model_type):\n    def decorate(klass):\n"
        '        if not any(s in model_type for s in ["llama", "qwen"]):\n'
        f"            {REFUSE}\n        return klass\n    return decorate\n",
    ),
    "init-subclass": (
        "class _Checked(_Base, model_type={read}):\n    pass",
        "class _Base:\n    def __init_subclass__(cls, model_type='', **kwargs):\n"
        "        super().__init_subclass__(**kwargs)\n"
        '        if not any(s in model_type for s in ["llama", "qwen"]):\n'
        f"            {REFUSE}\n",
    ),
    "set-name": (
        "_Field.model_type = {read}\nclass _Holder:\n    field = _Field()",
        "class _Field:\n    model_type = ''\n    def __set_name__(self, owner, name):\n"
        '        if not any(s in type(self).model_type for s in ["llama", "qwen"]):\n'
        f"            {REFUSE}\n",
    ),
    "class-base": ("class _Made(object if {ok} else None):\n    pass", ""),
    "floor-division": ('_ = 1 // sum(s in {read} for s in ["llama", "qwen"])', ""),
    "division": ("_ = 1 / int({ok})", ""),
    "modulo": ("_ = 1 % int({ok})", ""),
}


def operand_shapes() -> Iterator[Shape]:
    for (name, (statements, defined)), (read_name, read) in itertools.product(
        OPERANDS.items(), [("plain", TYPE_READS["plain"]), ("chr", TYPE_READS["chr"])]
    ):
        body = statements.format(ok=OK.format(read=read), read=read)
        lines = "".join(f"            {line}\n" for line in body.splitlines())
        gate = '        if self.method == "eagle3":\n            cfg = self.target_model_config\n'
        yield Shape(
            f"operand-{name}-{read_name}",
            {
                SPECULATIVE: lambda text, g=gate + lines, d=defined: appended(d)(
                    gate_replaced(g)(text)
                )
            },
            moved=False,
        )


def test_an_operation_that_raises_on_the_checks_operand_is_never_not_needed(files_0_16):
    """Before: 14 of the first 16 said ``not-needed`` (exit 0), the check still refusing Kimi;
    the three arithmetic ones (ZeroDivisionError) 6 of 6."""
    wrong = run_all(Eagle3Whitelist, files_0_16, list(operand_shapes()))
    assert not wrong, "\n".join(wrong)


# The check where nothing on its way names EAGLE-3: pydantic's validator ``_verify_args`` hands
# the model type to a function picked from a table by ``self.method``, or hands ``self`` (the
# config holding the target) to a helper of a module whose text never spells ``eagle3``.
POLICY = "vllm/utils/_policy.py"
POLICY_TEXT = (
    'AUX = "eag" + "le" + str(3)\nSUPPORTED = ["llama", "qwen"]\n'
    "def enforce(cfg, *rest):\n"
    '    kind = getattr(cfg.target_model_config.hf_text_config, "model" + "_type")\n'
    "    if cfg.method == AUX and not any(s in kind for s in SUPPORTED):\n"
    '        raise ValueError("refused")\n'
)
DISPATCHES = {
    "get-default": "_CHECKS.get(self.method, lambda model_type: None)({read})",
    "get-or": "(_CHECKS.get(self.method) or (lambda model_type: None))({read})",
    "keyword": "_CHECKS.get(self.method, lambda model_type: None)(model_type={read})",
}
HANDED = {
    "self": "enforce(self)",
    "keyword": "enforce(cfg=self)",
    "alias": "config = self\n        enforce(config, 1)",
}


def unnamed_path_shapes() -> Iterator[Shape]:
    require = (
        "def _require(model_type):\n"
        '    if not any(s in model_type for s in ["llama", "qwen"]):\n'
        '        raise ValueError("refused")\n'
        '_CHECKS = {"eagle3": _require}\n'
    )
    for (name, call), (read_name, read) in itertools.product(
        DISPATCHES.items(), [("plain", TYPE_READS["plain"]), ("chr", TYPE_READS["chr"])]
    ):
        line = "        cfg = self.target_model_config\n        " + call.format(read=read) + "\n"
        yield Shape(
            f"dispatch-{name}-{read_name}",
            {SPECULATIVE: lambda text, g=line: appended(require)(gate_replaced(g)(text))},
            moved=False,
        )
    for name, call in HANDED.items():
        line = f"        from vllm.utils._policy import enforce\n        {call}\n"
        yield Shape(
            f"handed-{name}",
            {SPECULATIVE: gate_replaced(line), POLICY: lambda _text: POLICY_TEXT},
            moved=True,
        )


def test_a_check_reached_with_no_eagle3_named_on_its_way_is_never_not_needed(files_0_16):
    """Before: all 9 said ``not-needed`` (exit 0)."""
    wrong = run_all(Eagle3Whitelist, files_0_16, list(unnamed_path_shapes()))
    assert not wrong, "\n".join(wrong)


# The list reshaped to what else names the model: the check refuses on the target's
# architectures (or its name), and reads no model type at all.
IDENTITY_READS = {
    "architectures": "self.target_model_config.hf_config.architectures[0]",
    "text-architectures": "self.target_model_config.hf_text_config.architectures[-1]",
    "joined": '",".join(self.target_model_config.hf_config.architectures)',
    "name-or-path": "self.target_model_config.hf_config._name_or_path",
    "local": "cfg = self.target_model_config.hf_config\nname = cfg.architectures[0]\nname",
}


def identity_shapes() -> Iterator[Shape]:
    for name, read in IDENTITY_READS.items():
        *setup, value = read.split("\n")
        lines = "".join(f"        {line}\n" for line in setup)
        check = (
            f"{lines}"
            f'        if self.method == "eagle3" and {value.strip()} not in (\n'
            '            "LlamaForCausalLM", "Qwen2ForCausalLM"\n'
            "        ):\n"
            '            raise ValueError("refused")\n'
        )
        yield Shape(f"identity-{name}", {SPECULATIVE: gate_replaced(check)}, moved=False)


def test_a_check_on_the_targets_architectures_is_never_not_needed(files_0_16):
    """Before: all 5 said ``not-needed`` (exit 0): the search looked for model-type reads."""
    wrong = run_all(Eagle3Whitelist, files_0_16, list(identity_shapes()))
    assert not wrong, "\n".join(wrong)


# Kimi listed in a module constant, which the path rebinds by a key or by setattr before the
# check reads it: the list the check sees is not the one written.
REBINDS = {
    "globals": 'globals()["_TARGETS"] = ["llama", "qwen"]',
    "vars": 'vars(__import__("sys").modules[__name__])["_TARGETS"] = ["llama", "qwen"]',
    "dict": '__import__("sys").modules[__name__].__dict__["_TARGETS"] = ["llama", "qwen"]',
    "setattr": 'setattr(__import__("sys").modules[__name__], "_TARGETS", ["llama", "qwen"])',
}


def rebound_list_shapes() -> Iterator[Shape]:
    listed = '_TARGETS = ["llama", "qwen", "kimi_k2", "deepseek_v3"]\n'
    for name, rebind in REBINDS.items():
        check = (
            f"        {rebind}\n"
            '        if self.method == "eagle3" and not any(\n'
            "            s in self.target_model_config.hf_text_config.model_type\n"
            "            for s in _TARGETS\n"
            "        ):\n"
            '            raise ValueError("refused")\n'
        )
        yield Shape(
            f"rebound-{name}",
            {SPECULATIVE: lambda text, c=check: appended(listed)(gate_replaced(c)(text))},
            moved=False,
        )


def test_a_listed_model_type_rebound_away_is_never_present(files_0_16):
    """Before: all 4 said ``present`` (exit 0)."""
    wrong = run_all(Eagle3Whitelist, files_0_16, list(rebound_list_shapes()))
    assert not wrong, "\n".join(wrong)


# Kimi "mapped" in the proposer's chain, but to an object below its config, which lacks the
# attribute there: the branch raises AttributeError for Kimi, so the chain is not present.
MAPPED_FROM = {
    "text-config": "target_model.config.text_config",
    "vision-config": "target_model.config.vision_config",
    "language-model": "target_model.language_model.config",
}


def mapped_below_shapes() -> Iterator[Shape]:
    from test_gate_moved_generated import CHAIN_END

    for name, owner in MAPPED_FROM.items():
        branch = (
            "            elif self.get_model_name(target_model) == (\n"
            '                "KimiK25ForConditionalGeneration"\n'
            "            ):\n"
            "                self.model.config.image_token_index = (\n"
            f"                    {owner}.media_placeholder_token_id\n"
            "                )\n"
        )
        yield Shape(
            f"mapped-{name}",
            {PROPOSER_PATH: lambda text, b=branch: (text or "").replace(CHAIN_END, b + CHAIN_END)},
            moved=False,
        )


def test_kimi_mapped_to_an_object_below_its_config_is_never_present(files_0_16):
    """Before: all 3 said ``present`` (exit 0): the read only had to end in the attribute."""
    from patcher.codemods.mm_image_token import MmImageToken

    wrong = run_all(MmImageToken, files_0_16, list(mapped_below_shapes()))
    assert not wrong, "\n".join(wrong)
