"""``python -m dml.cli``: the ``dml`` command."""
import sys

from dml.cli import main

if __name__ == "__main__":  # the guard matters: spawned Dask workers re-import __main__
    sys.exit(main())
