"""A set of file writes and removals that happens whole or not at all, even across a kill.

Every new file is written beside its target first; only when all are written are they renamed
into place, the replaced and removed files kept aside as hard links until the end. A failure,
Ctrl-C or SIGTERM renames everything back and leaves the files as they were.

With a journal (``Transaction(root, journal)``), a kill (SIGKILL, a power cut) can be undone
too: before anything is staged, the journal lists each target with the sha256 of its bytes
before and after, written to a temporary file, synced and renamed into place. Every temporary
name is derived from its target (``.NAME.patcher`` staged, ``.NAME.patcher-old`` kept aside), so
``recover`` finds them all: it rolls the change back from the kept copies, or, once every
target is in its new state, only cleans up. Each target is renamed, so it is always whole: its
old bytes or its new ones; anything else means someone else wrote it, and recovery refuses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from patcher.errors import PatcherError
from patcher.files import read_json
from patcher.records import inside

JOURNAL_VERSION = 1

TEST_HOOK = "PATCHER_TEST_HOOK_COMMIT_SIGNAL"
"""A test hook, never set in use: ``N:KILL`` (or ``N:TERM``, ``N:INT``) makes a journaled
commit send itself that signal at its step N, so a test can stop it at every point. Step 1 is
after the journal is written, before anything is staged; step 2 before the first rename; one
step before each rename or removal; then one after the last, and one before the journal goes."""

STAGED = ".patcher"
ASIDE = ".patcher-old"


@dataclass(frozen=True)
class Write:
    target: Path
    data: bytes
    mode: int
    mtime_ns: int | None = None  # kept by the rename, so bytecode compiled against it holds


def staged_name(target: Path) -> Path:
    return target.with_name(f".{target.name}{STAGED}")


def aside_name(target: Path) -> Path:
    return target.with_name(f".{target.name}{ASIDE}")


def digest_of(path: Path) -> str | None:
    """The sha256 of the file at ``path`` (not followed if a symlink), None if there is none;
    a folder or other kind of file there is an error."""
    try:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise PatcherError(f"{path} is not a regular file")
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise PatcherError(f"cannot read {path}: {error.strerror or error}") from error


@dataclass(frozen=True)
class Entry:
    """One target of a journaled commit: its sha256 before and after (None: no file)."""

    target: Path
    before: str | None
    after: str | None

    def state(self) -> str:
        """``done``, ``todo`` (as before), ``both`` (the same bytes either way) or ``other``."""
        now = digest_of(self.target)
        if now == self.before == self.after:
            return "both"
        if now == self.after:
            return "done"
        if now == self.before:
            return "todo"
        return "other"


@dataclass(frozen=True)
class Journal:
    """A journal as read back: what the commit was about, its entries, the folders it made."""

    path: Path
    about: dict[str, str]
    entries: tuple[Entry, ...]
    folders: tuple[Path, ...]

    @property
    def operation(self) -> str:
        return self.about.get("operation", "change")

    def states(self) -> list[str]:
        return [entry.state() for entry in self.entries]

    def done(self) -> int:
        return sum(state in ("done", "both") for state in self.states())

    def temporaries(self) -> list[Path]:
        found = [self.path.with_name(f".{self.path.name}{STAGED}")]
        for entry in self.entries:
            found += [staged_name(entry.target), aside_name(entry.target)]
        return [p for p in found if p.is_file() or p.is_symlink()]


def read_journal(path: Path, root: Path) -> Journal | None:
    """The journal at ``path``, every path in it inside ``root``; None if there is none."""
    if not path.exists() and not path.is_symlink():
        return None
    data = read_json(path, "journal")
    problem = "not a JSON object"
    try:
        if isinstance(data, dict) and data.get("version") == JOURNAL_VERSION:
            about = {str(k): str(v) for k, v in data["about"].items()}
            entries = tuple(
                Entry(inside(root, e["path"], "journal"), checked(e["before"]), checked(e["after"]))
                for e in data["entries"]
            )
            folders = tuple(inside(root, f, "journal") for f in data["folders"])
            return Journal(path, about, entries, folders)
        problem = f"version {data.get('version')!r}" if isinstance(data, dict) else problem
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        problem = f"{type(error).__name__}: {error}"
    raise PatcherError(f"{path} is not a journal this patcher wrote ({problem})")


def checked(digest: object) -> str | None:
    if digest is None:
        return None
    if (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
    ):
        return digest
    raise ValueError(f"{digest!r:.80} is not a sha256")


def recover(path: Path, root: Path) -> tuple[Journal, str] | None:
    """Finish what a killed commit journaled at ``path`` left: roll it back from the copies kept
    aside, or, when every target has its new bytes already, only clean up. The journal and what
    was done (``rolled back``, ``completed``); None when there was no journal. A target with
    bytes that are neither its old nor its new ones is refused, with nothing changed."""
    journal = read_journal(path, root)
    stray = path.with_name(f".{path.name}{STAGED}")  # killed while the journal was written
    if journal is None:
        stray.unlink(missing_ok=True)
        return None
    states = journal.states()
    if other := [
        str(e.target) for e, s in zip(journal.entries, states, strict=True) if s == "other"
    ]:
        raise PatcherError(
            f"an interrupted {journal.operation} ({path}) cannot be finished or undone: "
            f"{', '.join(other)} changed since"
        )
    with signals_held():
        if all(s in ("done", "both") for s in states):
            outcome = "completed"
        elif all(
            e.before is None or digest_of(aside_name(e.target)) == e.before
            for e, s in zip(journal.entries, states, strict=True)
            if s == "done"
        ):
            for entry, state in reversed(list(zip(journal.entries, states, strict=True))):
                if state == "done":
                    if entry.before is None:
                        entry.target.unlink()
                    else:
                        os.replace(aside_name(entry.target), entry.target)
            outcome = "rolled back"
        elif all(
            e.after is None or digest_of(staged_name(e.target)) == e.after
            for e, s in zip(journal.entries, states, strict=True)
            if s == "todo"
        ):
            for entry, state in zip(journal.entries, states, strict=True):
                if state == "todo":
                    if entry.after is None:
                        entry.target.unlink(missing_ok=True)
                    else:
                        os.replace(staged_name(entry.target), entry.target)
            outcome = "completed"
        else:
            raise PatcherError(
                f"an interrupted {journal.operation} ({path}) cannot be finished or undone: "
                "the copies it kept are gone"
            )
        for temporary in journal.temporaries():
            temporary.unlink(missing_ok=True)
        if outcome == "rolled back":
            for folder in reversed(journal.folders):
                with contextlib.suppress(OSError):
                    folder.rmdir()
        sync_folders({e.target.parent for e in journal.entries})
        path.unlink()
        sync_folders({path.parent})
    return journal, outcome


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM held back (delivered when this ends) while files are put back, or
    while a file made is recorded. In the main thread by swapping their Python handlers for
    one that notes them: a mask is the calling thread's own, and with another thread running
    the kernel hands the signal to that one, whose flag the main thread then acts on at once."""
    held = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread():
        try:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(held))
        except (AttributeError, OSError, ValueError):  # no signal masks here
            yield
            return
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    caught: list[int] = []
    before = {number: signal.getsignal(number) for number in held}
    swapped = [n for n, handler in before.items() if handler not in (signal.SIG_IGN, None)]
    for number in swapped:
        signal.signal(number, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for number in swapped:
            signal.signal(number, before[number])
        for signum in caught:  # now, to the handler it had
            os.kill(os.getpid(), signum)


def sync_folders(folders: set[Path]) -> None:
    """Renames in these folders made durable: fsync of each folder."""
    for folder in folders:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def checkpoint(step: int) -> None:
    """The test hook (``TEST_HOOK``): signal this process at the step it names."""
    hook = os.environ.get(TEST_HOOK)
    if not hook:
        return
    number, _, name = hook.partition(":")
    if number.strip() == str(step):
        os.kill(os.getpid(), getattr(signal, f"SIG{name.strip() or 'KILL'}"))


class Transaction:
    """Writes and removals committed together (see the module's docstring). With ``root``,
    every target must lie inside it; with ``journal``, the commit survives a kill."""

    def __init__(
        self,
        root: Path | None = None,
        journal: Path | None = None,
        about: dict[str, str] | None = None,
    ) -> None:
        self.writes: list[Write] = []
        self.removals: list[Path] = []
        self.root = root
        self.journal = journal
        self.about = about or {}

    def write(self, target: Path, data: bytes, mode: int, mtime_ns: int | None = None) -> None:
        self.writes.append(Write(target, data, mode, mtime_ns))

    def remove(self, target: Path) -> None:
        self.removals.append(target)

    def refuse_outside(self) -> None:
        """Every target inside the root, before anything is written."""
        if self.root is None:
            return
        for target in [w.target for w in self.writes] + self.removals:
            try:
                member = target.relative_to(self.root).as_posix()
            except ValueError:
                member = str(target)
            inside(self.root, member, "a target")

    def write_journal(self) -> list[Path]:
        """The journal, synced and renamed into place; the folders the commit will make."""
        assert self.journal is not None and self.root is not None
        folders: list[Path] = []
        for write in self.writes:
            folder = write.target.parent
            missing = []
            while not folder.exists():
                missing.append(folder)
                folder = folder.parent
            folders += [f for f in reversed(missing) if f not in folders]
        root = self.root
        entries = [
            {
                "path": w.target.relative_to(root).as_posix(),
                "before": digest_of(w.target),
                "after": hashlib.sha256(w.data).hexdigest(),
            }
            for w in self.writes
        ] + [
            {"path": t.relative_to(root).as_posix(), "before": digest_of(t), "after": None}
            for t in self.removals
        ]
        document = {
            "version": JOURNAL_VERSION,
            "about": self.about,
            "entries": entries,
            "folders": [f.relative_to(root).as_posix() for f in folders],
        }
        data = (json.dumps(document, indent=1) + "\n").encode()
        tmp = self.journal.with_name(f".{self.journal.name}{STAGED}")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.journal)
        sync_folders({self.journal.parent})
        return folders

    def commit(self) -> None:
        self.refuse_outside()
        staged: list[tuple[Path, Write]] = []
        made: list[Path] = []  # folders created for new files, outermost first
        undo: list[tuple[Path, Path | None]] = []  # (target, kept-aside copy or None if new)
        current = Path()
        # begun, not yet recorded in undo: (target, its aside copy, the staged file renamed
        # onto it, or None for a removal); a signal may land after the rename, before the record
        pending: tuple[Path, Path | None, Path | None] | None = None
        journaled = earlier = False
        step = 0
        try:
            if self.journal is not None:
                current = self.journal
                earlier = self.journal.exists()  # another run's, never this one's to remove
                self.write_journal()
                journaled = True
                checkpoint(step := 1)
            # each file made, moved or removed is recorded for the rollback before a Ctrl-C or a
            # SIGTERM can land: signals are held from the act to its record (one landing in
            # between left a staged or aside copy, or a folder, that no rollback knew of; in
            # patcher-originals/ a stray copy read as a kept original, and revert refused)
            for write in self.writes:
                current = write.target
                with signals_held():
                    make_parents(write.target.parent, made)
                    staged.append((stage(write, journaled), write))
            if journaled:
                sync_folders({w.target.parent for w in self.writes})
            for tmp, write in staged:
                current = write.target
                checkpoint(step := step + 1)
                with signals_held():
                    aside = keep_aside(write.target) if write.target.exists() else None
                    pending = (write.target, aside, tmp)
                    os.replace(tmp, write.target)
                    undo.append((write.target, aside))
                    pending = None
            for target in self.removals:
                current = target
                checkpoint(step := step + 1)
                with signals_held():
                    pending = (target, keep_aside(target), None)
                    target.unlink()
                    undo.append(pending[:2])
                    pending = None
            checkpoint(step := step + 1)
        except BaseException as error:
            with signals_held():
                if self.journal is not None and not journaled:  # killed as it was written
                    self.journal.with_name(f".{self.journal.name}{STAGED}").unlink(missing_ok=True)
                    if not earlier:  # written, perhaps, and not yet marked: no target moved
                        self.journal.unlink(missing_ok=True)
                if pending is not None:
                    target, aside, renamed = pending
                    moved = not renamed.exists() if renamed is not None else not target.exists()
                    if moved:  # the rename or unlink happened; the record of it did not
                        undo.append((target, aside))
                    elif aside is not None:
                        aside.unlink(missing_ok=True)  # its target was never touched
                stuck = roll_back(undo, [tmp for tmp, _ in staged], made)
                if journaled and not stuck and self.journal is not None:
                    self.journal.unlink(missing_ok=True)
            if not isinstance(error, OSError):
                raise
            outcome = "nothing was changed" if not stuck else f"could not undo {', '.join(stuck)}"
            raise PatcherError(
                f"cannot write {current}: {error.strerror or error}; {outcome}"
            ) from error
        if journaled:
            sync_folders({w.target.parent for w in self.writes} | {t.parent for t in self.removals})
        for _, aside in undo:
            if aside is not None:
                aside.unlink(missing_ok=True)
        if self.journal is not None:
            checkpoint(step + 1)
            self.journal.unlink()
            sync_folders({self.journal.parent})


def roll_back(
    undo: list[tuple[Path, Path | None]], staged: list[Path], made: list[Path]
) -> list[str]:
    """Put every target back as it was; the ones that could not be."""
    stuck = []
    for target, aside in reversed(undo):
        try:
            if aside is None:
                target.unlink(missing_ok=True)
            else:
                os.replace(aside, target)
        except OSError:
            stuck.append(str(target))
    for tmp in staged:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()
    return stuck


def make_parents(folder: Path, made: list[Path]) -> None:
    """Create ``folder`` and its missing parents, adding each to ``made`` as it is created.
    Each is given the owner of the folder it was made in, as a new file is."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    owner = folder.stat()
    for path in reversed(missing):
        path.mkdir()
        made.append(path)
        give_owner(path, owner)


def give_owner(path: Path, like: os.stat_result) -> None:
    """``path`` owned as ``like`` is: root patching a user's files must not leave them root's.
    Only root may give a file away; for anyone else the file is theirs already, or the
    content is what matters."""
    if (like.st_uid, like.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):
            os.chown(path, like.st_uid, like.st_gid)


def owner_for(target: Path) -> os.stat_result:
    """Whose a written file is: the replaced file's owner, else that of the folder it goes in."""
    try:
        return target.stat()
    except FileNotFoundError:
        return target.parent.stat()


def stage(write: Write, journaled: bool = False) -> Path:
    """The new bytes beside the target: under a name of their own, or, journaled, under the
    name the journal implies (synced, so a kill after the rename cannot leave it empty)."""
    target = write.target
    if journaled:
        tmp = staged_name(target)
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    else:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=STAGED)
        tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(write.data)
            if journaled:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, write.mode)
        give_owner(tmp, owner_for(target))
        if write.mtime_ns is not None:
            os.utime(tmp, ns=(write.mtime_ns, write.mtime_ns))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def keep_aside(target: Path) -> Path:
    """A second name for ``target``'s current bytes, to rename back if the commit fails."""
    aside = aside_name(target)
    aside.unlink(missing_ok=True)
    try:
        os.link(target, aside)
    except OSError:
        shutil.copy2(target, aside)
    return aside


def describe(journal: Journal) -> str:
    """An interrupted commit in words: what it was and how far it got."""
    about = journal.about
    what = (
        f"{journal.operation} of {about['patchset']}" if "patchset" in about else journal.operation
    )
    return (
        f"interrupted: {what} stopped with {journal.done()} of {len(journal.entries)} file "
        f"change(s) done ({journal.path})"
    )
