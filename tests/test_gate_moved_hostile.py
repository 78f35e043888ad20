"""Hostile moved gates, made from the real 0.16.0 tree (issue 38, class 1, the hostile pass).

test_gate_moved_generated moves the check into helpers; a hostile pass found more shapes the
search missed, each still refusing Kimi after a "patched" run that said ``not-needed``. This
generates them as combinations of three things:

- where the guard lives: a function nested in the method that calls it, a function of
  speculative.py, a ``@staticmethod`` or ``@classmethod`` of ``SpeculativeConfig``, a new
  module (vllm/config/eagle3_support.py) imported at the top, inside the method or as a module;
- how it refuses: guard clauses (``if method != "eagle3": return``, ``if mt in SUPPORTED:
  return``, then ``raise``), ``any(...)`` then ``raise``, a ``for`` loop over the list that
  returns on a match, a ``for``/``else``, ``cond and _refuse(msg)`` where ``_refuse`` raises, an
  ``assert``;
- how the model type reaches it: as a value, as the target's config, as the whole speculative
  config, through a local of the caller, as keywords; called from ``_verify_args`` or
  ``__post_init__``.

And the image-token lookup with its attribute's name built at run time: an f-string of a local,
``%``, ``.format``, a constant imported from another module, concatenation with a constant.

The invariant is the truth, not the codemod's word: each shape's guard is cut out of the tree
and run (``refuses``) with Kimi's model type. Unpatched it refuses (the shape is sound); so a
``not-needed`` is always false, and an ``applied`` or ``present`` holds only where the guard, cut
out of the tree as the run left it, accepts Kimi. ``failed``/``ambiguous`` must name a place.
"""

from __future__ import annotations

import ast
import itertools
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from codemod_helpers import KIMI
from test_gate_moved_generated import Memory, python_files, shaped

from patcher.codemods.base import Status, Tree
from patcher.codemods.eagle3_whitelist import Eagle3Whitelist
from patcher.codemods.mm_image_token import MmImageToken
from patcher.codemods.options import FileOptions

pytestmark = pytest.mark.network

SPECULATIVE = "vllm/config/speculative.py"
PROPOSER = "vllm/v1/spec_decode/eagle.py"
SUPPORT = "vllm/config/eagle3_support.py"
GATE_START = "        eagle3_target_supported = ["
GATE_END = "        self.verify_equal_vocab_size_if_draft_model()\n        return self\n"
POST_INIT = "    def __post_init__(self):\n"
BEFORE_METHOD = "    def verify_equal_vocab_size_if_draft_model(self):"
TOP_IMPORT = "from vllm.config.utils import config\n"
TYPE = "self.target_model_config.hf_text_config.model_type"
SUPPORTED = '["llama", "qwen", "minicpm", "gpt_oss"]'


@dataclass(frozen=True)
class Shape:
    name: str
    changes: Mapping[str, Callable[[str | None], str]]
    guard: str = ""  # the guard function's name, cut out and run by ``refuses``
    lists: tuple[str, ...] = ()  # the names its list is bound to
    args: Callable[[], tuple[Any, ...]] = tuple
    homes: tuple[str, ...] = field(default=(SPECULATIVE,))  # where the guard's pieces are


# How the model type reaches the guard: (its parameters, what it binds first, the call's
# arguments, what the caller binds first, the arguments ``refuses`` runs it with)
def kimi_config() -> SimpleNamespace:
    return SimpleNamespace(hf_text_config=SimpleNamespace(model_type="kimi_k2"))


INPUTS: dict[str, tuple[str, str, str, str, Callable[[], tuple[Any, ...]]]] = {
    "value": ("method, mt", "", f"self.method, {TYPE}", "", lambda: ("eagle3", "kimi_k2")),
    "config": (
        "method, config",
        "mt = config.hf_text_config.model_type\n",
        "self.method, self.target_model_config",
        "",
        lambda: ("eagle3", kimi_config()),
    ),
    "whole-config": (
        "spec",
        "method = spec.method\nmt = spec.target_model_config.hf_text_config.model_type\n",
        "self",
        "",
        lambda: (SimpleNamespace(method="eagle3", target_model_config=kimi_config()),),
    ),
    "caller-local": (
        "method, mt",
        "",
        "self.method, model_type",
        f"model_type = {TYPE}\n",
        lambda: ("eagle3", "kimi_k2"),
    ),
    "keywords": ("*, method, mt", "", f"method=self.method, mt={TYPE}", "", lambda: ("kw",)),
}
# how it refuses, ``L`` standing for the list's name
HOWS = {
    "guard-clauses": 'if method != "eagle3":\n    return\nif mt in L:\n    return\n'
    "raise ValueError(f'EAGLE-3 does not support {mt}')\n",
    "guard-any": 'if method != "eagle3":\n    return\nif any(s in mt for s in L):\n    return\n'
    "raise ValueError(mt)\n",
    "any-raise": 'if method == "eagle3" and not any(s in mt for s in L):\n'
    "    raise ValueError(mt)\n",
    "for-loop": 'if method != "eagle3":\n    return\nfor s in L:\n    if s in mt:\n'
    "        return\nraise ValueError(mt)\n",
    "for-else": 'if method == "eagle3":\n    for s in L:\n        if s in mt:\n'
    "            break\n    else:\n        raise ValueError(mt)\n",
    "and-refuse": 'method == "eagle3" and not any(s in mt for s in L) and _refuse(mt)\n',
    "assert": 'if method == "eagle3":\n    assert any(s in mt for s in L), mt\n',
    "methods-tuple": "if method not in SPEC_METHODS:\n    return\nif not any(s in mt for s in L):\n"
    "    raise ValueError(mt)\n",
}
METHODS = 'SPEC_METHODS = ("eagle3",)\n'
"""The methods the check applies to, a constant of its module: its function names no EAGLE-3."""
REFUSE = "def _refuse(message):\n    raise ValueError(message)\n"
WHERES = (
    "nested",
    "module-function",
    "staticmethod",
    "classmethod",
    "new-module-top",
    "new-module-local",
    "new-module-alias",
    "relay",
)
RELAY = "vllm/config/utils.py"
"""A module naming no EAGLE-3, where the relay hands the check the speculative config's parts."""
RELAYED = "vllm/config/spec_support.py"
"""The check's module for the relay: its name holds no EAGLE-3 either."""


def indent(text: str, by: int) -> str:
    return textwrap.indent(text, " " * by)


def guard_def(name: str, given: str, how: str, listed: str) -> str:
    params, bind, *_ = INPUTS[given]
    body = bind + HOWS[how].replace(" L", f" {listed}")
    return f"def {name}({params}):\n{indent(body, 4)}"


def into_caller(caller: str, statements: str) -> Callable[[str], str]:
    """speculative.py with the 0.16.0 gate gone and ``statements`` (at column 0) run in
    ``_verify_args`` where it was, or at the head of ``__post_init__``."""

    def change(text: str) -> str:
        start, end = text.index(GATE_START), text.index(GATE_END)
        body = indent(statements, 8) if caller == "verify" else ""
        text = text[:start] + body + text[end:]
        if caller == "post-init":
            at = text.index(POST_INIT) + len(POST_INIT)
            text = text[:at] + indent(statements, 8) + text[at:]
        return text

    return change


def whitelist_shape(where: str, how: str, given: str, caller: str) -> Shape:
    _, _, args, caller_bind, run_args = INPUTS[given]
    refuse = REFUSE if how == "and-refuse" else ""
    prelude = "if self.target_model_config is not None:\n" if caller == "post-init" else ""
    extra: dict[str, Callable[[str | None], str]] = {}
    homes: tuple[str, ...] = (SPECULATIVE,)
    constant = f"EAGLE3_SUPPORTED = {SUPPORTED}\n{METHODS}"
    if where == "nested":
        name, listed = "_gate", "eagle3_target_supported"
        statements = (
            f"eagle3_target_supported = {SUPPORTED}\n{METHODS}\n"
            + guard_def(name, given, how, listed)
            + ("\n" + refuse if refuse else "")
            + "\n"
            + caller_bind
            + f"{name}({args})\n"
        )
        tail = ""
    elif where in ("module-function", "staticmethod", "classmethod"):
        name, listed = "_gate", "EAGLE3_SUPPORTED"
        call = {
            "module-function": name,
            "staticmethod": f"SpeculativeConfig.{name}",
            "classmethod": f"self.{name}",
        }[where]
        statements = caller_bind + f"{call}({args})\n"
        tail = constant + "\n\n" + refuse
        if where == "module-function":
            tail += "\n\n" + guard_def(name, given, how, listed)
    elif where == "relay":
        name, listed = "check_target", "EAGLE3_SUPPORTED"
        homes = (RELAYED,)
        module = constant + "\n\n" + (refuse + "\n\n" if refuse else "")
        module += guard_def(name, given, how, listed)
        relay = (
            "def verify_spec_target(spec):\n"
            f"    from vllm.config.spec_support import {name}\n\n"
            + indent(caller_bind.replace("self", "spec"), 4)
            + f"    {name}({args.replace('self', 'spec')})\n"
        )
        extra[RELAYED] = lambda _text, module=module: module
        extra[RELAY] = lambda text, relay=relay: (text or "").rstrip("\n") + "\n\n\n" + relay
        statements = (
            "from vllm.config.utils import verify_spec_target\n\nverify_spec_target(self)\n"
        )
        tail = ""
    else:
        name, listed = "check_eagle3_target", "EAGLE3_SUPPORTED"
        homes = (SUPPORT,)
        module = constant + "\n\n" + (refuse + "\n\n" if refuse else "")
        module += guard_def(name, given, how, listed)
        extra[SUPPORT] = lambda _text, module=module: module
        if where == "new-module-local":
            statements = (
                f"from vllm.config.eagle3_support import {name}\n\n" + caller_bind
            ) + f"{name}({args})\n"
        elif where == "new-module-alias":
            statements = (
                "from vllm.config import eagle3_support as support\n\n" + caller_bind
            ) + f"support.{name}({args})\n"
        else:
            statements = caller_bind + f"{name}({args})\n"
        tail = ""
    if prelude:
        statements = prelude + indent(statements, 4)

    def speculative(text: str | None) -> str:
        assert text is not None
        text = into_caller(caller, statements)(text)
        if where in ("staticmethod", "classmethod"):
            decorated = (
                f"@{where}\n"
                + guard_def(name, given, how, listed).replace(
                    f"def {name}(",
                    f"def {name}(cls, " if where == "classmethod" else f"def {name}(",
                )
                + "\n"
            )
            text = text.replace(BEFORE_METHOD, indent(decorated, 4) + BEFORE_METHOD)
        if where == "new-module-top":
            text = text.replace(
                TOP_IMPORT, TOP_IMPORT + f"from vllm.config.eagle3_support import {name}\n"
            )
        if tail:
            text = text.rstrip("\n") + "\n\n\n" + tail
        return text

    caller_name = "" if caller == "verify" else f"-{caller}"
    return Shape(
        f"{where}-{how}-{given}{caller_name}",
        {SPECULATIVE: speculative, **extra},
        guard=name,
        lists=(listed, "SPEC_METHODS"),
        args=run_args,
        homes=homes,
    )


def whitelist_shapes() -> list[Shape]:
    """Every place with every refusal (the input and the caller taking turns), then every
    input for the refusals the pass found most often."""
    shapes: dict[str, Shape] = {}
    givens, callers = list(INPUTS), ["verify", "post-init"]
    for i, (where, how) in enumerate(itertools.product(WHERES, HOWS)):
        shape = whitelist_shape(where, how, givens[i % len(givens)], callers[i % 3 == 2])
        shapes[shape.name] = shape
    for where, how, given in itertools.product(
        ("nested", "module-function", "new-module-top", "relay"),
        ("guard-clauses", "and-refuse", "methods-tuple"),
        INPUTS,
    ):
        shape = whitelist_shape(where, how, given, "verify")
        shapes.setdefault(shape.name, shape)
    return list(shapes.values())


# The refusal left in _verify_args, as an expression: the call that raises runs only where the
# test before it lets it (``and``/``or`` short-circuit, a conditional expression)
IN_PLACE_FORMS = {
    "and-refuse": 'self.method == "eagle3" and not any(s in MT for s in L) and _refuse(MT)\n',
    "or-refuse": 'self.method != "eagle3" or any(s in MT for s in L) or _refuse(MT)\n',
    "or-membership": 'self.method != "eagle3" or MT in L or _refuse(MT)\n',
    "nested-and-or": 'self.method == "eagle3" and (any(s in MT for s in L) or _refuse(MT))\n',
    "ternary": '_ = None if self.method != "eagle3" or any(s in MT for s in L) else _refuse(MT)\n',
    "ternary-statement": '_refuse(MT) if self.method == "eagle3" and MT not in L else None\n',
    "assigned-and": '_ = self.method == "eagle3" and not any(s in MT for s in L) and _refuse(MT)\n',
    "if-then-and": 'if self.method == "eagle3":\n    not any(s in MT for s in L) and _refuse(MT)\n',
}
IN_PLACE_TYPES = {
    "attribute": ("", TYPE),
    "local": (f"mt = {TYPE}\n", "mt"),
    "getattr": (
        'mt = getattr(self.target_model_config.hf_text_config, "model_type")\n',
        "mt",
    ),
}


def in_place_shapes() -> list[Shape]:
    shapes = []
    for (form, body), (given, (bind, read)) in itertools.product(
        IN_PLACE_FORMS.items(), IN_PLACE_TYPES.items()
    ):
        statements = f"L = {SUPPORTED}\n{bind}" + body.replace("MT", read)

        def speculative(text: str | None, statements: str = statements) -> str:
            assert text is not None
            text = into_caller("verify", statements)(text)
            return text.rstrip("\n") + "\n\n\n" + REFUSE

        shapes.append(Shape(f"in-place-{form}-{given}", {SPECULATIVE: speculative}))
    return shapes


def refuses(shape: Shape, texts: Mapping[str, str]) -> bool:
    """Whether the shape's guard, cut out of ``texts`` (its function, decorators dropped, the
    list's assignment and ``_refuse``, wherever they are), refuses Kimi when run."""
    wanted: list[ast.stmt] = []
    functions: list[ast.stmt] = []
    for path in shape.homes:
        for node in ast.walk(ast.parse(texts[path])):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in shape.lists for t in node.targets
            ):
                wanted.append(node)
            elif isinstance(node, ast.FunctionDef) and node.name in (shape.guard, "_refuse"):
                node.decorator_list = []
                functions.append(node)
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module([*wanted, *functions], []), "<guard>", "exec"), namespace)
    guard = namespace[shape.guard]
    args = shape.args()
    keywords = {"method": "eagle3", "mt": "kimi_k2"} if args == ("kw",) else {}
    params = next(f for f in functions if getattr(f, "name", "") == shape.guard).args
    head = (None,) if params.args and params.args[0].arg == "cls" else ()
    try:
        guard(*head, **keywords) if keywords else guard(*head, *args)
    except (ValueError, AssertionError):
        return True
    return False


# The image-token lookup, its name built at run time -----------------------------------------
FALLBACK = "                    target_model.config.image_token_index\n"
NAMES = "vllm/model_executor/models/names.py"
IMAGE_READS: dict[str, tuple[str, str, dict[str, str]]] = {
    # how the attribute's name is built: (the read, an import for eagle.py, other modules)
    "f-string-local": ('getattr(target_model.config, f"image_token_{suffix}")', "", {}),
    "percent": ('getattr(target_model.config, "image_token_%s" % "index")', "", {}),
    "percent-local": ('getattr(target_model.config, "image_token_%s" % suffix)', "", {}),
    "format": ('getattr(target_model.config, "image_token_{}".format("index"))', "", {}),
    "format-local": ('getattr(target_model.config, "image_token_{}".format(suffix))', "", {}),
    "imported-constant": (
        "getattr(target_model.config, IMAGE_TOKEN_ATTR)",
        "from vllm.model_executor.models.names import IMAGE_TOKEN_ATTR\n",
        {NAMES: 'IMAGE_TOKEN_ATTR = "image_token_index"\n'},
    ),
    "imported-module-constant": (
        "getattr(target_model.config, names.IMAGE_TOKEN_ATTR)",
        "from vllm.model_executor.models import names\n",
        {NAMES: 'IMAGE_TOKEN_ATTR = "image_token_index"\n'},
    ),
    "imported-suffix": (
        'getattr(target_model.config, "image_token_" + SUFFIX)',
        "from vllm.model_executor.models.names import SUFFIX\n",
        {NAMES: 'SUFFIX = "index"\n'},
    ),
    "module-constant": ("getattr(target_model.config, IMAGE_TOKEN_ATTR)", "", {}),
    "concatenated-local": ('getattr(target_model.config, "image_token_" + suffix)', "", {}),
    "join-local": ('getattr(target_model.config, "_".join(["image_token", suffix]))', "", {}),
    "parameter": ("read_token(target_model.config)", "", {}),
}


def image_shape(name: str) -> Shape:
    read, imports, modules = IMAGE_READS[name]

    def proposer(text: str | None) -> str:
        assert text is not None
        assert FALLBACK in text
        local = '                suffix = "index"\n' if "suffix" in read else ""
        text = text.replace(
            "            else:\n                self.model.config.image_token_index = (\n"
            + FALLBACK,
            "            else:\n"
            + local
            + "                self.model.config.image_token_index = (\n"
            + f"                    {read}\n",
        )
        if name == "module-constant":
            imports_ = 'IMAGE_TOKEN_ATTR = "image_token_index"\n'
        else:
            imports_ = imports
        if name == "parameter":
            text = (
                text.rstrip("\n")
                + '\n\n\ndef read_token(config, name="image_token_index"):\n'
                + "    return getattr(config, name)\n"
            )
        at = text.index("\nclass ")
        return text[:at] + "\n" + imports_ + text[at:]

    changes: dict[str, Callable[[str | None], str]] = {PROPOSER: proposer}
    for path, text in modules.items():
        changes[path] = lambda _old, text=text: text
    return Shape(f"image-{name}", changes)


def image_shapes() -> list[Shape]:
    return [image_shape(name) for name in IMAGE_READS]


# Running them -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files_0_16(release) -> dict[str, bytes]:
    """Every Python file of the real vLLM 0.16.0 package, once for the module."""
    return python_files(release("0.16.0"))


def judge(codemod: type, base: Mapping[str, bytes], shape: Shape) -> str | None:
    """What is false in the codemod's outcome on ``shape``; None where it told the truth."""
    changed = shaped(base, shape)
    texts = {p: changed.get(p) or base[p].decode() for p in shape.homes}
    if shape.guard:
        assert refuses(shape, texts), f"{shape.name}: the shape does not refuse Kimi"
    tree = Tree(Memory(base, changed))
    outcome = codemod(KIMI, FileOptions()).run(tree)
    status = outcome.status
    if status in (Status.FAILED, Status.AMBIGUOUS):
        return None if ".py:" in outcome.detail else f"{status} without a place: {outcome.detail}"
    if status in (Status.APPLIED, Status.PRESENT) and shape.guard:
        after = {p: tree.overlay.get(p, texts[p]) for p in shape.homes}
        if not refuses(shape, after):
            return None
        return f"{status}, but the guard still refuses Kimi ({outcome.detail})"
    if status is Status.APPLIED and not shape.guard and SPECULATIVE in tree.overlay:
        output = {**changed, SPECULATIVE: tree.overlay[SPECULATIVE]}
        again = codemod(KIMI, FileOptions()).run(Tree(Memory(base, output)))
        if again.status is Status.PRESENT:
            return None
        return f"applied, but its output is {again.status} ({again.detail})"
    return f"{status} ({outcome.detail})"


def run_all(codemod: type, base: Mapping[str, bytes], shapes: list[Shape]) -> list[str]:
    wrong = []
    for shape in shapes:
        problem = judge(codemod, base, shape)
        if problem is not None:
            wrong.append(f"{shape.name}: {problem}")
    print(f"{len(shapes)} shapes, {len(wrong)} false claims")
    return wrong


def test_the_shapes_are_many_and_distinct():
    names = [s.name for s in [*whitelist_shapes(), *in_place_shapes()]]
    assert len(names) == len(set(names)) >= 50
    images = [s.name for s in image_shapes()]
    assert len(images) == len(set(images)) >= 10


def test_a_hostile_whitelist_gate_is_never_not_needed(files_0_16):
    wrong = run_all(Eagle3Whitelist, files_0_16, whitelist_shapes())
    assert not wrong, "\n".join(wrong)


def test_a_refusal_run_by_an_expression_is_never_not_needed_nor_present(files_0_16):
    """``cond and _refuse(msg)``, ``ok or _refuse(msg)``, a conditional expression: in the file
    the codemod decides, they are a refusal on the model type, not an absent or accepting
    check."""
    wrong = run_all(Eagle3Whitelist, files_0_16, in_place_shapes())
    assert not wrong, "\n".join(wrong)


def test_a_hostile_image_token_name_is_never_not_needed(files_0_16):
    wrong = run_all(MmImageToken, files_0_16, image_shapes())
    assert not wrong, "\n".join(wrong)
