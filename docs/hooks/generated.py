"""MkDocs hook: the pages written from code at build time, so they cannot go stale.

- ``cli.md``, the command-line reference, rendered from the installed patcher's parser;
- the models x releases table on the patchsets page, taken from between the README's markers,
  where ``nox -s matrix`` writes it;
- the list of patchsets on the home page: each one's description from its file, the
  releases it patches from that table;
- the bench figures on the measurements page, rendered from the committed ``nox -s bench``
  reports in ``docs/bench/``;
- the JSON Schema of every ``--format json`` document on the JSON page, from the package's
  ``patcher/report_schema.json``.

Nothing is written into docs/: the generated text exists only in the build.
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from patcher import patchset as patchsets
from patcher.bench_report import with_bench_reports
from patcher.cli.reference import markdown
from patcher.matrix import MODELS_LIST, models_list, readme_table
from patcher.report import schema

MODELS_TABLE = "<!-- models-table: from the README -->"
REPORT_SCHEMA = "<!-- report-schema: from patcher/report_schema.json -->"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "cli.md", content=markdown()))
    return files


def on_page_markdown(text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    root = Path(config.config_file_path).parent
    text = with_bench_reports(text, root)
    if MODELS_LIST in text:
        chosen = [patchsets.load(name) for name in patchsets.available()]
        readme = (root / "README.md").read_text()
        text = text.replace(MODELS_LIST, models_list(chosen, readme))
    if MODELS_TABLE in text:
        readme = (root / "README.md").read_text()
        text = text.replace(MODELS_TABLE, readme_table(readme).strip())
    if REPORT_SCHEMA in text:
        shown = json.dumps(schema(), indent=2)
        text = text.replace(REPORT_SCHEMA, f"```json\n{shown}\n```")
    return text
