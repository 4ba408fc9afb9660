"""`graphene` command line (click). Thin: parse, call, print. Commands live in cli_*.py modules.

Exit codes: 0 ok; 1 error (`Error: <message>` on stderr, traceback only with --debug); 2 usage;
3 verification failed.
"""
from __future__ import annotations

import sys

import click

from .errors import GrapheneError, VerificationError


class _Group(click.Group):
    """Turns GrapheneError (and friends) into `Error: ...` + exit 1, unless --debug."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
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


def _register():
    # partition / info / list (dataset commands) and run / bench (algorithm commands).
    from . import cli_dataset, cli_run
    for mod in (cli_dataset, cli_run):
        for cmd in getattr(mod, "COMMANDS", []):
            main.add_command(cmd)


_register()
