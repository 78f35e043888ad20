"""MkDocs hook: the CLI reference page, rendered from the installed patcher's parser at build time.

Nothing is written into docs/: the page exists only in the build, so it cannot go stale.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from patcher.cli_reference import markdown


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "cli.md", content=markdown()))
    return files
