"""The acceptance proof: a drafter trained here accepts through the patched server (issue 18).

``recipe`` says how target and drafter are trained, ``train`` is the in-venv trainer,
``trained`` caches its outputs by content, ``proof`` judges the served runs. The command line
lives in ``patcher.cli.commands.serve_bench`` (``--acceptance``, ``--doctor-proof``).
"""
