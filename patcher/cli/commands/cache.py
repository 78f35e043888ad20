"""the cache: its folder, its size by kind, and cleaning it

patcher cache dir
patcher cache size --format json
patcher cache clean --kind wheels,venvs --older-than 7d --dry-run
"""


def arguments(parser) -> None:
    import argparse

    from patcher.cli.overview import QUIET_HELP, VERBOSE_HELP
    from patcher.cli.terminal import add_format_option
    from patcher.defaults import CACHE_KINDS

    actions = parser.add_subparsers(
        dest="cache_command", required=True, metavar="SUBCOMMAND", title="subcommands"
    )

    def add(name: str, summary: str) -> argparse.ArgumentParser:
        added: argparse.ArgumentParser = actions.add_parser(
            name, help=summary, formatter_class=parser.formatter_class, allow_abbrev=False
        )
        return added

    where = add("dir", "print the cache's root ($PATCHER_CACHE_DIR, else the user cache)")
    where.set_defaults(run=run_dir)
    size = add("size", "its size by kind")
    add_format_option(size)
    size.set_defaults(run=run_size)
    clean = add("clean", "remove entries by kind and age; what a running patcher holds is kept")
    for each in (where, size, clean):  # -q and -v after the subcommand too, as after a command
        each.add_argument(
            "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP
        )
        each.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    kinds = (
        f"a comma list of {', '.join(CACHE_KINDS)}, or all (default: all but proofs, which the "
        "matrix shows)"
    )
    kind = clean.add_argument("--kind", metavar="KINDS", help=kinds)
    kind.completes = (*CACHE_KINDS, "all")  # type: ignore[attr-defined]  # patcher.cli.completion
    clean.add_argument(
        "--older-than",
        metavar="AGE",
        help="only entries not modified for AGE: a number and s, m, h, d or w (7d)",
    )
    clean.add_argument(
        "--dry-run", action="store_true", help="say what would be removed, and remove nothing"
    )
    add_format_option(clean)
    clean.set_defaults(run=run_clean)


def run_dir(args) -> int:
    from patcher.cli.cache import cache_dir_command

    return cache_dir_command(args)


def run_size(args) -> int:
    from patcher.cli.cache import cache_size_command

    return cache_size_command(args)


def run_clean(args) -> int:
    from patcher.cli.cache import cache_clean_command

    return cache_clean_command(args)
