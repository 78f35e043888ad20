"""The README and the docs site: a README that fits two screens, links that resolve, and a CLI
reference rendered from the parser, so help and docs cannot disagree.

mkdocs itself (``nox -s docs``, strict) checks the links and anchors inside docs/; these tests
check what it cannot see (the README) and what the generated page must hold.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import yaml

from patcher import generated
from patcher.cli.parser import build_parser
from patcher.cli.reference import escaped, markdown, subcommands

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

README_LIMIT = 8 * 1024
"""Bytes: two screens of a README for users; the reference lives in docs/."""

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)(?: \{#([\w-]+)\})?$", re.MULTILINE)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (its default slugify, for ASCII)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {explicit or slug(title) for title, explicit in HEADING.findall(page.read_text())}


def every_parser(
    parser: argparse.ArgumentParser, name: str = ""
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for sub_name, _, sub in subcommands(parser):
        found += every_parser(sub, f"{name} {sub_name}".strip())
    return found


def test_readme_fits_in_8_kb() -> None:
    assert len(README.read_bytes()) <= README_LIMIT


def test_readme_opens_with_the_main_job_and_the_tests() -> None:
    """The first code block: what a fresh machine runs (CI runs the second, .ci/run)."""
    first_block = README.read_text().split("```")[1]
    assert "nox -s build-wheel" in first_block
    assert "nox -s tests" in first_block


def test_readme_links_into_docs_resolve() -> None:
    """Every relative link of the README names a file in the tree, and an anchor it has."""
    broken = []
    for target in LINK.findall(README.read_text()):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        if not page.is_file() or (anchor and anchor not in anchors(page)):
            broken.append(target)
    assert broken == []


def test_readme_links_every_docs_page() -> None:
    linked = {target.partition("#")[0] for target in LINK.findall(README.read_text())}
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert pages - linked == set()


def test_readme_lists_every_command() -> None:
    """The commands at a glance: one row per subcommand the parser has."""
    rows = set(re.findall(r"^\| `([\w-]+)` \|", README.read_text(), re.MULTILINE))
    missing = {name for name, _, _ in subcommands(build_parser())} - rows
    assert missing == set(), f"README's commands table lacks {sorted(missing)}"


def test_every_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml's nav is one nobody finds; cli.md is generated there."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(items: list[object]) -> list[str]:
        found: list[str] = []
        for item in items:
            for value in item.values() if isinstance(item, dict) else [item]:
                found += pages(value) if isinstance(value, list) else [str(value)]
        return found

    nav = pages(config["nav"])
    assert sorted(nav) == sorted([page.name for page in DOCS.glob("*.md")] + ["cli.md"])
    assert config["strict"] is True


def test_cli_reference_names_every_command_and_option() -> None:
    """Each subcommand has its section and anchor, and each option its item with its help."""
    page = markdown()
    missing = []
    for name, parser in every_parser(build_parser()):
        if name and f"## `patcher {name}` {{#{name.replace(' ', '-')}}}" not in page:
            missing.append(f"section {name}")
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue  # the commands themselves: their sections, checked above
            for option in action.option_strings:
                if not re.search(rf"^- `(.*, )?{re.escape(option)}[ `,]", page, re.MULTILINE):
                    missing.append(f"{name} {option}")
            if action.help and "%(" not in action.help and escaped(action.help) not in page:
                missing.append(f"{name} {action.dest}: its help")
    assert missing == []


def test_cli_reference_keeps_markup_out_of_help() -> None:
    """A help text's ``*``, ``_`` and ``|`` stay text in the page, not emphasis or a table cell."""
    parser = argparse.ArgumentParser(prog="demo")
    commands = parser.add_subparsers()
    sub = commands.add_parser("run", help="a | b")
    sub.add_argument("--glob", help="files like *_x_*.py (default: %(default)s)", default="<all>")
    page = markdown(parser)
    assert r"files like \*\_x\_\*.py (default: \<all\>)" in page
    assert r"| [`run`](#run) | a \| b |" in page


def test_the_codemods_page_describes_every_codemod_of_the_registry_with_its_options():
    """The registry's table is the one list of codemods: the patchsets page has a section for
    each name in it and names each of its options there, so a codemod added to the table
    without its documentation, or an option without a word, fails here."""
    from patcher.codemods.registry import CODEMODS

    page = (DOCS / "patchsets.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^### ([^\n]+)\n(.*?)(?=^##|\Z)", page, re.MULTILINE | re.DOTALL))
    for name in CODEMODS:
        (heading,) = [h for h in sections if name in re.split(r" and |, ", h)]
        options = [f.name for f in dataclasses.fields(CODEMODS[name].options_type())]
        missing = [o for o in options if f"`{o}`" not in sections[heading]]
        assert missing == [], (name, missing)


GENERATED = {
    README: ["models-matrix"],
    DOCS / "architectures.md": ["architectures"],
}
"""The generated blocks each page must have: written by a command, signed by its digest."""


def test_generated_tables_are_as_their_command_wrote_them() -> None:
    """A table between generated markers is written by its command only: the opening marker
    carries the digest of what the command wrote, so a hand edit fails here."""
    found = {}
    for page in [README, *sorted(DOCS.rglob("*.md"))]:
        text = page.read_text()
        assert generated.problems(text, page.name) == []
        found[page] = [b.name for b in generated.blocks(text)]
    for page, names in GENERATED.items():
        assert found[page] == names, page


def test_a_hand_edit_of_a_generated_table_is_found() -> None:
    """Before/after on the real README: one cell changed, one character, a row dropped, a
    digest taken away: each fails the check; the command writing it again mends it."""
    text = README.read_text()
    (block,) = [b for b in generated.blocks(text) if b.name == "models-matrix"]
    rows = block.body.splitlines(keepends=True)
    edits = [
        text.replace(block.body, block.body.replace(" pass", " fail", 1)),
        text.replace(block.body, block.body.replace("|", "| ", 1)),
        text.replace(block.body, "".join(rows[:-1])),
        re.sub(r"; sha256 [0-9a-f]+\)", ")", text, count=1),
    ]
    for edited in edits:
        assert edited != text
        assert generated.problems(edited, "README.md"), edited[:200]
        mended = generated.splice(edited, "models-matrix", "nox -s matrix", block.body)
        assert generated.problems(mended, "README.md") == []


def test_the_home_pages_model_list_is_written_from_the_patchsets_and_the_readmes_table() -> None:
    """docs/index.md names no model or release by hand: the hook writes one line per patchset,
    its releases as the README's table has them; a patchset missing from the table is an error
    (the table is stale), and a new patchset shows without an edit of the page."""
    import pytest

    from patcher import patchset as patchsets
    from patcher.errors import PatcherError
    from patcher.matrix import MODELS_LIST, models_list, needs_patch_cells

    assert MODELS_LIST in (DOCS / "index.md").read_text()
    readme = README.read_text()
    chosen = [patchsets.load(name) for name in patchsets.available()]
    listed = models_list(chosen, readme).splitlines()
    cells = needs_patch_cells(readme)
    assert len(listed) == len(chosen)
    for line, patchset in zip(listed, chosen, strict=True):
        assert line.startswith(f"- `{patchset.name}`: {patchset.description};")
        assert line.endswith(cells[patchset.name] or "no release")
    assert cells["kimi-k2.5-eagle3"] == "0.15.0 to 0.17.1"
    (block,) = [b for b in generated.blocks(readme) if b.name == "models-matrix"]
    row = next(r for r in block.body.splitlines() if r.startswith("| `kimi-k2.5-eagle3` |"))
    stale = readme.replace(row + "\n", "")
    with pytest.raises(PatcherError, match=r"no row for kimi-k2\.5-eagle3"):
        models_list(chosen, stale)
