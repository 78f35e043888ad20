"""Tiny replicas of real models, written by code: configs, a tokenizer, a preprocessor config.

vLLM's own engine loads them with ``--load-format dummy`` (random weights, nothing on disk), so a
serving path can run for real on CPU in a minute; or, with ``--weights seeded``, with safetensors
that transformers' own model class wrote (``weights``), which both transformers and vLLM load.
Each architecture is data: one TOML file in ``architectures/``.
"""
