"""One module per ``fetta`` sub-command.

Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``main(args) -> int``. :mod:`gen.cli` lists them in ``COMMANDS``.
"""
