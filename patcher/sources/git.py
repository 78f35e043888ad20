"""A ref of a vLLM git repository, read from its object store without a checkout."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import git

from patcher.errors import PatcherError
from patcher.sources.base import Source
from patcher.sources.directory import parse_version


class GitSource(Source):
    def __init__(self, repository: Path, ref: str, version: str | None = None) -> None:
        try:
            self.repo = git.Repo(repository)
            self.commit = self.repo.commit(ref)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as error:
            raise PatcherError(f"{repository}: not a git repository") from error
        except (git.BadName, ValueError) as error:
            raise PatcherError(f"{repository}: no ref {ref!r}") from error
        try:
            self.commit.tree / "vllm" / "__init__.py"
        except KeyError as error:
            raise PatcherError(f"{repository}@{ref}: not a vLLM tree") from error
        where = f"{repository}@{ref}"
        if version is not None:
            self.version = parse_version(version, where)
        else:
            try:
                self.version = parse_version(ref.removeprefix("v"), where)
            except PatcherError as error:
                raise PatcherError(
                    f"{where}: the ref is not a release tag, so it gives no version; "
                    "say which release it holds with --vllm-version"
                ) from error
        self.description = f"vllm {self.version} ({repository}@{ref})"

    def close(self) -> None:
        self.repo.close()

    @property
    def identity(self) -> str:
        return f"git:{self.commit.hexsha}"

    def names(self) -> Sequence[str]:
        blobs = self.commit.tree.traverse(predicate=lambda item, depth: item.type == "blob")  # type: ignore[union-attr]
        return [str(item.path) for item in blobs]  # type: ignore[union-attr]

    def read(self, path: str) -> bytes | None:
        try:
            return self.commit.tree[path].data_stream.read()
        except KeyError:
            return None
