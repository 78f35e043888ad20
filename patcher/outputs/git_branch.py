"""Commit the patched files onto a new branch of a vLLM git repository, touching no work tree.

The commit is built with git's plumbing in a temporary index: blobs for the patched files, a
tree that is the ref's tree with those blobs in place, a commit whose parent is the ref. The
branch is created last, so a failure leaves no branch behind (at most unreachable objects,
which git collects).
"""

from __future__ import annotations

import os
import tempfile

import git

from patcher.errors import PatcherError
from patcher.outputs.base import Output
from patcher.result import PatchResult
from patcher.sources.git import GitSource


class BranchOutput(Output):
    """A new branch of the repository ``source`` reads, on top of the ref it reads."""

    def __init__(self, source: GitSource, branch: str) -> None:
        self.source, self.branch = source, branch

    def write(self, result: PatchResult) -> str:
        message = f"patcher: {result.patchset.name} on vllm {result.version}\n\n" + "\n".join(
            f"{name}: {o.status}" for name, o in result.outcomes.items()
        )
        sha = commit_to_branch(self.source, result.changed, self.branch, message)
        return f"committed {len(result.changed)} file(s) as {sha[:12]} on branch {self.branch}"


def commit_to_branch(source: GitSource, changed: dict[str, str], branch: str, message: str) -> str:
    """The new commit's sha, on ``branch``, which must not exist yet."""
    repo = source.repo
    if f"refs/heads/{branch}" in {ref.path for ref in repo.references}:
        raise PatcherError(f"{repo.working_dir}: branch {branch!r} exists already")
    try:
        repo.git.check_ref_format("--branch", branch)
    except git.GitCommandError as error:
        raise PatcherError(f"{branch!r} is not a valid branch name") from error
    with tempfile.TemporaryDirectory(prefix="patcher-index-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        repo.git.read_tree(source.commit.hexsha, env=env)
        for path, text in sorted(changed.items()):
            mode = f"{source.commit.tree[path].mode:o}"
            with tempfile.TemporaryFile() as stdin:
                stdin.write(text.encode("utf-8"))
                stdin.seek(0)
                blob = repo.git.hash_object("-w", "--stdin", "--path", path, istream=stdin)
            repo.git.update_index("--cacheinfo", f"{mode},{blob},{path}", env=env)
        tree = repo.git.write_tree(env=env)
    sha = repo.git.commit_tree(tree, "-p", source.commit.hexsha, "-m", message, env=identity(repo))
    repo.git.update_ref(f"refs/heads/{branch}", sha, "")  # "" as old value: only if absent
    return sha


def identity(repo: git.Repo) -> dict[str, str]:
    """The repository's own author if it has one configured, else patcher's."""
    reader = repo.config_reader()
    name = reader.get_value("user", "name", default="patcher")
    email = reader.get_value("user", "email", default="patcher@localhost")
    return {
        "GIT_AUTHOR_NAME": str(name),
        "GIT_AUTHOR_EMAIL": str(email),
        "GIT_COMMITTER_NAME": str(name),
        "GIT_COMMITTER_EMAIL": str(email),
    }
