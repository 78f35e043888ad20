"""A command of ``patcher``, declared by its own module of ``patcher.cli.commands``: its name,
its summary and examples, and ``arguments``, which adds its options and sets the function it
runs (``parser.set_defaults(run=...)``), as a libcst command declares ``add_args`` beside
``transform_module``. Its module imports nothing heavy at the top, so ``patcher --help`` reads
every command's summary without loading what the commands run."""

from __future__ import annotations

TYPE_CHECKING = False  # typing takes milliseconds to import: --help does not wait for it
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable


class Command:
    def __init__(
        self,
        name: str,
        summary: str,
        arguments: Callable[[argparse.ArgumentParser], None],
        *examples: str,
    ) -> None:
        self.name = name
        self.summary = summary
        self.arguments = arguments
        """Adds the command's options to its parser, and the function it runs."""
        self.examples = examples

    @property
    def epilog(self) -> str:
        return "examples:\n" + "".join(f"  {example}\n" for example in self.examples)
