"""``python -m benchmarks.redraw``: parts of the redraw benchmark (``--help``)."""

from . import main

main()
