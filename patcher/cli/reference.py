"""The command-line reference as Markdown, rendered from the argparse parser itself.

The docs site's CLI page is written from this at build time (``docs/hooks/generated.py``),
so ``--help`` and the docs cannot disagree: every command, its summary, usage, description,
options and epilog come from the parser ``patcher`` runs, through argparse's own formatter.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

WIDTH = 100
"""Columns of the usage lines: fixed, so the page does not depend on the terminal it is built in."""

MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|])")


def escaped(text: str) -> str:
    """Help text as literal Markdown: its ``*``, ``_``, ``<`` and ``|`` are not markup."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    """The parser's own formatter class (so defaults show as ``--help`` shows them), fixed width."""
    # typeshed's formatter_class takes prog alone; every HelpFormatter also takes width
    made: argparse.HelpFormatter = parser.formatter_class(prog=parser.prog, width=WIDTH)  # type: ignore[call-arg]
    return made


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Each subcommand as (name, one-line summary, parser), in the order ``--help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, summaries.get(name, ""), sub


def options(parser: argparse.ArgumentParser) -> list[str]:
    """A list item per argument ``--help`` shows: its invocation, whether required, its help."""
    fmt = formatter(parser)
    items = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        invocation = fmt._format_action_invocation(action)
        help_text = fmt._expand_help(action) if action.help else ""
        required = " (required)" if action.required and action.option_strings else ""
        text = f": {escaped(help_text)}" if help_text else ""
        items.append(f"- `{invocation}`{required}{text}")
    return items


def usage(parser: argparse.ArgumentParser) -> str:
    fmt = formatter(parser)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return fmt.format_help().strip()


def section(name: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    """One command's part of the page: an anchor named after it, so pages link ``cli.md#NAME``."""
    anchor = name.replace(" ", "-")
    lines = [f"{'#' * level} `{parser.prog}` {{#{anchor}}}", ""]
    if summary:
        lines += [escaped(summary[0].upper() + summary[1:]) + ".", ""]
    lines += ["```text", usage(parser), "```", ""]
    if parser.description and parser.description.strip() != summary.strip():
        lines += ["```text", parser.description.strip(), "```", ""]
    lines += [*options(parser), ""]
    if parser.epilog:
        lines += ["```text", parser.epilog.strip(), "```", ""]
    for sub_name, sub_summary, sub in subcommands(parser):
        lines += section(f"{name} {sub_name}", sub_summary, sub, level + 1)
    return lines


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole reference page for ``parser`` (default: the one ``patcher`` runs)."""
    if parser is None:
        from patcher.cli.parser import build_parser  # the whole CLI: only when a page is rendered

        parser = build_parser()
    lines = [
        "# Command-line reference",
        "",
        "Generated from the parser `patcher` runs when this site is built: it says what",
        "`patcher COMMAND --help` says.",
        "",
        "| command | what it does |",
        "| --- | --- |",
    ]
    lines += [
        f"| [`{name}`](#{name}) | {escaped(summary)} |" for name, summary, _ in subcommands(parser)
    ]
    lines += ["", "```text", usage(parser), "```", "", *options(parser), ""]
    for name, summary, sub in subcommands(parser):
        lines += section(name, summary, sub, 2)
    return "\n".join(lines)
