"""The comment the CPU serving harness's codemods leave on every statement they write.

Two codemods write the harness (``cpu-spec-decode`` and ``cpu-model-device``) and each finds the
other's statements by it, so it lives here, in no codemod: a codemod never imports another.
"""

MARK = "patcher cpu-spec-decode"
"""In every statement the harness writes: the harness is never mistaken for vLLM's code."""
