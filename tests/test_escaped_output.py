"""Issue 38, 4: text from configs, indexes and file names reaches the terminal with its control
characters escaped: no escape sequence, carriage return, C1 control, line separator or bidi
override is written raw, and no config value starts a line of its own (a forged
``patcher: error:``). Generated: every such character, in every field ``doctor`` prints, in the
names an index lists, and through the consoles every command prints with.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeindex import FILENAME, VERSION, FakeIndex, build_wheel, loopback_server, own_cache
from pytest_httpserver import HTTPServer

from patcher.cli import terminal
from patcher.cli.parser import main

HOSTILE = [
    *(chr(c) for c in range(0x20)),
    "\x7f",
    *(chr(c) for c in range(0x80, 0xA0)),
    "\u061c",
    "\u200e",
    "\u200f",
    "\u2028",
    "\u2029",
    *(chr(c) for c in range(0x202A, 0x202F)),
    *(chr(c) for c in range(0x2066, 0x206A)),
    "\ufeff",
    *(chr(c) for c in range(0xFFF9, 0xFFFC)),
]
"""Every C0 control, DEL, every C1 control, the line and paragraph separators, the bidi marks,
embeddings, overrides and isolates, the byte-order mark and the interlinear annotations."""

RAW = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufff9-\ufffb]"
)
"""What may never reach the terminal: the newline aside, which ends the lines we write."""

FORGED = "patcher: error: FORGED"


def hostile(char: str) -> str:
    """A value that would forge a line, and colour the terminal, if printed raw."""
    return f"Llama{char}{FORGED}\x1b[31mRED\x1b]0;title\x07{char}"


def check(text: str, char: str) -> None:
    """No raw control, and no line that a config value began."""
    assert not RAW.search(text), (repr(char), text)
    for line in text.splitlines():
        assert not line.lstrip().startswith(("FORGED", FORGED)), (repr(char), text)
    errors = [line for line in text.split("\n") if line.startswith("patcher: error:")]
    assert len(errors) <= 1, (repr(char), text)


@pytest.mark.parametrize("code", range(0x110000)[::0x1000] or [0])
def test_printable_escapes_exactly_the_controls(code: int) -> None:
    """Every code point (in blocks of 4096 per test): a control comes out as its escape, any
    other character as itself, and the result holds no control."""
    chars = "".join(chr(c) for c in range(code, code + 0x1000) if not 0xD800 <= c < 0xE000)
    shown = terminal.printable(chars, newlines=True)
    assert not RAW.search(shown) and "\n" not in shown
    for char in chars:
        alone = terminal.printable(char, newlines=True)
        if RAW.match(char) or char == "\n":
            assert alone == ascii(char)[1:-1].replace("\\n", "\\x0a").replace(
                "\\t", "\\x09"
            ).replace("\\r", "\\x0d"), repr(char)
        else:
            assert alone == char


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c):04X}" for c in HOSTILE])
def test_the_consoles_write_no_control_from_a_line_or_a_table(
    char: str, capsys: pytest.CaptureFixture[str]
) -> None:
    value = hostile(char)
    terminal.err.print(f"patcher: note: {value}", markup=False)
    terminal.out.print(f"[bold]{value}[/]")
    table = terminal.new_table(f"title {value}")
    table.add_column(f"head {value}")
    table.add_column("detail", overflow="fold")
    table.add_row(value, f"a; {value}; b")
    table.caption = f"caption {value}"
    terminal.out.print(table)
    terminal.err.print(table)
    out, err = capsys.readouterr()
    check(out, char)
    check(err, char)


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c):04X}" for c in HOSTILE])
def test_an_error_naming_a_config_value_is_one_escaped_line(
    char: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error printer: an error's text is escaped before it is cut at its newlines, so a
    ``\\v``, ``\\f``, ``\\x1c``, ``\\x85`` or U+2028 (which ``str.splitlines`` cuts at) cannot
    start a line."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": [hostile(char)]}))
    assert main(["replica", "--from", str(model), "--out", str(tmp_path / "r")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    check(err, char)


READER = (
    "def get_eagle3_aux_layers_from_config(spec_config):\n"
    "    hf_config = spec_config.draft_model_config.hf_config\n"
    "    return getattr(hf_config, 'eagle_aux_hidden_state_layer_ids', None)\n"
)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel doctor reads: the V2 runner's id reader, nothing else."""
    path = tmp_path_factory.mktemp("release") / "vllm-0.99.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("vllm/__init__.py", "")
        wheel.writestr("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", READER)
        wheel.writestr("vllm-0.99.0.dist-info/METADATA", "Name: vllm\nVersion: 0.99.0\n")
    return path


DRAFTER = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 64,
    "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
}
TARGET = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 8,
    "text_config": {"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
}
FIELDS = [
    ("drafter", ("architectures", 0)),
    ("drafter", ("model_type",)),
    ("drafter", ("trained_with",)),
    ("drafter", ("training_framework",)),
    ("drafter", ("_name_or_path",)),
    ("drafter", ("torch_dtype",)),
    ("drafter", ("speculators_model_type",)),
    ("drafter", ("draft_vocab_size",)),
    ("drafter", ("hidden_size",)),
    ("drafter", ("eagle_aux_hidden_state_layer_ids", 1)),
    ("drafter", ("a key\x1b[31m named by a config",)),
    ("target", ("architectures", 0)),
    ("target", ("model_type",)),
    ("target", ("num_hidden_layers",)),
    ("target", ("text_config", "architectures", 0)),
    ("target", ("text_config", "model_type")),
    ("folder", ()),
]
"""Each string a config can hold where doctor reads or names it, the folder's own name too."""


def placed(config: dict, where: tuple, value: str) -> dict:
    config = json.loads(json.dumps(config))
    holder = config
    for key in where[:-1]:
        holder = holder[key]
    if where[-1] == "a key\x1b[31m named by a config":
        holder[where[-1] + value] = 1
    else:
        holder[where[-1]] = value
    return config


@pytest.mark.parametrize(
    ("side", "where"), FIELDS, ids=[f"{s}-{'.'.join(map(str, w)) or 'name'}" for s, w in FIELDS]
)
def test_doctor_prints_every_config_string_escaped(
    side: str, where: tuple, release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every hostile character in each field doctor reads: its report (stdout), its errors
    and notes (stderr) hold no raw control and no line a config began; --format json stays
    JSON (json.dumps escapes for itself; checked for one character in eight)."""
    for n, char in enumerate(HOSTILE):
        value = hostile(char)
        named = value.replace("/", "").replace("\x00", "")  # what a file name can hold
        drafter_name = f"drafter{n}" + (named if side == "folder" else "")
        drafter = tmp_path / drafter_name
        model = tmp_path / f"model{n}"
        drafter.mkdir()
        model.mkdir()
        d = placed(DRAFTER, where, value) if side == "drafter" else DRAFTER
        t = placed(TARGET, where, value) if side == "target" else TARGET
        (drafter / "config.json").write_text(json.dumps(d))
        (model / "config.json").write_text(json.dumps(t))
        argv = ["doctor", "--drafter", str(drafter), "--model", str(model), "--wheel", str(release)]
        code = main(argv)
        out, err = capsys.readouterr()
        check(out, char)
        check(err, char)
        assert code in (0, 1, 2)
        if code != 2:
            assert out.startswith("doctor: "), out
        if code == 2:
            assert out == "" and err.count("\n") == 1, err
            continue
        if n % 8:  # JSON for one character in eight: json.dumps escapes the rest alike
            continue
        assert main([*argv, "--format", "json"]) == code
        json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from loopback_server()


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c):04X}" for c in HOSTILE])
def test_names_an_index_lists_are_printed_escaped(
    char: str,
    server: HTTPServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A listing whose file names, project name, versions and URLs hold a hostile character:
    whatever diff and scan say of them is escaped."""
    own_cache(tmp_path, monkeypatch, timeout=5)
    server.clear()
    wheel = build_wheel(4096)
    fake = FakeIndex(server, wheel)
    value = hostile(char)
    page = json.loads(fake.page.body)
    good = dict(page["files"][0])
    variants = [
        {**good, "filename": FILENAME.replace(".whl", f"{value}.whl")},
        {**good, "filename": FILENAME.replace("0.16.0", f"0.16.0{value}")},
        {**good, "url": good["url"] + value},
        {**good, "hashes": {"sha256": value}},
        {**good, "size": value},
        {**good, "yanked": value},
        {**good, "requires-python": value},
    ]
    for files, name in (
        ([*variants, good], "vllm"),
        (variants, "vllm"),
        ([good], f"vllm{value}"),
    ):
        fake.page.body = json.dumps({**page, "files": files, "name": name}).encode()
        for argv in (
            ["diff", "--vllm", VERSION, "--platform", "x86_64"],
            ["diff", "--vllm", f"0.16.0{value}", "--platform", "x86_64"],
            ["scan", "--vllm", VERSION, "--platform", "x86_64"],
        ):
            main([*argv, "--index-url", fake.url])
            out, err = capsys.readouterr()
            check(err, char)
            if argv[0] == "scan":
                check(out, char)


def test_a_step_shown_in_a_terminal_is_escaped() -> None:
    """The transient bars (Rich, in a terminal): a step's text is escaped, markup included."""
    console = terminal.Console(stderr=True)
    console.file = io.StringIO()
    display = terminal.StepDisplay(console)
    with display.step(f"downloading {hostile(chr(0x1B))}[bold]x[/]", None) as advance:
        advance(1)
        assert display.progress is not None
        (task,) = display.progress.tasks
        assert not RAW.search(task.description)
        assert "\\x1b" in task.description and "\\[bold]" in task.description


@pytest.mark.parametrize(
    "char", ["\n", *HOSTILE], ids=[f"U+{ord(c):04X}" for c in ["\n", *HOSTILE]]
)
def test_a_path_the_user_named_is_one_escaped_line(
    char: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, the fourth hostile pass: a newline in ``--source``'s path started a forged
    ``patcher: error:`` line, since the printer cut every error at its newlines. An error is
    one line now; only one made of several problems (``PatcherError.several``) is several."""
    if char in "\x00/":
        pytest.skip("not in a file name")
    folder = tmp_path / f"tree{char}{FORGED}"
    folder.mkdir()
    assert main(["apply", "--source", str(folder)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    check(err, char)


@pytest.mark.parametrize("char", ["\n", "\x1b", "\r", "\u202e"])
def test_the_cache_root_is_printed_escaped(
    char: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / f"cache{char}{FORGED}"
    root.mkdir()
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(root))
    assert main(["cache", "dir"]) == 0
    out, _ = capsys.readouterr()
    assert out.count("\n") == 1
    check(out, char)


def test_an_error_of_several_problems_is_a_line_each() -> None:
    from patcher.errors import PatcherError

    error = PatcherError.several(["a: one", "b: two\nforged"])
    assert error.lines() == ["a: one", "b: two\nforged"] and str(error).count("\n") == 2
