"""The ``dml`` command: train, evaluate and predict from files, validate job files, and a demo.

::

    dml [-v | --log-level LEVEL] COMMAND ...
    dml train JOB.yaml [--scheduler ADDRESS] [--output DIR]
    dml validate JOB.yaml [JOB.yaml ...]
    dml evaluate MODEL DATA [--target COL] [--metrics accuracy,f1]
    dml predict MODEL DATA --output PATH [--proba] [--keep COL ...]
    dml demo [--quick]

Every command but ``validate`` runs on a Dask cluster obtained with :func:`dml.runtime.connect`:
the scheduler at ``--scheduler``, else ``$DML_SCHEDULER_ADDRESS``, else the job file's
``scheduler.address``, else an embedded local cluster (one worker process per core). Data is read
and transformed by the workers; only parameters, metrics and small summaries come back.

Errors that a user can cause (a bad job file, a missing file, an unreachable scheduler, an
incompatible model file) are reported as one line on stderr with a non-zero exit status: 2 for
a bad job file or command line, 1 otherwise. ``--debug`` shows the traceback instead.

dml's log records (epoch summaries, resuming from a checkpoint, the cluster it connected to) go
to stderr, one timestamped line each, at the level of ``--log-level`` (``-v``: info, ``-vv``:
debug; default: ``$DML_LOG_LEVEL``, else warning), so a batch job's log shows them.

The package: :mod:`dml.cli._schema` (the job file's declared fields: checks, reference page,
JSON Schema), :mod:`dml.cli._job` (reading a job file), :mod:`dml.cli._data` (data, preprocessing,
fitting and evaluation on the workers), :mod:`dml.cli._commands` (the commands),
:mod:`dml.cli._demo` (``dml demo``). Metrics are those of :mod:`dml.model_selection`.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from dml.cli._commands import (cmd_evaluate, cmd_predict, cmd_train, cmd_validate,
                               format_table)
from dml.cli._data import arrays_to_frame, build_preprocessing, evaluate_frame
from dml.cli._demo import DEMOS, DemoEntry, cmd_demo, split_blocks
from dml.cli._errors import EXIT_FAILURE, EXIT_USAGE, CLIError, JobError
from dml.cli._job import Job, Step, load_job
from dml.cli._schema import FORMATS

__all__ = ["main", "load_job", "Job", "Step", "JobError", "CLIError", "DEMOS", "DemoEntry",
           "split_blocks", "evaluate_frame", "build_preprocessing", "arrays_to_frame",
           "format_table", "log_level", "LOG_LEVEL_ENV"]

LOG_LEVEL_ENV = "DML_LOG_LEVEL"
_VERBOSE_HELP = ("log more: -v info (the cluster, resuming from checkpoints, epoch summaries of "
                 "models with verbose: 1), -vv debug")
_LEVELS = ("debug", "info", "warning", "error")


def _parser() -> argparse.ArgumentParser:
    import dml
    from dml.cli._schema import help_text

    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a subcommand's default must not undo `dml --debug COMMAND` (or -v).
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error")
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help=_VERBOSE_HELP)
    common.add_argument("--log-level", choices=_LEVELS, default=argparse.SUPPRESS,
                        help=f"level of dml's log lines on stderr (default: ${LOG_LEVEL_ENV}, "
                             "else warning)")
    scheduler = argparse.ArgumentParser(add_help=False)
    scheduler.add_argument("--scheduler", metavar="ADDRESS",
                           help="Dask scheduler address (default: $DML_SCHEDULER_ADDRESS, the "
                                "job file's scheduler.address, or an embedded local cluster)")
    scheduler.add_argument("--timeout", metavar="SECONDS", type=float,
                           help="how long to wait for the scheduler (default 20)")
    for k, what in (("ca_file", "CA certificate(s) that signed the scheduler's certificate"),
                    ("cert", "client certificate (may contain the key too)"),
                    ("key", "client private key")):
        scheduler.add_argument(f"--tls-{k.replace('_', '-')}", dest=f"tls_{k}", metavar="FILE",
                               help=f"TLS {what} for a tls:// scheduler (default: "
                                    f"${'DML_TLS_' + k.upper()}, the job file's scheduler.tls)")

    p = argparse.ArgumentParser(
        prog="dml", description="Train, evaluate and apply dml models on a Dask cluster.")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help=_VERBOSE_HELP)
    p.add_argument("--log-level", choices=_LEVELS,
                   help=f"level of dml's log lines on stderr (default: ${LOG_LEVEL_ENV}, else "
                        "warning)")
    p.add_argument("--version", action="version", version=f"dml {dml.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    t = sub.add_parser("train", parents=[common, scheduler],
                       help="train a model from a YAML job file",
                       description="Train the job's preprocessing + model pipeline, evaluate it "
                                   "on held-out rows, write model.dml and metrics.json.",
                       epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("job", help="job file (YAML)")
    t.add_argument("--output", metavar="DIR", help="output directory (overrides the job file)")
    t.set_defaults(func=cmd_train)

    v = sub.add_parser("validate", parents=[common],
                       help="check job files without a cluster",
                       description="Check every field of the job files, the data paths and the "
                                   "columns the job names (reading only the data's header), "
                                   "without a cluster. Exit status 2 and one line per problem "
                                   "when a job is invalid.",
                       epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("jobs", nargs="+", metavar="JOB", help="job file (YAML)")
    v.set_defaults(func=cmd_validate)

    e = sub.add_parser("evaluate", parents=[common, scheduler],
                       help="metrics of a saved model on labelled data")
    e.add_argument("model", help="model file written by `dml train` or dml.save")
    e.add_argument("data", help="CSV/TSV/Parquet/libsvm file, glob or Parquet directory")
    e.add_argument("--target", metavar="COL",
                   help="label column (required for tables; libsvm data's label is y)")
    e.add_argument("--metrics", action="append", metavar="NAMES",
                   help="comma-separated metric names (default: by task type)")
    e.add_argument("--format", choices=FORMATS, help="data format (default: from extension)")
    e.add_argument("--json", action="store_true", help="print JSON instead of a table")
    e.set_defaults(func=cmd_evaluate)

    pr = sub.add_parser("predict", parents=[common, scheduler],
                        help="write predictions of a saved model",
                        description="Predict every row of DATA. --output PATH: *.csv writes "
                                    "one CSV file; *.parquet one Parquet file (single-partition "
                                    "data) or a Parquet directory; any other path, or "
                                    "multi-file data, a Parquet directory. The Dask workers "
                                    "read DATA and write the output, so on a multi-machine "
                                    "cluster both must be on storage the workers share.")
    pr.add_argument("model", help="model file written by `dml train` or dml.save")
    pr.add_argument("data", help="CSV/TSV/Parquet/libsvm file, glob or Parquet directory")
    pr.add_argument("--output", "-o", required=True, metavar="PATH",
                    help="where to write the predictions")
    pr.add_argument("--proba", action="store_true",
                    help="add one probability column per class (proba_<class>)")
    pr.add_argument("--keep", nargs="+", metavar="COL",
                    help="input columns to copy to the output (libsvm data: y, the label)")
    pr.add_argument("--format", choices=FORMATS, help="data format (default: from extension)")
    pr.set_defaults(func=cmd_predict)

    d = sub.add_parser("demo", parents=[common, scheduler],
                       help="train every model family on generated data and print one table")
    d.add_argument("--quick", action="store_true",
                   help="smaller data (a few seconds); also $DML_DEMO_QUICK=1")
    d.set_defaults(func=cmd_demo)
    return p


_NOISY_LOGGERS = ("distributed", "distributed.nanny", "distributed.scheduler",
                  "distributed.worker", "distributed.core", "distributed.batched",
                  "distributed.comm", "distributed.client", "distributed.deploy")


def _quiet_dask_logs() -> dict:
    """Silence cluster start-up/shut-down chatter (errors still show); return the old levels."""
    old = {}
    for name in _NOISY_LOGGERS:
        logger = logging.getLogger(name)
        old[name] = logger.level
        logger.setLevel(logging.ERROR)
    return old


def log_level(args) -> int:
    """The level of dml's log lines: --log-level, else -v/-vv, else $DML_LOG_LEVEL, else warning."""
    if getattr(args, "log_level", None):
        return getattr(logging, args.log_level.upper())
    verbose = getattr(args, "verbose", 0) or 0
    if verbose:
        return logging.INFO if verbose == 1 else logging.DEBUG
    env = os.environ.get(LOG_LEVEL_ENV, "").strip().lower()
    if env:
        if env not in _LEVELS:
            raise CLIError(f"${LOG_LEVEL_ENV}={env!r} is not a log level; use one of "
                           f"{', '.join(_LEVELS)}", EXIT_USAGE)
        return getattr(logging, env.upper())
    return logging.WARNING


class _LogTo:
    """Send the ``dml`` logger's records at ``level`` to stderr while the command runs."""

    def __init__(self, level: int):
        self.level = level
        self.logger = logging.getLogger("dml")

    def __enter__(self):
        self.handler = logging.StreamHandler(sys.stderr)
        self.handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s [%(name)s] %(message)s"))
        self.saved = (self.logger.level, self.logger.propagate)
        self.logger.addHandler(self.handler)
        self.logger.setLevel(self.level)
        # Not also through the root logger: a host process's handlers would print it twice.
        self.logger.propagate = False
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.level, self.logger.propagate = self.saved
        self.handler.flush()


def main(argv: list[str] | None = None) -> int:
    """Run the ``dml`` command; returns the exit status."""
    import warnings

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    prog = f"dml {args.command}"
    levels = {} if args.debug else _quiet_dask_logs()
    try:
        with warnings.catch_warnings(), _LogTo(log_level(args)):
            # Dask's note that text labels become object arrays is not actionable for users.
            warnings.filterwarnings("ignore", message="Dask currently has limited support for "
                                                      "converting pandas extension dtypes")
            return args.func(args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the command line reports, --debug re-raises
        if args.debug:
            raise
        print(_one_line(prog, exc), file=sys.stderr)
        return exc.code if isinstance(exc, CLIError) else EXIT_FAILURE
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _one_line(prog: str, exc: Exception) -> str:
    if isinstance(exc, JobError):
        return "\n".join(f"{prog}: error: {m}" for m in exc.messages)
    message = str(exc) or type(exc).__name__
    if isinstance(exc, CLIError):
        return f"{prog}: error: {message}"
    from dml.io import ModelFileError

    if isinstance(exc, (ModelFileError, FileNotFoundError, ConnectionError, PermissionError)):
        return f"{prog}: error: {message}"
    if isinstance(exc, (ValueError, TypeError, OSError, ImportError)):
        return f"{prog}: error: {message} (run with --debug for the traceback)"
    return (f"{prog}: internal error: {type(exc).__name__}: {message} (run with --debug for the "
            "traceback and please report it)")
