"""Serving vLLM for real: host checks, the server process, the load, the metrics, the report.

Modules only point down: ``setup`` and ``host`` (what to start, and whether this machine can),
``process`` (one server, stopped with its whole process group), ``load`` and ``metrics`` (what is
sent and read), ``bench`` (both runs and the report). Argument parsing and printing live in the
CLI (``patcher.cli.commands.serve_bench``, ``preflight``).
"""
