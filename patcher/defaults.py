"""The defaults and choices a command's ``--help`` shows, where the module that uses them is
heavy to import: declared here, in a module that imports nothing, and imported from here by
that module, so ``patcher COMMAND --help`` loads neither it nor the stacks it brings (issue 39:
``patcher matrix --help`` took 15 times as long as ``patcher --help``)."""

PATCHSET = "kimi-k2.5-eagle3"
"""The patchset a command reads without ``--patchset`` (``patcher.patchset``)."""

DRAFTER_KINDS = ("llama", "mla")
"""The drafters a replica has (``patcher.replica.spec``)."""

CONVENTIONS = ("vllm", "sglang", "specforge")
"""How a trainer numbers the states it fed: vLLM's id k is the input of decoder layer k;
SGLang and SpecForge number the output of layer k, which is vLLM's k + 1 (issue 19;
``patcher.doctor``)."""

HEALTH_SECONDS = 3600.0
"""Seconds for ``/health`` to answer once a server starts: the whole load of a 547 GB
checkpoint on 8 GPUs (``patcher.serving.setup.Timeouts``), and preflight's too (one default
per option name)."""

TRAIN_BUDGET_SECONDS = 1800.0
"""The longest training the acceptance proof starts (``patcher.acceptance.recipe.Recipe``)."""

CACHE_KINDS = ("wheels", "members", "venvs", "trained", "patched", "proofs", "other")
"""Every kind ``patcher cache size`` counts and ``clean --kind`` takes, in that order
(``patcher.cache_usage``)."""
