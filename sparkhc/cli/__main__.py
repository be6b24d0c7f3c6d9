"""``python -m sparkhc.cli``: the ``sparkhc`` command."""

from sparkhc.cli import main

main()
