"""A small tokenizer written as data: a ``tokenizers`` JSON file and its transformers config.

Character-level: each printable ASCII character is a token, so any English prompt encodes
without unknowns, and the ``Fuse`` decoder turns ids back into text by concatenation. Ids past
the characters are filler tokens, so that every id a random model can emit decodes.
"""

from __future__ import annotations

import json
from typing import Any

from patcher.errors import PatcherError
from patcher.replica.spec import TokenizerSpec

CHARACTERS = ["\n", "\t", *(chr(code) for code in range(32, 127))]


def vocabulary(spec: TokenizerSpec, vocab_size: int) -> list[str]:
    """The tokens by id: the special ones, the characters, the words, then filler up to
    ``vocab_size``."""
    tokens = [*spec.special, *CHARACTERS, *spec.words]
    if vocab_size < len(tokens):
        raise PatcherError(f"a vocabulary of {vocab_size} cannot hold {len(tokens)} base tokens")
    return tokens + [f"<|t{index}|>" for index in range(len(tokens), vocab_size)]


def token_id(spec: TokenizerSpec, token: str) -> int:
    return spec.special.index(token)


def tokenizer_files(spec: TokenizerSpec, vocab_size: int, chat_template: str) -> dict[str, bytes]:
    """``tokenizer.json`` and ``tokenizer_config.json`` for ``PreTrainedTokenizerFast``."""
    tokens = vocabulary(spec, vocab_size)
    added = [
        {
            "id": index,
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for index, token in enumerate(spec.special)
    ]
    tokenizer: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Split",
            "pattern": {"Regex": "[\\s\\S]"},
            "behavior": "Isolated",
            "invert": False,
        },
        "post_processor": None,
        "decoder": {"type": "Fuse"},
        "model": {
            "type": "WordLevel",
            "vocab": {token: index for index, token in enumerate(tokens)},
            "unk_token": spec.unk,
        },
    }
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": spec.bos,
        "eos_token": spec.eos,
        "unk_token": spec.unk,
        "pad_token": spec.pad,
        "model_max_length": 4096,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
    }
    if spec.named:
        config["extra_special_tokens"] = dict(spec.named)
    if chat_template:
        config["chat_template"] = chat_template
    return {
        "tokenizer.json": json.dumps(tokenizer, ensure_ascii=False).encode(),
        "tokenizer_config.json": json.dumps(config, indent=1).encode(),
    }
