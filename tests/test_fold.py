"""The constant folder behind every string the gate searches read (``_fold``).

The invariant: where it folds, it agrees with Python; where Python would run away (a huge
width, a huge repeat), it does not fold. A generator wraps random strings in random layers of
run-time spelling and checks both against ``eval``.
"""

from __future__ import annotations

import ast
import base64
import codecs
import random
import time

import pytest

from patcher.codemods._fold import NotConstant, fold, folded_string
from patcher.codemods._normalize import parse


def chr_map(text: str) -> str:
    return f'"".join(map(chr, {[ord(c) for c in text]!r}))'


def layer(text_expr: str, text: str, rng: random.Random) -> tuple[str, str]:
    """One more layer of spelling around an expression whose value is ``text``."""
    kind = rng.randrange(9)
    if kind == 0:
        return f"{text_expr}[::-1][::-1]", text
    if kind == 1:
        return f"({text_expr}).encode().decode()", text
    if kind == 2:
        return f'"".join(reversed({text_expr}[::-1]))', text
    if kind == 3:
        return f"({text_expr}).upper().lower()", text.upper().lower()
    if kind == 4:
        return f'"{{}}".format({text_expr})', text
    if kind == 5:
        return f'"".join(c for c in {text_expr} if c != "\\x00")', text.replace("\x00", "")
    if kind == 6:
        return f'({text_expr}) + ""', text
    if kind == 7:
        return f'"%s" % ({text_expr},)', text
    return f'"".join([{text_expr}])', text


def spelling(text: str, rng: random.Random) -> str:
    """``text`` spelled one of several run-time ways, then wrapped in random layers."""
    ways = [
        repr(text),
        chr_map(text),
        f"{text.encode()!r}.decode()",
        f'__import__("base64").b64decode({base64.b64encode(text.encode()).decode()!r}).decode()',
        f"{text[::-1]!r}[::-1]",
        f'__import__("codecs").decode({codecs.encode(text, "rot13")!r}, "rot13")',
        " + ".join(repr(c) for c in text) or '""',
        f'"".join(map(lambda c: chr(ord(c) - 1), {"".join(chr(ord(c) + 1) for c in text)!r}))',
    ]
    expr = rng.choice(ways)
    value = text
    for _ in range(rng.randrange(3)):
        expr, value = layer(expr, value, rng)
    return expr


@pytest.mark.parametrize("seed", range(8))
def test_folding_agrees_with_python(seed):
    rng = random.Random(seed)
    for _ in range(60):
        text = "".join(rng.choice("eagl3_modeltyp") for _ in range(rng.randrange(1, 12)))
        source = spelling(text, rng)
        truth = eval(source, {"__builtins__": __builtins__})  # the spelling is ours: no input
        assert folded_string(ast.parse(source, mode="eval").body) == truth, source


@pytest.mark.parametrize(
    "source",
    [
        '"{:>99999999}".format("a")',
        'f"{1:>99999999}"',
        '"%99999999s" % "a"',
        '"a".zfill(10**9)',
        '"a".center(10**9)',
        "bytes(10**9)",
        '"ab" * 10**9',
        '["a"] * 10**9',
        '"a" * 4000 + "b" * 4000',
        "str(2**1000)",
        "2**10",  # no power: not folded, whatever its size
    ],
)
def test_what_would_run_away_is_not_folded(source):
    started = time.monotonic()
    with pytest.raises(NotConstant):
        fold(ast.parse(source, mode="eval").body)
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    "source",
    ["x", "open('f').read()", "self.method", "chr(x)", "__import__('os').getcwd()", "eval('1')"],
)
def test_names_and_other_calls_are_not_folded(source):
    with pytest.raises(NotConstant):
        fold(ast.parse(source, mode="eval").body)


@pytest.mark.parametrize(
    "statement",
    [
        'warnings.warn("refused")',
        'warn("refused")',
        '__import__("warnings").warn("refused")',
        "warnings.warn_explicit('m', UserWarning, 'f', 1)",
        "sys.exit(1)",
        "os._exit(1)",
        "os.abort()",
        "exit(1)",
    ],
)
def test_refusals_other_than_raise_read_as_raise(statement):
    (node,) = parse(statement).body
    assert isinstance(node, ast.Raise) and node.lineno == 1


@pytest.mark.parametrize(
    "statement",
    ['logger.warn("x")', 'self.logger.warn("x")', "print(1)", "warnings.catch_warnings()"],
)
def test_other_calls_stay_calls(statement):
    (node,) = parse(statement).body
    assert isinstance(node, ast.Expr)
