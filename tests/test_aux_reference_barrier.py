"""The barrier line ``aux-states-reference`` reports when vLLM refuses to build its engine.

Offline: ``aux_reference.py`` imports only the standard library at top level. The pydantic
message is written out literally, in the shape vLLM's config validation raises it (pydantic is
not in the test environment); the real refusal is read by tests/test_aux_states_reference.py.
"""

from __future__ import annotations

from patcher.verify.aux_reference import barrier_line

PYDANTIC_REFUSAL = (
    "1 validation error for SpeculativeConfig\n"
    "  Value error, Eagle3 is only supported for ['llama', 'qwen'] models. Got "
    "self.target_model_config.hf_text_config.model_type='deepseek_v3' [type=value_error]\n"
    "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"
)


def test_a_validation_error_gives_its_refusal_not_the_pointer_to_pydantics_docs():
    line = barrier_line(ValueError(PYDANTIC_REFUSAL))
    assert line.startswith("Value error, Eagle3 is only supported for")


def test_a_plain_error_gives_its_last_line_and_an_empty_one_its_type():
    refusal = "Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested"
    assert barrier_line(RuntimeError(f"while loading\n{refusal}\n")) == refusal
    assert barrier_line(RuntimeError()) == "RuntimeError"
