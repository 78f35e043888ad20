"""Patch an installed vLLM in place and undo it, every file or none, with RECORD kept true.

apply replaces each patched module and keeps what it replaced in ``<dist-info>/patcher-originals/``:
the module, RECORD, and the bytecode compiled from the module (set aside so that Python can not
run stale code and no RECORD row can go false when it recompiles). The copies and the provenance
file are listed in RECORD, so ``pip uninstall`` removes them with the rest. revert puts every
byte back, and the modules' modification times with them, so the old bytecode is valid again.
"""

from __future__ import annotations

import json
from pathlib import Path

from filelock import FileLock

from patcher import __version__, records
from patcher.cache import folder_lock
from patcher.errors import PatcherError
from patcher.outputs import transaction
from patcher.outputs.transaction import Transaction
from patcher.records import inside
from patcher.result import PatchResult
from patcher.sources.installation import (
    ORIGINALS,
    Installation,
    PatchedFile,
    Provenance,
    ask,
)

JOURNAL = "patcher-journal.json"
"""The journal of an apply or revert under way, in the dist-info: gone once it is done."""


def locked(installation: Installation) -> FileLock:
    """One apply or revert at a time per installation."""
    return folder_lock(installation.root / installation.info)


def journal_path(installation: Installation) -> Path:
    return installation.root / installation.info / JOURNAL


def transaction_for(installation: Installation, operation: str, patchset: str) -> Transaction:
    """A transaction confined to site-packages, journaled so that a kill can be undone."""
    about = {"operation": operation, "patchset": patchset}
    return Transaction(installation.root, journal_path(installation), about)


def recover(installation: Installation) -> str | None:
    """Finish an apply or revert that was killed half way (see ``transaction.recover``): what
    was done, in a line, or None if nothing was interrupted. Run under ``locked``."""
    found = transaction.recover(journal_path(installation), installation.root)
    # a revert killed after its commit (journal gone) or after its last removal, or an apply
    # undone, leaves the copies' folders empty: nothing lists them, so they go as a finished
    # revert's do, whether or not there was a journal to finish
    remove_empty_folders(installation.root / installation.info / ORIGINALS)
    if found is None:
        return None
    journal, outcome = found
    return (
        f"{transaction.describe(journal).removeprefix('interrupted: ')}, was interrupted; {outcome}"
    )


def interrupted(installation: Installation) -> str | None:
    """An apply or revert killed half way, in words (how many of its changes were done)."""
    journal = transaction.read_journal(journal_path(installation), installation.root)
    return None if journal is None else transaction.describe(journal)


def bytecode_rows(rows: list[records.RecordRow], module: str) -> list[records.RecordRow]:
    """The RECORD rows of ``module``'s compiled files in its ``__pycache__``."""
    folder, _, leaf = module.rpartition("/")
    prefix = f"{folder}/__pycache__/{leaf.removesuffix('.py')}."
    return [
        r
        for r in rows
        if r.path.startswith(prefix)
        and r.path.endswith(".pyc")
        and "/" not in r.path[len(prefix) :]
    ]


def cached_bytecode(root: Path, module: str) -> list[str]:
    """Every compiled file of ``module`` on disk, RECORD-listed or not: any interpreter, any
    optimization level, any invalidation mode (an unchecked-hash one is never checked against
    the source, so left behind it runs the old code)."""
    folder, _, leaf = module.rpartition("/")
    cache = inside(root, f"{folder}/__pycache__", "bytecode")
    if not cache.is_dir():
        return []
    found = []
    for path in sorted(cache.glob(f"{leaf.removesuffix('.py')}.*.pyc")):
        member = path.relative_to(root).as_posix()
        inside(root, member, "bytecode")
        found.append(member)
    return found


STALE_SCRIPT = r"""
import importlib.util, json, marshal, os
stale = []
for src in PATHS:
    try:
        data = open(src, "rb").read()
        st = os.stat(src)
    except OSError:
        continue
    for opt in ("", 1, 2):
        pyc = importlib.util.cache_from_source(src, optimization=opt)
        try:
            head = open(pyc, "rb").read()
        except OSError:
            continue
        if head[:4] != importlib.util.MAGIC_NUMBER:
            continue
        flags = int.from_bytes(head[4:8], "little")
        if flags & 1:
            if not flags & 2 and head[8:16] != importlib.util.source_hash(data):
                stale.append(pyc)
        elif (int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")) == (
            int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF
        ):
            try:
                same = marshal.loads(head[16:]) == compile(
                    data, src, "exec", dont_inherit=True, optimize=opt or 0
                )
            except Exception:
                same = False
            if not same:
                stale.append(pyc)
print(json.dumps(stale))
"""
"""Runs in the installation's interpreter: the compiled files it would load for each module
although they are not of the module's source (the hash is the interpreter's own)."""


def stale_bytecode(installation: Installation, modules: list[str]) -> list[str]:
    """The compiled files of ``modules`` the installation's Python would run instead of their
    source, in words; empty when there are none."""
    if not any(cached_bytecode(installation.root, m) for m in modules):
        return []
    paths = [str(inside(installation.root, m, "provenance")) for m in modules]
    script = STALE_SCRIPT.replace("PATHS", repr(paths))
    stdout, _, code = ask(installation.python, script)
    try:
        stale = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return [f"cannot check the bytecode of {', '.join(modules)} (exit {code})"]
    return [f"{path} is stale bytecode: Python runs it, not its source" for path in stale]


def patched_record(
    installation: Installation,
    original: bytes,
    provenance: Provenance,
    provenance_row: records.RecordRow,
) -> bytes:
    """RECORD as apply leaves it: computed from the original, so revert can check it."""
    replace: dict[str, records.RecordRow | None] = {f.path: f.patched for f in provenance.files}
    replace.update({row.path: None for row in provenance.moved})
    kept = [
        records.RecordRow(installation.original_member(f.path), f.original.hash, f.original.size)
        for f in provenance.files
    ]
    kept += [
        records.RecordRow(installation.original_member(row.path), row.hash, row.size)
        for row in provenance.moved
    ]
    kept.append(
        records.RecordRow.of(installation.original_member(f"{installation.info}/RECORD"), original)
    )
    kept.append(provenance_row)
    return records.rewrite(original, replace, kept, str(installation.record_path))


def encode(provenance: Provenance) -> bytes:
    return (json.dumps(provenance.to_json(), indent=2, sort_keys=True) + "\n").encode()


def apply(installation: Installation, result: PatchResult) -> Provenance:
    """Write ``result``'s changed files over the installed ones, with their originals kept."""
    original_record = installation.record()
    rows = records.read_record(original_record, str(installation.record_path))
    root = installation.root
    files: list[PatchedFile] = []
    moved: list[records.RecordRow] = []
    originals: dict[str, bytes] = {}
    unlisted: list[str] = []  # bytecode no RECORD row lists: removed, not kept
    for path, text in sorted(result.changed.items()):
        row = rows.get(path)
        if row is None:
            raise PatcherError(f"{path} is not listed in {installation.record_path}")
        module = inside(root, path, "RECORD")
        inside(root, installation.original_member(path), "an original's")
        if problem := row.problem(root):
            raise PatcherError(f"{problem}: it was changed after install; reinstall vLLM first")
        originals[path] = module.read_bytes()
        mtime = module.stat().st_mtime_ns
        after = records.RecordRow.of(path, text.encode("utf-8"))
        files.append(PatchedFile(records.RecordRow.of(path, originals[path]), after, mtime))
        listed = []
        for compiled in bytecode_rows(list(rows.values()), path):
            if inside(root, compiled.path, "RECORD").is_file():
                moved.append(compiled)
                listed.append(compiled.path)
                originals[compiled.path] = (root / compiled.path).read_bytes()
        unlisted += [p for p in cached_bytecode(root, path) if p not in listed]
    moved = [records.RecordRow.of(r.path, originals[r.path]) for r in moved]  # the bytes kept
    provenance = Provenance(
        patchset=result.patchset.name,
        patches={name: o.status.value for name, o in result.outcomes.items()},
        verdict=result.verdict,
        tool=f"patcher {__version__}",
        files=tuple(files),
        moved=tuple(moved),
    )
    provenance_bytes = encode(provenance)
    provenance_row = records.RecordRow.of(installation.provenance_member, provenance_bytes)
    new_record = patched_record(installation, original_record, provenance, provenance_row)
    mode = installation.record_path.stat().st_mode & 0o7777
    transaction = transaction_for(installation, "apply", result.patchset.name)
    for path, data in originals.items():
        transaction.write(installation.original(path), data, mode)
    transaction.write(installation.original(f"{installation.info}/RECORD"), original_record, mode)
    transaction.write(root / installation.provenance_member, provenance_bytes, mode)
    for file in files:
        target = root / file.path
        data = result.changed[file.path].encode("utf-8")
        transaction.write(target, data, target.stat().st_mode & 0o7777)
    for compiled in moved:
        transaction.remove(root / compiled.path)
    for member in unlisted:
        transaction.remove(root / member)
    transaction.write(installation.record_path, new_record, mode)
    transaction.commit()
    return provenance


def differences(
    installation: Installation, provenance: Provenance, result: PatchResult
) -> list[str]:
    """The files where what ``result`` (the patchset run over the tree as it was before
    patching) would write is not what is installed: a patchset changed under the same name."""
    patched = {f.path for f in provenance.files}
    found = []
    for path in sorted(patched | set(result.changed)):
        if path not in result.changed:
            found.append(f"{path} (the patchset no longer changes it)")
        elif (installation.root / path).read_bytes() != result.changed[path].encode("utf-8"):
            found.append(path)
    return found


def problems(installation: Installation, provenance: Provenance) -> list[str]:
    """Everything that is no longer as apply left it: what stops a revert."""
    root = installation.root
    found = []
    for patched in provenance.files:
        if patched.patched.problem(root) is not None:
            found.append(f"{patched.path} changed since it was patched")
    kept_rows = [
        records.RecordRow(installation.original_member(f.path), f.original.hash, f.original.size)
        for f in provenance.files
    ] + [
        records.RecordRow(installation.original_member(r.path), r.hash, r.size)
        for r in provenance.moved
    ]
    found += [
        f"{row.path} (kept for revert) is missing or changed"
        for row in kept_rows
        if row.problem(root)
    ]
    original_record = installation.original(f"{installation.info}/RECORD")
    try:
        expected = patched_record(
            installation, original_record.read_bytes(), provenance, provenance_row(installation)
        )
    except OSError as error:
        found.append(f"cannot read {error.filename}: {error.strerror}")
    else:
        if installation.record() != expected:
            found.append(f"{installation.record_path} changed since patching")
    return found


def provenance_row(installation: Installation) -> records.RecordRow:
    """The provenance's RECORD row: of its bytes, or, once it is deleted, the row RECORD kept."""
    path = installation.root / installation.provenance_member
    if path.is_file():
        return records.RecordRow.of(installation.provenance_member, path.read_bytes())
    rows = records.read_record(installation.record(), str(installation.record_path))
    if installation.provenance_member not in rows:
        raise PatcherError(f"{installation.record_path} does not list {path}")
    return rows[installation.provenance_member]


def recovered(installation: Installation) -> Provenance:
    """The provenance apply wrote, rebuilt once it was deleted, from what apply kept: each
    original in ``patcher-originals/`` and its patched file's row in RECORD. ``revert`` checks it
    as it checks a written one (``problems``: RECORD must be exactly what apply made of the
    original RECORD with these files), so a guess that does not hold is refused, not applied.
    A module's old modification time is read from the bytecode kept with it, where there is
    one; without bytecode, none is needed."""
    top = installation.root / installation.info / ORIGINALS
    rows = records.read_record(installation.record(), str(installation.record_path))
    kept = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else []
    if not (top / "RECORD").is_file():
        raise PatcherError(f"refusing to revert: {top / 'RECORD'} (the original RECORD) is gone")
    installed = records.read_record((top / "RECORD").read_bytes(), str(top / "RECORD"))
    for copy in kept:
        path = copy.relative_to(top).as_posix()
        inside(installation.root, installation.original_member(path), "an original's")
        if path != "RECORD":
            inside(installation.root, path, "an original's")
        if path != "RECORD" and (path not in installed or installed[path].problem(top)):
            raise PatcherError(
                f"refusing to revert: {copy} is not the {path} the original RECORD lists"
            )
    moved = [
        records.RecordRow.of(p.relative_to(top).as_posix(), p.read_bytes())
        for p in kept
        if p.parent.name == "__pycache__" and p.suffix == ".pyc"
    ]
    files = []
    for copy in kept:
        path = copy.relative_to(top).as_posix()
        if path == "RECORD" or any(row.path == path for row in moved):
            continue
        if path not in rows:
            raise PatcherError(f"refusing to revert: {copy} is kept, but RECORD lists no {path}")
        mtime = bytecode_mtime(path, moved, top) or (installation.root / path).stat().st_mtime_ns
        original = records.RecordRow.of(path, copy.read_bytes())
        files.append(PatchedFile(original, rows[path], mtime))
    if not files:
        raise PatcherError(f"refusing to revert: {top} holds no patched module to restore")
    return Provenance(
        patchset="the patchset of the deleted provenance",
        patches={},
        verdict="unknown",
        tool="unknown",
        files=tuple(files),
        moved=tuple(moved),
    )


def bytecode_mtime(module: str, moved: list[records.RecordRow], top: Path) -> int | None:
    """The source modification time (ns) a kept timestamp-based .pyc of ``module`` was built
    against: the time Python checks it by, so restored with it the .pyc is valid again."""
    for row in bytecode_rows(moved, module):
        header = (top / row.path).read_bytes()[:16]
        if len(header) == 16 and header[4:8] == bytes(4):  # flags 0: checked by mtime
            return int.from_bytes(header[8:12], "little") * 1_000_000_000
    return None


def revert(installation: Installation, provenance: Provenance) -> list[str]:
    """Put back every byte apply replaced; the paths restored."""
    if not provenance.in_place:
        raise PatcherError(
            f"{installation.description} was installed from a wheel patcher built "
            f"({provenance.patchset}); reinstall the official wheel to undo it"
        )
    found = problems(installation, provenance)
    if found:
        raise PatcherError("refusing to revert: " + "; ".join(found))
    root = installation.root
    record_member = f"{installation.info}/RECORD"
    transaction = transaction_for(installation, "revert", provenance.patchset)
    kept = {row.path for row in provenance.moved}
    for patched in provenance.files:  # compiled from the patched source: never to run again
        for member in cached_bytecode(root, patched.path):
            if member not in kept:
                transaction.remove(root / member)
    for patched in provenance.files:
        target = root / patched.path
        data = installation.original(patched.path).read_bytes()
        transaction.write(target, data, target.stat().st_mode & 0o7777, patched.mtime_ns)
    mode = installation.record_path.stat().st_mode & 0o7777
    for row in provenance.moved:
        transaction.write(root / row.path, installation.original(row.path).read_bytes(), mode)
    transaction.write(
        installation.record_path, installation.original(record_member).read_bytes(), mode
    )
    for path in [*(f.path for f in provenance.files), *(r.path for r in provenance.moved)]:
        transaction.remove(installation.original(path))
    transaction.remove(installation.original(record_member))
    if (root / installation.provenance_member).is_file():  # gone already when recovered
        transaction.remove(root / installation.provenance_member)
    transaction.commit()
    remove_empty_folders(root / installation.info / ORIGINALS)
    return [f.path for f in provenance.files]


def remove_empty_folders(top: Path) -> None:
    """The copies' folders, now empty (a folder something else put files into stays)."""
    if not top.is_dir():
        return
    for folder in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    if not any(top.iterdir()):
        top.rmdir()
