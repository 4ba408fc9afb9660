"""`graphene` command line (click). Thin: parse, call, print. Commands live in cli_*.py modules.

Exit codes: 0 ok; 1 error (`Error: <message>` on stderr, traceback only with --debug); 2 usage;
3 verification failed; 130 interrupted (Ctrl-C); 141 stdout closed early (`| head`).
"""
from __future__ import annotations

import os
import sys

# numpy's OpenBLAS starts a thread per further core when numpy is imported, and those threads spin
# waiting for work (blas_thread_server) while this process imports and sets up: on 2 cores, a
# fresh `graphene run kcore --k 17 --membership-only -g kron22` spent 0.29 s more CPU and 0.18 s
# more wall with them (median of 8 cold interleaved pairs, BENCHMARKS.md). No command here calls
# BLAS (jit.py): one thread, unless the user set it. (Before any import of numpy: the package's
# __init__ imports none.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# the files this kind of command loaded last time are read ahead by native threads while it imports
# them (startfiles.py: stdlib only); only as the `graphene` command, not inside a user's process
if os.path.basename(sys.argv[0]) == "graphene":
    from . import startfiles as _startfiles  # noqa: E402
    _startfiles.start(sys.argv)

# a `--device gpu|auto` run's CUDA context is made by the driver on a thread of its own while
# the imports below go on (gpu/early.py: stdlib only; any other command imports none of it)
if any(a in ("gpu", "auto", "--device=gpu", "--device=auto") for a in sys.argv):
    from .gpu import early as _early  # noqa: E402
    _early.start(sys.argv)

import click  # noqa: E402

from .errors import GrapheneError, VerificationError  # noqa: E402


#: exit code when stdout's reader went away (`graphene run bfs --nl | head -1`): 128 + SIGPIPE, what
#: a shell reports for a program killed by SIGPIPE, so `set -o pipefail` scripts see a cut output
EXIT_BROKEN_PIPE = 141
#: exit code after Ctrl-C (SIGINT): 128 + SIGINT, the shell convention
EXIT_INTERRUPTED = 130


def _quiet_stdout():
    """Point stdout at /dev/null so that no later flush (ours or the interpreter's at exit) raises
    BrokenPipeError again ("Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _say_err(msg):
    try:
        click.echo(msg, err=True)
    except (OSError, ValueError):   # stderr gone too: nothing left to tell
        pass


class _Group(click.Group):
    """Turns GrapheneError (and friends) into `Error: ...` + exit 1, unless --debug; a closed stdout
    pipe into a quiet exit 141, Ctrl-C into `Interrupted` + exit 130 (no traceback either way)."""

    def invoke(self, ctx):
        try:
            rv = super().invoke(ctx)
            sys.stdout.flush()   # a pipe closed after the last write fails here, not at exit
            return rv
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(EXIT_BROKEN_PIPE)
        except KeyboardInterrupt:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            _say_err("Interrupted")
            sys.exit(EXIT_INTERRUPTED)
        except VerificationError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"Verification: FAIL ({e})", err=True)
            sys.exit(3)
        except (GrapheneError, OSError, MemoryError) as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"Error: {e}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.version_option(package_name="graphene_py")
@click.pass_context
def main(ctx, debug):
    """graphene: graph analytics on SSDs with fine-grained io_uring IO (Graphene, FAST'17)."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def run_cli():
    """The `graphene` command: main(), then out of the process at once. The interpreter's own
    teardown (collecting every module, numba's and LLVM's objects) took 0.11-0.17 s after the
    work was done (BENCHMARKS.md, "No per-process tax"); here the atexit handlers run (logging,
    temporary folders, Ray), stdout and stderr are flushed, and the process exits with the code
    main() gave. Output files are complete before that (written and renamed into place)."""
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    if code in (0, None):
        try:
            from . import startfiles
            startfiles.record(sys.argv)    # what the next start of this kind reads ahead
        except Exception:   # noqa: BLE001 - a list not written only makes the next start slower
            pass
    _exit_now(code)


def _exit_now(code):
    import atexit
    if code is None:
        code = 0
    elif not isinstance(code, int):            # sys.exit("message"): printed, status 1
        _say_err(str(code))
        code = 1
    run = getattr(atexit, "_run_exitfuncs", None)
    if run is None:                            # not CPython: the ordinary way out
        sys.exit(code)
    run()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):          # a reader that went away: nothing left to say
            pass
    os._exit(code)


def _register():
    # partition / info / list (dataset commands) and run / bench (algorithm commands).
    from . import cli_cluster, cli_dataset, cli_device, cli_run
    for mod in (cli_dataset, cli_run, cli_cluster, cli_device):
        for cmd in getattr(mod, "COMMANDS", []):
            main.add_command(cmd)


_register()
