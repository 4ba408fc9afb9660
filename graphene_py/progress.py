"""Progress of long operations on stderr, through click's progress bar: one bar per phase, with
the phase's name and size, percent, ETA and rate; on a stderr that is not a terminal click shows
only each phase's name, once; quiet callers pass no progress at all.

    progress = Progress()          # progress(phase, done, total) from any phase, any order
    progress("read", 1 << 20, 2 << 30)
    progress.done()                # finish the open bar (also at each phase change)
"""
from __future__ import annotations

import sys
import time

import click


class Progress:
    def __init__(self, stream=None, units=None):
        self.stream = stream or sys.stderr
        self.units = units or {}          # phase -> "bytes" | "edges" | ... (label suffix)
        self.phase = None
        self.bar = None
        self.pos = 0

    def _label(self, phase, total):
        unit = self.units.get(phase)
        if total and unit == "bytes":
            return f"{phase} ({total / 1e9:.2f} GB)" if total >= 1e9 else f"{phase} ({total / 1e6:.1f} MB)"
        if total and unit:
            return f"{phase} ({total:,} {unit})"
        return phase

    def __call__(self, phase, done, total=None):
        if not total:        # a count without an end (sorted runs spilled): a line on a terminal
            self.done()
            if hasattr(self.stream, "isatty") and self.stream.isatty():
                self.stream.write(f"{phase} {done}\n")
                self.stream.flush()
            return
        if phase != self.phase:
            self.done()
            self.phase = phase
            self.pos = 0
            self.bar = click.progressbar(length=int(total), label=self._label(phase, total),
                                         file=self.stream, show_eta=True, show_percent=True,
                                         item_show_func=lambda x: x)
            self.bar.__enter__()
            self.t0 = time.perf_counter()
        done = int(done)
        if done > self.pos:
            rate = done / max(time.perf_counter() - self.t0, 1e-9)
            unit = self.units.get(phase)
            shown = (f"{rate / 1e6:.0f} MB/s" if unit == "bytes" else
                     f"{rate / 1e6:.1f} M {unit}/s" if unit else None)
            self.bar.update(done - self.pos, current_item=shown)
            self.pos = done

    def done(self):
        """Finish the open bar at its last position (a phase that ended early says so)."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
            self.phase = None
