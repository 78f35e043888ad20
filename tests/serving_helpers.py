"""Stand-ins for what a served run measured, shared by the tests of the proofs built on it."""

from __future__ import annotations

from patcher.serving.load import ServerRun


def server_run(requests: int, tokens: int) -> ServerRun:
    """A run of ``requests`` answers of ``tokens`` tokens each, all alike: not a real server's."""
    return ServerRun(
        startup_seconds=1.0,
        wall_seconds=1.0,
        output_tokens=(tokens,) * requests,
        latencies=(0.1,) * requests,
        outputs=("x",) * requests,
    )
