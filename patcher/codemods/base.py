"""What every codemod shares: the statuses it reports, the tree it reads, the outcome it returns."""

from __future__ import annotations

import ast
import fnmatch
import functools
import hashlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar, get_args, get_origin

from patcher.codemods.options import FileOptions, model_type, python_name

if TYPE_CHECKING:  # libcst takes seconds to import: only a run that parses pays for it
    import libcst as cst


class Status(StrEnum):
    APPLIED = "applied"  # it changed code
    PRESENT = "present"  # the fix is already there, upstream or from an earlier run
    NOT_NEEDED = "not-needed"  # the gate it lifts does not exist in this tree
    UNSUPPORTED = "unsupported"  # a prerequisite is absent
    FAILED = "failed"  # the code has a shape this codemod does not know
    AMBIGUOUS = "ambiguous"  # it patched or found its fix, but the barrier is elsewhere too
    UNKNOWN = "unknown"  # not where it looks, and the source cannot search the rest of the tree


class Verdict(StrEnum):
    """What a release comes out as for a patchset: its patches' statuses added up."""

    NEEDS_PATCH = "needs-patch"  # a patch applied: the patched wheel is the one to use
    UPSTREAM = "upstream"  # nothing to do: the release has the fix, or never had the gate
    UNSUPPORTED = "unsupported"  # the release lacks what the patchset builds on
    BROKEN = "broken"  # a patch met code of a shape it does not know
    UNKNOWN = "unknown"  # nothing applied, and a gate's absence could not be searched for

    @classmethod
    def of(cls, statuses: Iterable[Status]) -> Verdict:
        found = set(statuses)
        if found & FAILING:
            return cls.BROKEN
        if Status.UNSUPPORTED in found:
            return cls.UNSUPPORTED
        if Status.APPLIED in found:
            return cls.NEEDS_PATCH
        if Status.UNKNOWN in found:
            return cls.UNKNOWN
        return cls.UPSTREAM

    @classmethod
    def parse(cls, text: str) -> Verdict:
        """The verdict a patchset names, or a ValueError listing the ones there are."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"{text!r} is not one of {', '.join(cls)}") from None

    def drifts_from(self, expected: Verdict | None) -> bool:
        """Whether a declared verdict exists and this is not it. ``unknown`` is upstream with an
        absence not searched for: it neither confirms ``upstream`` nor contradicts it."""
        if self is Verdict.UNKNOWN and expected is Verdict.UPSTREAM:
            return False
        return expected is not None and expected != self


FAILING = frozenset({Status.FAILED, Status.AMBIGUOUS})
"""The statuses that fail a run: nothing is written, and the exit status is not 0."""


@dataclass(frozen=True)
class Model:
    """The model a patchset is about, as the codemods need to know it."""

    types: tuple[str, ...] = field(metadata={"parse": model_type})
    architecture: str | None = field(default=None, metadata={"parse": python_name})
    image_token_attribute: str | None = field(default=None, metadata={"parse": python_name})

    def __post_init__(self) -> None:
        if not self.types:
            raise ValueError("types: expected at least one model type")


@dataclass(frozen=True)
class Outcome:
    status: Status
    detail: str = ""


@dataclass
class Context:
    """What one run of a codemod has changed so far, reported as it goes (``Codemod.report``)
    the way libcst's ``CodemodContext`` gathers a run's warnings: no method threads a list."""

    changes: list[str] = field(default_factory=list)


class ShapeError(Exception):
    """Raised inside a codemod when the code it must change has an unknown shape."""


BOM = "\ufeff"


def decode(data: bytes, path: str) -> str:
    """A source file's text, exactly (a BOM stays); ShapeError naming the byte if not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ShapeError(
            f"{path}: not UTF-8 text (byte {error.start}: {error.object[error.start]:#04x})"
        ) from error


class Files(Protocol):
    """What a tree is read from: a source (``patcher.sources``), which codemods need not know.

    ``searchable``: whether reading every file is cheap (on disk, not by range over HTTP), so
    that an absence can be proven by searching the whole tree.
    """

    searchable: bool

    def names(self) -> Sequence[str]: ...

    def read(self, path: str) -> bytes | None: ...


@dataclass(frozen=True)
class Signature:
    """What a barrier does, found wherever it moved: ``not-needed`` claims it is nowhere.

    ``find`` gives the lines of a module where the barrier is; ``words`` is a cheap text
    prefilter, one of which (lower case) any module holding the barrier contains. In a module
    under one of ``packages`` (path prefixes, such as the proposer's own package), where a
    helper the barrier moved into sits, ``find_in_package`` is used instead: it needs none of
    the context ``find`` asks of a module elsewhere.
    """

    barrier: str
    words: tuple[str, ...]
    find: Callable[[ast.Module], Iterable[int]]
    packages: tuple[str, ...] = ()
    find_in_package: Callable[[ast.Module], Iterable[int]] | None = None
    reach: Callable[[Any, list[str]], Iterable[tuple[str, int]]] | None = None
    """The tree-wide half (``_reach``): given the tree's modules, parsed as reached, and the
    paths ``root`` picks, every ``(path, line)`` the barrier's path reaches in any module."""
    root: Callable[[str, bytes], bool] | None = None
    """Whether a module (its path, its text in lower case) is one ``reach`` starts from."""
    reach_undecided: bool = False
    """Whether what ``reach`` finds is a barrier the codemod did not decide even in a file it
    decided: a call its interpreter does not follow (into another module, or a helper that
    hands back a model type) is a part of the check it never judged."""

    def lines(self, path: str, module: ast.Module) -> Iterable[int]:
        if self.find_in_package is not None and path.startswith(self.packages):
            return self.find_in_package(module)
        return self.find(module)


@functools.lru_cache(maxsize=64)
def python_ast(text: str) -> ast.Module:
    """``ast``'s tree of ``text``, parsed once per process (a signature search may see a module
    once per patch); ast is several times faster than libcst and gives line numbers. Refusals
    other than ``raise`` read as one (``_normalize``)."""
    from patcher.codemods._normalize import parse

    return parse(text)


@functools.lru_cache(maxsize=32)
def parsed(text: str) -> cst.Module:
    """libcst's tree of ``text``, parsed once per process: each patchset gets a tree of its own,
    and the matrix runs several patchsets over the same files (libcst trees are immutable)."""
    import libcst as cst

    return cst.parse_module(text)


@functools.lru_cache(maxsize=64)
def top_level_classes(text: str) -> frozenset[str]:
    """The classes ``text`` defines at module level; asked for each prerequisite of each
    patchset, so the matrix would otherwise parse the same file dozens of times."""
    return frozenset(node.name for node in ast.parse(text).body if isinstance(node, ast.ClassDef))


class _Memo:
    """What a search found, by what it searched: a signature, a path ('' for the whole tree's
    reach) and the sha256 of the bytes read. Bounded: the oldest half goes when it is full."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.found: dict[tuple[Signature, str, bytes], tuple[Any, ...]] = {}

    def get(self, key: tuple[Signature, str, bytes]) -> tuple[Any, ...] | None:
        return self.found.get(key)

    def put(self, key: tuple[Signature, str, bytes], value: tuple[Any, ...]) -> None:
        if len(self.found) >= self.size:
            for old in list(self.found)[: self.size // 2]:
                del self.found[old]
        self.found[key] = value


_SEEN = _Memo(50_000)


class Tree:
    """The code a codemod sees: the source's files with earlier codemods' changes on top."""

    def __init__(self, source: Files) -> None:
        self.source = source
        self.overlay: dict[str, str] = {}
        self._modules: dict[str, cst.Module] = {}
        self._names = set(source.names())
        self._files: dict[tuple[str, Any], list[str]] = {}
        self.reached: set[str] = set()  # what the last search's reach found (``sightings``)

    def exists(self, path: str) -> bool:
        return path in self._names

    @property
    def searchable(self) -> bool:
        return self.source.searchable

    def sightings(self, signature: Signature) -> list[str]:
        """Every ``path:line`` of the tree where ``signature`` finds its barrier, with the
        earlier codemods' changes on top; ShapeError for a module that mentions the barrier but
        cannot be read or parsed, since the barrier could hide there.

        What a search found is remembered for the process by the bytes it read (``_SEEN``):
        the matrix runs every patchset over one release, and each proof searches the same
        files again, changed in one or two of them at most."""
        found = []
        roots: list[str] = []
        modules: dict[str, ast.Module] = {}  # parsed here, for the reach that follows
        self.reached = set()
        whole = hashlib.sha256("\0".join(sorted(self._names)).encode())  # what reach reads

        def parse(path: str, data: bytes) -> ast.Module:
            if path not in modules:
                text = decode(data, path).removeprefix(BOM)
                try:
                    modules[path] = python_ast(text)
                except (SyntaxError, ValueError, RecursionError) as error:
                    line = getattr(error, "lineno", None)
                    raise ShapeError(
                        f"{path}:{line or 1}: not valid Python (or nested too deep to parse), "
                        f"so {signature.barrier} may be there"
                    ) from error
            return modules[path]

        for path in sorted(self._names):
            if not path.endswith(".py"):
                continue
            data = self._data(path, signature)
            digest = hashlib.sha256(data).digest()
            whole.update(b"%d:%s%s" % (len(path), path.encode(), digest))
            lowered = data.lower()
            if signature.root is not None and signature.root(path, lowered):
                roots.append(path)
            if not any(word.encode() in lowered for word in signature.words):
                continue
            key = (signature, path, digest)
            lines = _SEEN.get(key)
            if lines is None:
                lines = tuple(sorted(set(signature.lines(path, parse(path, data)))))
                _SEEN.put(key, lines)
            found += [f"{path}:{line}" for line in lines]
        if signature.reach is not None:
            from patcher.codemods._reach import Program

            def text(path: str) -> str | None:
                return decode(self._data(path, signature), path).removeprefix(BOM)

            program = Program(
                self._names, lambda path: parse(path, self._data(path, signature)), text
            )
            key = (signature, "", whole.digest())
            reached = _SEEN.get(key)
            if reached is None:
                try:
                    reached = tuple(sorted(set(signature.reach(program, roots))))
                except RecursionError:
                    raise ShapeError(
                        f"code nested deeper than the search for {signature.barrier} can follow"
                    ) from None
                _SEEN.put(key, reached)
            places = [f"{path}:{line}" for path, line in reached]
            self.reached = set(places)
            seen = set(found)
            found += [place for place in places if place not in seen]
        return found

    def _data(self, path: str, signature: Signature) -> bytes:
        if path in self.overlay:
            return self.overlay[path].encode()
        read = self.source.read(path)
        if read is None:
            raise ShapeError(
                f"{path}: listed in the tree but unreadable (a dangling symlink, or a "
                f"file gone since it was listed), so {signature.barrier} may be there"
            )
        return read

    def files(self, codemod: Codemod[Any]) -> list[str]:
        """The files ``codemod`` reads in this tree, worked out once: the engine prefetches them,
        the results cache hashes them, the codemod reads them."""
        key = (codemod.name, codemod.options)
        if key not in self._files:
            self._files[key] = codemod.paths(self._names)
        return self._files[key]

    def text(self, path: str) -> str | None:
        """The file's text without a BOM, which ast rejects and libcst drops (the engine puts
        it back); ShapeError if it is not UTF-8."""
        if path in self.overlay:
            return self.overlay[path]
        data = self.source.read(path)
        return None if data is None else decode(data, path).removeprefix(BOM)

    def module(self, path: str) -> cst.Module | None:
        if path not in self._modules:
            text = self.text(path)
            if text is None:
                return None
            import libcst as cst

            try:
                self._modules[path] = parsed(text)
            except cst.ParserSyntaxError as error:
                raise ShapeError(f"{path}: libcst cannot parse it ({error.message})") from error
        return self._modules[path]

    def deepest(self) -> str:
        """Where the code this tree parsed nests deepest, ``path:line (N levels)``: named when a
        walk of libcst's tree ran out of Python's stack (``X = 1+1+...`` with 1000 terms)."""
        found = (0, "", 0)
        for path in self._modules:
            text = self.text(path)
            try:
                nested = ast_depth(ast.parse(text or ""))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            found = max(found, (nested[0], path, nested[1]))
        depth, path, line = found
        return f"{path}:{line} ({depth} levels)" if path else "a file it parsed"

    def snapshot(self) -> dict[str, str]:
        return dict(self.overlay)

    def restore(self, snapshot: dict[str, str]) -> None:
        """Forget every change made since ``snapshot``."""
        for path in set(self.overlay) - set(snapshot) | {
            p for p in snapshot if snapshot[p] != self.overlay.get(p)
        }:
            self._modules.pop(path, None)
        self.overlay = dict(snapshot)

    def replay(self, changed: dict[str, str]) -> None:
        """Lay texts computed earlier over the tree, as if the codemod had just written them."""
        for path, text in changed.items():
            self._modules.pop(path, None)
            self.overlay[path] = text

    def update(self, path: str, module: cst.Module) -> None:
        self._modules[path] = module
        self.overlay[path] = module.code

    def modules_mentioning(
        self, paths: Iterable[str], word: str
    ) -> Iterator[tuple[str, cst.Module]]:
        """The parsed modules among ``paths`` whose text has ``word``.

        A cheap skip before libcst's parse, which costs most of a codemod's time; the matching
        that follows is structural.
        """
        for path in paths:
            text = self.text(path)
            if text is not None and word in text:
                module = self.module(path)
                assert module is not None
                yield path, module

    def defines_class(self, path: str, name: str) -> bool:
        """Whether ``path`` defines a top-level class ``name`` (a cheap check with ast)."""
        text = self.text(path)
        if text is None:
            return False
        try:
            return name in top_level_classes(text)
        except (SyntaxError, ValueError) as error:
            line = getattr(error, "lineno", None)
            where = f"{path}:{line}" if line else path
            raise ShapeError(
                f"{where}: not valid Python ({getattr(error, 'msg', error)})"
            ) from error


def class_lines(name: str, module: ast.Module) -> Iterator[int]:
    """Where ``module`` defines a class ``name``, at any depth."""
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and node.name == name:
            yield node.lineno


def moved_class(tree: Tree, name: str, why: str) -> Outcome | None:
    """For a class a patchset names but not where it says (``why``): ``failed`` at its line if
    the tree defines it elsewhere; None where it is nowhere, or the tree cannot be searched
    (the caller's ``unsupported`` stands)."""
    signature = Signature(
        f"class {name}", (f"class {name.lower()}",), functools.partial(class_lines, name)
    )
    return moved(tree, signature, why)


def moved(tree: Tree, definition: Signature, why: str) -> Outcome | None:
    """``failed`` at the first line where the tree has ``definition`` (a class, or a barrier's
    behaviour) though ``why`` says it is not where expected; None where it is nowhere, or the
    tree cannot be searched."""
    if not tree.searchable:
        return None
    try:
        found = tree.sightings(definition)
    except ShapeError as error:
        return Outcome(Status.FAILED, str(error))
    if not found:
        return None
    return Outcome(Status.FAILED, f"{found[0]}: {definition.barrier} is here, but {why}")


def ast_depth(tree: ast.AST) -> tuple[int, int]:
    """How deep ``tree`` nests, and the line of its deepest node; walked without recursion."""
    deepest, line = 0, 0
    stack = [(tree, 1, 0)]
    while stack:
        node, depth, at = stack.pop()
        at = getattr(node, "lineno", at)
        if depth > deepest:
            deepest, line = depth, at
        stack.extend((child, depth + 1, at) for child in ast.iter_child_nodes(node))
    return deepest, line


OptionsT = TypeVar("OptionsT")


class Codemod(ABC, Generic[OptionsT]):
    """One structural rewrite of vLLM. A subclass sets DESCRIPTION and gives, as ``OptionsT``,
    the frozen dataclass of the options a patchset gives it (read and checked by
    ``patcher.schema``); its name is its module's, with dashes (``patcher.codemods.registry``)."""

    DESCRIPTION: ClassVar[str]
    SIGNATURE: ClassVar[Signature | None] = None
    """The barrier's behaviour, searched for across the tree before a ``not-needed``."""

    def __init__(self, model: Model, options: OptionsT) -> None:
        self.model = model
        self.options = options
        self.context = Context()

    @property
    def name(self) -> str:
        return type(self).__module__.rpartition(".")[2].replace("_", "-")

    @classmethod
    def options_type(cls) -> type[Any]:
        """The options dataclass this codemod declares as its generic parameter."""
        for klass in cls.__mro__:
            for base in getattr(klass, "__orig_bases__", ()):
                if get_origin(base) is Codemod:
                    options: type[Any] = get_args(base)[0]
                    return options
        raise TypeError(f"{cls.__name__} declares no options type (Codemod[Options])")

    @abstractmethod
    def paths(self, names: Iterable[str]) -> list[str]:
        """The files this codemod reads, out of the tree's ``names``, so they can be prefetched."""

    @abstractmethod
    def transform(self, tree: Tree) -> Outcome:
        """Rewrite the tree, or report why not. May raise ShapeError for ``failed``."""

    def run(self, tree: Tree) -> Outcome:
        """The codemod's outcome, a ``not-needed`` proven by a search of the whole tree."""
        return self.prove_absent(tree, self.attempt(tree))

    def attempt(self, tree: Tree) -> Outcome:
        """What the codemod makes of the files it reads (``paths``) alone: all that decides it,
        so the engine may cache it by their texts."""
        self.context = Context()
        try:
            return self.transform(tree)
        except ShapeError as error:
            return Outcome(Status.FAILED, str(error))
        except RecursionError:  # libcst walks its trees by recursion; the stack is unwound here
            return Outcome(
                Status.FAILED,
                f"{tree.deepest()}: code nested deeper than libcst can walk within Python's "
                f"recursion limit of {sys.getrecursionlimit()}",
            )

    def report(self, change: str) -> None:
        """Note a change made, for the outcome's detail."""
        self.context.changes.append(change)

    def unsupported(self, tree: Tree, name: str, why: str) -> Outcome:
        """``unsupported`` for want of class ``name`` (``why``), unless it moved elsewhere."""
        return moved_class(tree, name, why) or Outcome(Status.UNSUPPORTED, why)

    def prove_absent(self, tree: Tree, outcome: Outcome) -> Outcome:
        """``not-needed`` only where the barrier is nowhere in the tree: found elsewhere, or in
        an expected file in a shape the codemod does not know, it is ``failed`` at its line; a
        source that cannot be searched gives ``unknown``. An ``applied`` or ``present`` holds
        only where the barrier is nowhere outside the files the codemod decided: another
        occurrence is ``ambiguous``, naming both places."""
        signature = self.SIGNATURE
        if signature is None:
            return outcome
        if outcome.status in (Status.APPLIED, Status.PRESENT):
            return self.prove_alone(tree, outcome, signature)
        if outcome.status is not Status.NOT_NEEDED:
            return outcome
        try:
            for path in tree.files(self):
                text = tree.text(path)
                if text is not None and not text.strip() and not path.endswith("/__init__.py"):
                    raise ShapeError(f"{path}:1: empty, where {signature.barrier} is expected")
            if not tree.searchable:
                return Outcome(
                    Status.UNKNOWN,
                    f"{outcome.detail} where {self.name} looks; this source is read by range "
                    f"and cannot be searched for {signature.barrier} elsewhere",
                )
            found = tree.sightings(signature)
        except ShapeError as error:
            return Outcome(Status.FAILED, str(error))
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return Outcome(
                Status.FAILED,
                f"{found[0]}: {signature.barrier} is here{more}, in a file or shape "
                f"{self.name} does not patch",
            )
        return outcome

    def decided(self, tree: Tree) -> set[str]:
        """The files whose barriers this codemod decided (``tree`` as it left it): every file
        it reads, unless it knows which of them hold what it decided."""
        return set(tree.files(self))

    def prove_alone(self, tree: Tree, outcome: Outcome, signature: Signature) -> Outcome:
        """``outcome`` (applied or present), or ``ambiguous`` where the whole tree has the
        barrier in a file the codemod did not decide. A source read by range is not searched
        (its members are too many to read); the outcome says so."""
        if not tree.searchable:
            return outcome
        decided = self.decided(tree)
        try:
            found = tree.sightings(signature)
        except ShapeError as error:
            return Outcome(Status.FAILED, str(error))
        others = [
            place
            for place in found
            if place.rsplit(":", 1)[0] not in decided
            or (signature.reach_undecided and place in tree.reached)
        ]
        if not others:
            return outcome
        more = f" (and {len(others) - 1} more)" if len(others) > 1 else ""
        return Outcome(
            Status.AMBIGUOUS,
            f"{outcome.status} in {', '.join(sorted(decided)) or 'no file'} ({outcome.detail}), "
            f"but {signature.barrier} is also at {others[0]}{more}, which {self.name} did not "
            f"decide",
        )


class FileCodemod(Codemod[FileOptions]):
    """A codemod whose code vLLM has kept in CANDIDATE_FILES (globs), or in a patchset's
    ``files``."""

    CANDIDATE_FILES: ClassVar[tuple[str, ...]]

    def paths(self, names: Iterable[str]) -> list[str]:
        files = self.CANDIDATE_FILES if self.options.files is None else self.options.files
        return match_paths(names, files)


def summarize(applied: list[str], present: list[str], already: str, absent: str) -> Outcome:
    """One status for a codemod that looked at several places: applied beats present."""
    if applied:
        return Outcome(Status.APPLIED, "; ".join(applied))
    if present:
        return Outcome(Status.PRESENT, f"{', '.join(sorted(set(present)))}: {already}")
    return Outcome(Status.NOT_NEEDED, absent)


def match_paths(names: Iterable[str], patterns: Sequence[str]) -> list[str]:
    return sorted({n for n in names for p in patterns if fnmatch.fnmatchcase(n, p)})
