"""``python -m dml``: the ``dml`` command (see :mod:`dml.cli`)."""
import sys

from dml.cli import main

if __name__ == "__main__":  # the guard matters: spawned Dask workers re-import __main__
    sys.exit(main())
