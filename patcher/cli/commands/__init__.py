"""The commands of ``patcher``, one module each: its name, summary and examples, its options
and the function it runs (``patcher.cli.command.Command``). The list is this folder."""
