"""the cache: its folder, its size by kind, and cleaning it

patcher cache dir
patcher cache size --format json
patcher cache clean --kind wheels,venvs --older-than 7d --dry-run
"""


def arguments(parser) -> None:
    from patcher.cli.cache import add_cache_commands

    add_cache_commands(parser)
