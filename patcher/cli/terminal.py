"""The command's two streams: results on stdout, tables of context and progress on stderr.

Piped, a table is plain aligned text: no padding after the last column, no trailing spaces, no
colour. In a terminal it fits the width: a column wraps at spaces and hyphens, a detail column
at its ``; `` separators and spaces (never inside an identifier), and a detail too long for
what is left goes on continuation lines under its row. ``NO_COLOR`` turns colour off,
``--quiet`` the context and the progress; ``--format json`` moves the tables to stderr and
the command prints its data as one JSON document.

Importing this module costs almost nothing: ``patcher --version`` and ``--help`` load it, and
Rich is imported only to draw a progress bar or a spinner in a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterator

from patcher.cli.overview import terminal_width

TYPE_CHECKING = False  # typing, pathlib and json take milliseconds: patcher --version needs none
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, TextIO

    import rich.console
    import rich.progress

STYLES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "magenta": "35"}
"""The markup's styles, as SGR codes: ``[bold red]text[/]``."""

MARKUP = re.compile(
    r"\[(/|(?:bold|dim|red|green|yellow|magenta)(?: (?:bold|dim|red|green|yellow|magenta))*)\]"
)
"""An opening ``[style ...]`` or the closing ``[/]``; any other bracket is text."""

ESCAPE_CODE = re.compile(r"\x1b\[[0-9;]*m")
"""The styles ``Text.render`` writes."""
CONTROLS = (
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
    "\u2066-\u2069\ufeff\ufff9-\ufffb]"
)
"""What the terminal would act on rather than show: the C0 controls but the newline (escape
sequences, carriage returns, backspaces, tabs), DEL, the C1 controls, the line and paragraph
separators, and the bidirectional overrides, marks and isolates that reorder a line. Compiled
on first use (``controls``): the class and ``NEWLINE_TOO`` take 0.8 ms to compile, which a
command's ``--help`` prints nothing through."""
NEWLINE_TOO = f"\n|{CONTROLS}"


def printable(text: str, newlines: bool = False) -> str:
    """``text`` with every character of ``CONTROLS`` written as its Python escape (``\\x1b``,
    ``\\u202e``), and each newline too with ``newlines``: what a config, an index or a file
    name holds can neither style the terminal, move its cursor, reorder a line, nor start a
    line of its own (a forged ``patcher: error:``). Every line the two consoles print goes
    through here, newlines included (``Console.print`` prints one line a call); the error
    printer keeps the newlines that part an error's several problems."""
    return controls(newlines).sub(_escaped, text)


@functools.cache
def controls(newlines: bool) -> re.Pattern[str]:
    """``CONTROLS``, or ``NEWLINE_TOO`` with ``newlines``, compiled once."""
    return re.compile(NEWLINE_TOO if newlines else CONTROLS)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


GAP = 2
"""Spaces between two columns."""
INDENT = 4
"""Where a continuation line starts."""
NARROWEST_DETAIL = 24
"""A detail column narrower than this goes on continuation lines instead."""


class Text:
    """Plain text with style spans: what markup parses into, cut into lines by offsets."""

    def __init__(self, plain: str, spans: list[tuple[int, int, str]] | None = None) -> None:
        self.plain = plain
        self.spans = spans or []

    @classmethod
    def parse(cls, text: str, markup: bool) -> Text:
        if not markup:
            return cls(text)
        plain: list[str] = []
        spans: list[tuple[int, int, str]] = []
        opened: list[tuple[int, str]] = []
        at = length = 0
        for match in MARKUP.finditer(text):
            piece = text[at : match.start()]
            plain.append(piece)
            length += len(piece)
            at = match.end()
            if match.group(1) != "/":
                opened.append((length, ";".join(STYLES[s] for s in match.group(1).split())))
            elif opened:
                start, codes = opened.pop()
                spans.append((start, length, codes))
        plain.append(text[at:])
        length += len(plain[-1])
        spans += [(start, length, codes) for start, codes in opened]
        return cls("".join(plain), spans)

    def render(self, start: int, end: int, colour: bool) -> str:
        """The characters ``start:end``, with their styles as escape codes in colour."""
        if not colour or not self.spans:
            return self.plain[start:end]
        cuts = sorted(
            {start, end, *(p for s, e, _ in self.spans for p in (s, e) if start < p < end)}
        )
        parts = []
        for left, right in itertools.pairwise(cuts):
            codes = ";".join(c for s, e, c in self.spans if s <= left and right <= e)
            piece = self.plain[left:right]
            parts.append(f"\x1b[{codes}m{piece}\x1b[0m" if codes else piece)
        return "".join(parts)


def breaks(text: str, hyphens: bool) -> list[int]:
    """Where a line may end in ``text``: after a space, and after a hyphen between letters
    (``eagle3-`` ``whitelist``) if ``hyphens``; never inside a word or an identifier."""
    found = [i + 1 for i, c in enumerate(text) if c == " "]
    if hyphens:
        found += [
            i + 1
            for i, c in enumerate(text)
            if c == "-"
            and 0 < i < len(text) - 1
            and text[i - 1].isalnum()
            and text[i + 1].isalnum()
        ]
    return sorted(found)


def wrap(text: str, width: int, hyphens: bool) -> list[tuple[int, int]]:
    """``text`` cut into lines of at most ``width`` (a longer word keeps its own line), as
    (start, end) offsets with the spaces at the cuts left out."""
    lines: list[tuple[int, int]] = []
    for start, end in paragraphs(text):
        while end - start > width:
            line = text[start:end]
            cuts = [(b, b - (line[b - 1] == " ")) for b in breaks(line, hyphens)]
            fitting = [cut for cut in cuts if cut[1] <= width] or cuts[:1]
            if not fitting:
                break
            after, length = fitting[-1]
            lines.append((start, start + length))
            start += after
        lines.append((start, end))
    return lines


def paragraphs(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) offsets of the lines ``text`` already has."""
    start = 0
    for line in text.split("\n"):
        yield start, start + len(line)
        start += len(line) + 1


def shortest(text: str, hyphens: bool) -> int:
    """The narrowest a column holding ``text`` can be: its longest unbreakable piece."""
    cuts = [0, *breaks(text, hyphens), len(text)]
    return max((len(text[a:b].rstrip()) for a, b in itertools.pairwise(cuts)), default=0)


class Column:
    def __init__(self, header: str, right: bool, detail: bool) -> None:
        self.header = header
        self.right = right
        self.detail = detail
        """A detail column wraps at separators and spaces only, or goes on continuation lines."""


class Table:
    """Rows of cells under a title and over a caption; cells may hold markup."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.columns: list[Column] = []
        self.rows: list[tuple[str, ...]] = []
        self.caption = ""

    def add_column(self, header: str, *, justify: str = "left", overflow: str = "wrap") -> None:
        """``justify="right"`` for figures; ``overflow="fold"`` makes it a detail column."""
        self.columns.append(Column(header, justify == "right", overflow == "fold"))

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def lines(self, width: int | None, colour: bool, markup: bool) -> list[str]:
        """The table as lines: natural widths without ``width`` (piped), else fitted to it."""
        rows = [[Text.parse(printable(c, newlines=True), markup) for c in row] for row in self.rows]
        heads = [Text(printable(c.header, newlines=True)) for c in self.columns]
        natural = [
            max(
                len(line) for t in (heads[i], *(r[i] for r in rows)) for line in t.plain.split("\n")
            )
            for i in range(len(self.columns))
        ]
        shown = list(range(len(self.columns)))
        below: list[int] = []  # detail columns moved onto continuation lines
        widths = natural[:]
        if width is not None:
            widths, shown, below = fit(self.columns, heads, rows, natural, width)
        bold = "1" if colour else ""
        out: list[str] = []
        if self.title:
            out += style_lines(printable(self.title, newlines=True), width, bold)
        grid = [heads, *rows] if any(c.header for c in self.columns) else rows
        for number, cells in enumerate(grid):
            header = grid is not rows and number == 0
            drawn = grid_lines(cells, shown, widths, self.columns, colour, header)
            out += drawn
            if header:
                rule = sum(widths[i] for i in shown) + GAP * (len(shown) - 1)
                if width is None:  # piped: as long as the headers, not the longest detail
                    rule = max(len(ESCAPE_CODE.sub("", line).rstrip()) for line in drawn)
                out.append("-" * rule)
            for i in below:
                if cells[i].plain and not header:
                    out += continuation(self.columns[i].header, cells[i], width or 0, colour)
        if self.caption:
            caption = Text.parse(printable(self.caption, newlines=True), markup)
            out += [
                caption.render(a, b, colour)
                for a, b in wrap(caption.plain, width or 1 << 30, False)
            ]
        return [line.rstrip() for line in out]


def fit(
    columns: list[Column], heads: list[Text], rows: list[list[Text]], natural: list[int], width: int
) -> tuple[list[int], list[int], list[int]]:
    """Column widths that fit ``width``: the widest columns narrowed to their longest
    unbreakable piece; a detail column left too narrow goes on continuation lines."""
    count = len(columns)
    widths = natural[:]
    shown = list(range(count))
    below: list[int] = []

    def room() -> int:
        return width - GAP * (len(shown) - 1) - sum(widths[i] for i in shown)

    for i in range(count):
        if columns[i].detail and room() < 0:
            left = widths[i] + room()
            word = max(shortest(r[i].plain, False) for r in rows) if rows else 0
            if left >= max(NARROWEST_DETAIL, word):
                widths[i] = left
            else:
                shown.remove(i)
                below.append(i)
    narrowest = {
        i: max(shortest(t.plain, not columns[i].detail) for t in (heads[i], *(r[i] for r in rows)))
        for i in shown
    }
    while room() < 0:
        wide = [i for i in shown if widths[i] > narrowest[i]]
        if not wide:
            break
        widest = max(wide, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths, shown, below


def grid_lines(
    cells: list[Text],
    shown: list[int],
    widths: list[int],
    columns: list[Column],
    colour: bool,
    header: bool,
) -> list[str]:
    """One row of the grid, each cell wrapped in its column, as lines."""
    wrapped = {i: wrap(cells[i].plain, widths[i], not columns[i].detail) for i in shown}
    height = max((len(w) for w in wrapped.values()), default=1)
    lines = []
    for n in range(height):
        parts = []
        for i in shown:
            start, end = wrapped[i][n] if n < len(wrapped[i]) else (0, 0)
            text = cells[i].render(start, end, colour)
            if header and colour:
                text = f"\x1b[1m{text}\x1b[0m" if text else text
            pad = " " * max(0, widths[i] - (end - start))
            parts.append(pad + text if columns[i].right else text + pad)
        lines.append((" " * GAP).join(parts))
    return lines


def continuation(header: str, cell: Text, width: int, colour: bool) -> list[str]:
    """A detail under its row, indented, one ``; `` separated part a line where they fit."""
    label = f"{header}: " if header else ""
    room = max(width - INDENT - len(label), NARROWEST_DETAIL)
    spans = wrap(cell.plain.replace("; ", ";\n"), room, False)
    return [
        " " * INDENT + (label if n == 0 else " " * len(label)) + cell.render(a, b, colour)
        for n, (a, b) in enumerate(spans)
    ]


def style_lines(text: str, width: int | None, codes: str) -> list[str]:
    lines = [text[a:b] for a, b in wrap(text, width or 1 << 30, True)]
    return [f"\x1b[{codes}m{line}\x1b[0m" if codes else line for line in lines]


class Console:
    """One of the two streams. ``file`` is looked up when printing (tests swap ``sys.stdout``);
    a ``-`` output moves the tables of stdout here, onto stderr."""

    def __init__(self, stderr: bool) -> None:
        self.stderr = stderr
        self.file: TextIO | None = None
        self.quiet = False
        """``--quiet``: no context (tables on stderr) and no progress; results and errors stay."""
        self.tables = True
        """False under ``--format json`` (or ``--json -``): stdout holds the JSON document and
        stderr progress and errors only, as gh's ``--json`` does; the tables are not drawn."""

    @property
    def stream(self) -> TextIO:
        if self.file is not None:
            return self.file
        return sys.stderr if self.stderr else sys.stdout

    @property
    def is_terminal(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    @property
    def colour(self) -> bool:
        return (
            self.is_terminal and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        )

    @property
    def live(self) -> bool:
        """Whether transient progress is drawn: in a terminal, unless ``--quiet``."""
        return self.is_terminal and not self.quiet

    @property
    def width(self) -> int | None:
        """The terminal's columns; None when piped (no width: nothing is wrapped)."""
        return terminal_width(self.stream) if self.is_terminal else None

    def print(self, what: str | Table, *, markup: bool = True, soft_wrap: bool = False) -> None:
        """A line of text, or a table. ``markup``: read ``[style]...[/]`` as styles, not text;
        ``soft_wrap``: leave a long line to the terminal instead of wrapping it at spaces.
        Every string is one line, or a table's cell, title or caption: a newline in it, as any
        control, is written escaped (``printable``), so no value printed starts a line."""
        if isinstance(what, Table):
            if not self.tables or (self.quiet and self.stream is sys.stderr):
                return
            lines = what.lines(self.width, self.colour, markup)
        else:
            text = Text.parse(printable(what, newlines=True), markup)
            width = None if soft_wrap else self.width
            lines = [
                text.render(a, b, self.colour) for a, b in wrap(text.plain, width or 1 << 30, False)
            ]
        self.stream.write("".join(line + "\n" for line in lines))
        self.stream.flush()

    def rich(self) -> rich.console.Console:
        """A Rich console on this stream, for progress bars: imported only when one is drawn."""
        from rich.console import Console as RichConsole

        return RichConsole(file=self.stream, highlight=False, no_color=not self.colour)


out = Console(stderr=False)
err = Console(stderr=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwinding as Ctrl-C does (every temporary file removed on the way out), but
    ending with its own status: 143, where Ctrl-C's is 130."""


SIGINT_STATUS = 128 + 2
SIGTERM_STATUS = 128 + 15


def stop_on_sigterm() -> None:
    """Let SIGTERM unwind like Ctrl-C (``Terminated``), so temporary files are removed on the
    way out. Ctrl-C keeps Python's own handler (``KeyboardInterrupt``)."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise Terminated

    with contextlib.suppress(ValueError):  # not the main thread: it cannot set handlers
        signal.signal(signal.SIGTERM, handler)


def interruption(error: BaseException) -> KeyboardInterrupt | None:
    """The interrupt behind ``error``: itself, or one in its chain, as when Ctrl-C also ended a
    child process (xz) and the write into its pipe failed while the interrupt unwound."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def interrupted(stop: KeyboardInterrupt) -> int:
    """The one line an interrupted command ends with, and its exit status: 143 for SIGTERM,
    130 for Ctrl-C (SIGINT), as a shell reports a process those signals ended."""
    with contextlib.suppress(OSError):  # stderr gone too: the status still says it
        err.print("patcher: interrupted", markup=False)
    return SIGTERM_STATUS if isinstance(stop, Terminated) else SIGINT_STATUS


class StepDisplay:
    """The long steps (``patcher.progress.step``) as transient bars on stderr, in a terminal:
    one Rich live display for all the steps open at a time, gone when the last one ends."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: rich.progress.Progress | None = None
        self.open = 0
        self.tasks: list[rich.progress.TaskID] = []
        """The steps open, the innermost last: a note goes on its line."""

    @contextlib.contextmanager
    def step(self, what: str, total: int | None) -> Iterator[Callable[[int], None]]:
        from rich import progress

        if self.progress is None:
            self.progress = progress.Progress(
                progress.SpinnerColumn(),
                progress.TextColumn("{task.description}"),
                progress.BarColumn(),
                progress.TextColumn("{task.fields[amount]}"),
                progress.TimeElapsedColumn(),
                console=self.console.rich(),
                transient=True,
                redirect_stdout=False,  # results go to stdout as they are, never above a bar
            )
            self.progress.start()
        from rich.markup import escape

        shown = self.progress
        task = shown.add_task(escape(printable(what, newlines=True)), total=total, amount="")
        shown.refresh()  # drawn at once: a step shorter than the refresh period shows too
        self.open += 1

        def advance(amount: int) -> None:
            shown.advance(task, amount)
            done = shown.tasks[shown.task_ids.index(task)].completed
            of = f"/{total / 1e6:.0f}" if total else ""
            shown.update(task, amount=f"{done / 1e6:.0f}{of} MB")

        self.tasks.append(task)
        try:
            yield advance
        finally:
            self.tasks.remove(task)
            shown.remove_task(task)
            self.open -= 1
            if not self.open:
                shown.stop()
                self.progress = None

    def note(self, message: str) -> None:
        """On the innermost open step's line, in place of its amount; with none open, a line."""
        if self.progress is None or not self.tasks:
            self.console.print(f"patcher: {message}", markup=False, soft_wrap=True)
            return
        self.progress.update(self.tasks[-1], amount=printable(message, newlines=True))


class LineDisplay:
    """The long steps as one line each on stderr as they start (off a terminal, unless
    ``--quiet``): a log reads what a run spent its time on, with the size of what is
    downloaded."""

    def __init__(self, console: Console) -> None:
        self.console = console

    @contextlib.contextmanager
    def step(self, what: str, total: int | None) -> Iterator[Callable[[int], None]]:
        size = f" ({total / 1e6:.0f} MB)" if total else ""
        self.console.print(f"patcher: {what}{size}", markup=False, soft_wrap=True)
        yield lambda amount: None

    def note(self, message: str) -> None:
        self.console.print(f"patcher: {message}", markup=False, soft_wrap=True)


def new_table(title: str) -> Table:
    """A table; how it is drawn (width, colour, JSON) is decided by the stream it is printed on."""
    return Table(title)


def context(table: Table) -> None:
    """A table that is context for the command's result (build-wheel's, apply's): on stderr,
    so that stdout holds the result alone; not shown with ``--quiet``."""
    err.print(table)


NAME_MAX = 255
PATH_MAX = 4096
"""Linux's limits, in bytes, on one name in a path and on the whole path: past them, every
call fails with ENAMETOOLONG, so a longer path is refused where it is parsed."""


def path_argument(text: str) -> Path:
    """A path option's value (argparse names the option in the error): not empty, and short
    enough for the kernel, so a bad one is a one-line usage error, not a traceback later."""
    from pathlib import Path

    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    raw = os.fsencode(text)
    if len(raw) >= PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/")):
        raise argparse.ArgumentTypeError(
            f"the path is too long ({len(raw)} bytes; a name may have {NAME_MAX}, "
            f"a path {PATH_MAX - 1})"
        )
    return Path(text)


def add_folder_option(
    parser: argparse.ArgumentParser, flag: str, default: str, meaning: str
) -> None:
    """An option naming a folder patcher writes into (``DIR``), by default one below the working
    directory: the wheel's, the logs', a replica's. The default is kept as text, which argparse
    reads through ``path_argument`` as it reads a value given (a ``Path`` either way): pathlib
    is not imported to show a command's help."""
    parser.add_argument(flag, type=path_argument, default=default, metavar="DIR", help=meaning)


TABLE_FORMATS = ("table", "json")
TABLE_FORMATS_HELP = (
    "table: aligned text (fitted to a terminal); json: the data as one JSON document on stdout, "
    "the tables moved to stderr"
)


def add_format_option(
    parser: argparse.ArgumentParser,
    formats: tuple[str, ...] = TABLE_FORMATS,
    meaning: str = TABLE_FORMATS_HELP,
) -> None:
    """``--format``, on the commands whose result is a table (``table`` by default); ``scan``
    adds a format of its own."""
    parser.add_argument("--format", choices=formats, default="table", help=meaning)


class GuardedStdout:
    """``sys.stdout`` whose failed writes raise ``StdoutError``: a closed pipe ends the command
    quietly and a full disk is one line, where Python would print a traceback."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        if self.stream is None:
            raise closed_stdout()
        try:
            return self.stream.write(text)
        except UnicodeEncodeError:  # a path or name its encoding (PYTHONIOENCODING) lacks
            encoding = self.stream.encoding or "ascii"
            return self.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except OSError as error:
            raise failed_stdout(error) from error

    def flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except OSError as error:
            raise failed_stdout(error) from error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def closed_stdout() -> Exception:
    """No stdout at all (``>&-``): Python gives ``None`` for it."""
    from patcher.errors import StdoutError

    return StdoutError("stdout is closed (>&-): patcher writes its results there")


def failed_stdout(error: OSError) -> Exception:
    from patcher.outputs.named import stdout_error  # loaded once stdout has failed

    return stdout_error(error)


def discard_stdout() -> None:
    """Point fd 1 at /dev/null once stdout has failed, so the interpreter's last flush of what
    is still buffered cannot fail again and print "Exception ignored" after the one line."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ else 1
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError):
        pass


def json_document(format: str | None) -> Path | None:
    """``--format json`` as an output: stdout (``-``), which no ``--json -`` may share."""
    from patcher.outputs.named import STDOUT

    return STDOUT if format == "json" else None


def json_only() -> None:
    """The command's data as JSON on stdout, and on stderr its progress and errors only: every
    text line of stdout goes to stderr, and no table is drawn on either."""
    out.file = sys.stderr
    out.tables = err.tables = False


def print_data(data: object) -> str:
    """``--format json``: the command's data as one JSON document on stdout; its text."""
    import json

    text = json.dumps(data, indent=2) + "\n"
    sys.stdout.write(text)
    return text


def write_document(data: dict[str, Any], json_file: Path | None, format: str | None) -> None:
    """A command's document (``patcher.report``, one shape for all): into ``--json FILE``
    and, under ``--format json``, on stdout; the same text in both."""
    from patcher.outputs.named import write_file
    from patcher.report import text

    if json_file is not None:
        write_file(json_file, text(data).encode(), "--json")
    if format == "json":
        sys.stdout.write(text(data))


def check_outputs(options: dict[str, Path | None]) -> None:
    """The named output files checked before the work that fills them; with one of them ``-``
    (stdout), the tables go to stderr so that stdout holds that output alone; with the JSON
    document there (``--json -``, ``--format json``), no table is drawn at all."""
    from patcher.outputs.named import STDOUT, check_file, distinct_files, one_stdout

    distinct_files(options)
    if one_stdout(options):
        out.file = sys.stderr
        if STDOUT in (options.get("--json"), options.get("--format json")):
            json_only()
    for flag, path in options.items():
        if path is not None:
            check_file(path, flag)
