"""A warm ``patcher build-wheel --wheel``: the same command line, run again on the same bytes,
writes the wheel it wrote before at the speed of a copy.

A build reads the official wheel, runs the patchset's codemods and decides each gate, verifies
every member against RECORD, and lays the patched wheel out as pieces: ranges of the official
wheel and new bytes (``patcher.outputs.wheel``). That layout depends on nothing but its inputs,
so after a build the console script keeps it in the cache (``remember``), keyed by the command
line (its words, the working folder, the environment that reaches patcher, the interpreter and
where patcher is), with what it printed. The next run of the same command line (``run``,
called by ``patcher.cli.main`` before any parser or command module is imported) writes the
pieces again, the ranges copied by the kernel, and prints the same, if every input is as it
was:

- the official wheel's state (``raw_copy.FileState``: device, inode, size, mtime, ctime) is the
  one its bytes had when they were hashed, verified against RECORD and read by the codemods,
  and it was settled then (``raw_copy.settled``), so no write since can have left it as it was;
  it is checked again after the copy, so the bytes copied are those bytes;
- patcher's code, its built-in patchsets and the patchset file named, the proofs a JSON
  document reports, and the distributions installed beside patcher are in the state they had
  before the build began (the same names, each file's state settled then and the same now);
- the output folder exists, and holds no file at the wheel's name, or ``--force`` was given.

Anything else (an entry missing or not whole, a file changed, an error of any kind before the
wheel is in place) runs the command as usual, which prints its own errors; so does any other
command line. The entry carries the sha256 of its payload, as every checked cache entry does
(``patcher.cache.write_checked``).

``run`` imports nothing but ``hashlib``, ``json`` and ``signal`` beyond what Python's start
has loaded: its whole cost is meant to sit within a fifth of a ``cp`` of the wheel (``nox -s
bench``'s ``warm-wheel`` part). The console script imports it only for a ``build-wheel``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

from patcher.outputs.raw_copy import SETTLE_NS, FileState, settled, state_of, write_pieces

TYPE_CHECKING = False  # typing takes milliseconds to import: run imports nothing it need not
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from patcher.cli.terminal import Table
    from patcher.outputs.raw_copy import Piece
    from patcher.outputs.wheel import Repacked

FORMAT = 1
"""The entry's layout; an entry of another is not read."""
KIND = "warm-wheel"
"""Its folder under ``checked/`` in the cache."""
CACHE_ENV = "PATCHER_CACHE_DIR"  # as patcher.cache reads it
CHECKED_HEADER = b"patcher-sha256:"  # as patcher.cache.write_checked writes it
DIGEST_LENGTH = 64
MAX_ENTRY_BYTES = 16 * 1024 * 1024  # as patcher.files.MAX_INPUT_BYTES: the most an entry holds
PARTIAL = ".patcher.partial"  # as patcher.outputs.wheel names the wheel being written
STALE_PARTIAL_SECONDS = 3600
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""patcher's own folder: part of the key, and its files are watched."""
ENVIRONMENT = ("PATCHER_", "PIP_", "UV_", "PYTHON", "VIRTUAL_ENV")
"""The environment variables that reach a build, by their prefix: part of the key. (The cache
root, which ``XDG_CACHE_HOME`` may name, holds the entry; a terminal's width and colour are
read when the output is printed.)"""
SIGINT_STATUS, SIGTERM_STATUS = 128 + 2, 128 + 15  # as patcher.cli.terminal ends a stopped run


class Attempt:
    """A warm run of a command line, as ``patcher.cli.main`` runs it: entered, the exit status
    of the warm run, or None (then the command runs as usual, and ``remember`` may keep what
    it writes); left, nothing is kept for this command line any more."""

    def __init__(self, words: list[str]) -> None:
        self.words = words

    def __enter__(self) -> int | None:
        return run(self.words)

    def __exit__(self, *exc_info: object) -> None:
        Pending.key = None


class Pending:
    """The command line that missed, kept for ``remember``: its key and when it began."""

    key: str | None = None
    began_ns = 0


def cache_root() -> str | None:
    """The cache root ``patcher.cache.cache_dir`` uses, without importing platformdirs (7 ms):
    ``$PATCHER_CACHE_DIR``, else on Linux ``$XDG_CACHE_HOME`` or ``~/.cache`` as platformdirs
    reads them; None elsewhere (no warm path). ``remember`` keeps nothing where the two differ."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return root
    if not sys.platform.startswith("linux"):
        return None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base.strip():
        base = os.path.expanduser("~/.cache")
    return os.path.join(base, "vllm-patcher")


def request_key(words: list[str]) -> str:
    """What decides a command line's meaning and output, hashed: its words, the working folder,
    the environment that reaches patcher, the interpreter and patcher's folder."""
    environment = sorted((k, v) for k, v in os.environ.items() if k.startswith(ENVIRONMENT))
    text = repr((FORMAT, sys.version, sys.executable, PACKAGE, os.getcwd(), words, environment))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def entry_path(root: str, key: str) -> str:
    return os.path.join(root, "checked", KIND, key)


def walk(top: str) -> list[tuple[str, os.stat_result]]:
    """Every file under ``top`` with its state, sorted; byte code and hidden names left out."""
    found = []
    with os.scandir(top) as entries:
        for entry in entries:
            if entry.name.startswith(".") or entry.name in ("__pycache__",):
                continue
            if entry.is_dir(follow_symlinks=False):
                found += walk(entry.path)
            elif not entry.name.endswith(".pyc"):
                found.append((entry.path, entry.stat()))
    return sorted(found, key=lambda item: item[0])


def watched_state(watched: dict[str, list[str]]) -> tuple[str, int]:
    """The state of what a build read besides the official wheel, hashed, and the newest ctime
    in it: every file under ``dirs``, each of ``files`` (or its absence), and the names of the
    distributions in each of ``sites`` (installed, upgraded or removed)."""
    digest = hashlib.sha256()
    newest = 0
    files = [item for top in watched["dirs"] for item in walk(top)]
    for path in watched["files"]:
        try:
            files.append((path, os.stat(path)))
        except FileNotFoundError:
            digest.update(f"{path}\0absent\n".encode("utf-8", "surrogatepass"))
    for path, found in files:
        state = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)
        digest.update(f"{path}\0{state}\n".encode("utf-8", "surrogatepass"))
        newest = max(newest, found.st_ctime_ns)
    for site in watched["sites"]:
        names = sorted(n for n in os.listdir(site) if n.endswith((".dist-info", ".egg-info")))
        digest.update(f"{site}\0{names}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest(), newest


def read_entry(path: str) -> tuple[dict[str, Any], bytes] | None:
    """The entry's header and its bytes, or None: missing, not a regular file, or not whole."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        if (found.st_mode & 0o170000) != 0o100000 or found.st_size > MAX_ENTRY_BYTES:
            return None  # a FIFO or a device, or too big to be one of ours: no entry
        data = bytearray()
        while len(data) <= MAX_ENTRY_BYTES and (chunk := os.read(fd, found.st_size + 1)):
            data += chunk
    finally:
        os.close(fd)
    start = len(CHECKED_HEADER) + DIGEST_LENGTH + 1
    payload = bytes(data[start:])
    expected = CHECKED_HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n"
    if bytes(data[:start]) != expected:
        return None
    header, _, blob = payload.partition(b"\n")
    entry = json.loads(header)
    return (entry, blob) if entry.get("format") == FORMAT else None


def run(words: list[str]) -> int | None:
    """The command line ``words`` (a ``build-wheel``) run warm: its exit status, or None where
    it is not warm (then ``remember`` will keep it, once the command has run as usual). Ctrl-C
    or SIGTERM ends it as it ends a command (``patcher.cli.terminal.interrupted``), its partial
    wheel removed."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        code = warm(words)
    except KeyboardInterrupt as stopped:
        said("patcher: interrupted\n")  # stderr gone too: the status still says it
        return SIGTERM_STATUS if isinstance(stopped, Stopped) else SIGINT_STATUS
    if code is None:
        signal.signal(signal.SIGTERM, previous)  # the command line sets its own
    return code


def said(text: str) -> None:
    """``text`` on stderr, if stderr takes it."""
    try:
        sys.stderr.write(text)
    except OSError:
        return


class Stopped(KeyboardInterrupt):
    """SIGTERM during a warm run, unwinding as Ctrl-C does."""


def warm(words: list[str]) -> int | None:
    Pending.key = None
    Pending.began_ns = began = _now_ns()
    root = cache_root()
    if root is None or sys.stdout is None or sys.stderr is None:
        return None
    try:
        key = request_key(words)
    except OSError:  # the working folder is gone
        return None
    Pending.key = key
    try:
        found = read_entry(entry_path(root, key))
        if found is None:
            return None
        entry, blob = found
        if watched_state(entry["watched"])[0] != entry["watched_digest"]:
            return None
        if not write_again(entry, blob, began):
            return None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None  # not warm after all: the command runs as usual, and says what is wrong
    return show(entry)


def _now_ns() -> int:
    import time  # loaded at start-up already; imported here so the module's list stays short

    return time.time_ns()


def write_again(entry: dict[str, Any], blob: bytes, began: int) -> bool:
    """The entry's wheel written again, where its inputs are as they were; False, with nothing
    left behind, where they are not or the writing fails."""
    target, dist = entry["target"], entry["dist"]
    if not os.path.isdir(dist) or (os.path.lexists(target) and not entry["force"]):
        return False  # a folder to make, or a file to compare: the command's own work
    pieces = [blob[p[1] : p[1] + p[2]] if p[0] == "data" else (p[1], p[2]) for p in entry["pieces"]]
    state: FileState = tuple(entry["official_state"])  # type: ignore[assignment]
    remove_stale_partials(dist)
    tmp = os.path.join(dist, f".{os.path.basename(target)}.{os.urandom(4).hex()}{PARTIAL}")
    official = os.open(entry["official"], os.O_RDONLY | os.O_CLOEXEC)
    try:
        if state_of(official) != state or not settled(state, began):
            return False
        written = write_wheel(pieces, official, tmp)
        if written != entry["size"] or state_of(official) != state:
            discard(tmp)  # changed while it was copied: the command reads it again
            return False
        os.replace(tmp, target)
    except BaseException:
        discard(tmp)
        raise
    finally:
        os.close(official)
    return True


def discard(path: str) -> None:
    """``path`` removed, if it is there to remove."""
    try:
        os.unlink(path)
    except OSError:
        return


def write_wheel(pieces: list[Piece], official: int, tmp: str) -> int:
    """The pieces into a new file at ``tmp`` with the mode the umask gives (as
    ``patcher.cache.create_new``); the bytes written."""
    mask = os.umask(0o022)
    os.umask(mask)
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666 & ~mask)
    try:
        return write_pieces(pieces, official, out)
    finally:
        os.close(out)


def remove_stale_partials(dist: str) -> None:
    """As a build does (``patcher.cache.remove_stale``): a partial wheel untouched for an hour
    was left by a killed process."""
    import time

    for name in os.listdir(dist):
        if name.startswith(".") and name.endswith(PARTIAL):
            path = os.path.join(dist, name)
            try:
                found = os.stat(path)
                age = time.time() - found.st_mtime
                if (found.st_mode & 0o170000) == 0o100000 and not 0 <= age < STALE_PARTIAL_SECONDS:
                    os.unlink(path)
            except OSError:
                continue


def show(entry: dict[str, Any]) -> int:
    """What the build printed: the status table and the step on stderr (as ``--quiet``,
    ``--verbose``, ``--format json`` and a terminal decide), the wheel's path, the document."""
    quiet, as_json = entry["quiet"], entry["json"]
    terminal = sys.stderr.isatty()
    if not quiet and not as_json:
        if terminal:  # fitted to the terminal's width, in colour: drawn as the command draws it
            from patcher.cli.terminal import err

            err.print(table_of(entry["table"]))
        else:
            sys.stderr.write(entry["table_plain"])
    if not quiet and (not terminal or entry["verbose"]):
        sys.stderr.write(entry["step"])  # in a terminal a bar, gone once the step ends
    sys.stderr.flush()
    try:
        if as_json:
            sys.stderr.write(entry["result"])
            written(entry["document"])
        else:
            written(entry["result"])
        sys.stdout.flush()
    except OSError as error:
        return stdout_failed(error)
    return 0


def written(text: str) -> None:
    """``text`` on stdout, as ``patcher.cli.terminal.GuardedStdout`` writes it."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        encoding = sys.stdout.encoding or "ascii"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))


def stdout_failed(error: OSError) -> int:
    """A failed write to stdout, ended as the command line ends one."""
    from patcher.cli.terminal import discard_stdout
    from patcher.errors import OutputClosed
    from patcher.outputs.named import stdout_error

    failure = stdout_error(error)
    if not isinstance(failure, OutputClosed):
        sys.stderr.write(f"patcher: error: {failure}\n")
    discard_stdout()
    return failure.exit_code


def table_of(spec: dict[str, Any]) -> Table:
    from patcher.cli.terminal import Column, Table

    table = Table(spec["title"])
    table.columns = [Column(*column) for column in spec["columns"]]
    table.rows = [tuple(row) for row in spec["rows"]]
    table.caption = spec["caption"]
    return table


def spec_of(table: Table) -> dict[str, object]:
    return {
        "title": table.title,
        "columns": [[c.header, c.right, c.detail] for c in table.columns],
        "rows": [list(row) for row in table.rows],
        "caption": table.caption,
    }


# --- after a build that missed: what the next run of the same command line needs -----------


def watched_inputs(files: list[Path], patchsets: object) -> dict[str, list[str]] | None:
    """What a build reads besides the official wheel: patcher's folder and its built-in
    patchsets' (``patchsets``), ``files`` (the patchset file named, the proofs reported), and
    the folders of installed distributions on ``sys.path``. None where the built-in patchsets
    are not a folder on disk (a zip import): nothing is kept then."""
    from pathlib import Path

    if not isinstance(patchsets, Path):
        return None
    dirs = [PACKAGE]
    if not os.path.realpath(patchsets).startswith(PACKAGE + os.sep):
        dirs.append(str(patchsets))
    sites = [p for p in sys.path if p.endswith("-packages") and os.path.isdir(p)]
    return {"dirs": dirs, "files": [str(f) for f in files], "sites": sites}


def remember(
    official: Path,
    archive_state: FileState,
    repacked: Repacked,
    *,
    force: bool,
    quiet: bool,
    verbose: bool,
    as_json: bool,
    table: Table,
    document: str | None,
    watched: dict[str, list[str]],
) -> bool:
    """Keep what the next run of this command line writes and prints, where the console script
    missed it (``run``) and this build's inputs were settled from its start to its end: the
    official wheel the same file, in the same state, where the codemods read it
    (``archive_state``, its open zip's after the build) as where the repack copied it, and
    nothing it watches changed since before the build began.
    Whether it was kept."""
    import io

    from patcher.cache import cache_dir, write_checked
    from patcher.cli.terminal import Console, printable

    key, began = Pending.key, Pending.began_ns
    Pending.key = None
    root = cache_root()
    if key is None or root is None or os.path.realpath(root) != os.path.realpath(cache_dir()):
        return False
    state = repacked.official_state
    if archive_state != state or not settled(state, began):
        return False
    digest, newest = watched_state(watched)
    if newest + SETTLE_NS >= began:
        return False  # changed as the build began, or since: what it read is not known
    piped = Console(stderr=True)  # the table as a pipe gets it
    piped.file = io.StringIO()
    piped.print(table)
    blob = bytearray()
    pieces: list[tuple[str, int, int]] = []
    for piece in repacked.pieces:
        if isinstance(piece, bytes):
            pieces.append(("data", len(blob), len(piece)))
            blob += piece
        else:
            pieces.append(("copy", *piece))
    target = repacked.target
    step = f"patcher: repacking {official.name} ({state[2] / 1e6:.0f} MB)"
    entry = {
        "format": FORMAT,
        "watched": watched,
        "watched_digest": digest,
        "official": str(official),
        "official_state": list(state),
        "official_sha256": repacked.official_sha256,
        "dist": str(target.parent),
        "target": str(target),
        "force": force,
        "quiet": quiet,
        "verbose": verbose,
        "json": as_json,
        "table": spec_of(table),
        "table_plain": piped.file.getvalue(),
        "step": printable(step, newlines=True) + "\n",
        "result": printable(str(target), newlines=True) + "\n",
        "document": document,
        "size": sum(length for _, _, length in pieces),
        "pieces": pieces,
    }
    payload = json.dumps(entry, separators=(",", ":")).encode() + b"\n" + bytes(blob)
    if len(payload) + len(CHECKED_HEADER) + DIGEST_LENGTH + 1 > MAX_ENTRY_BYTES:
        return False
    write_checked(cache_dir() / "checked" / KIND / key, payload)
    return True
