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
        self.note = None                  # "spill 3" while a bar is open: shown in it
        self.t0 = self.pos0 = None        # the rate's baseline (time, position)

    def _label(self, phase, total):
        unit = self.units.get(phase)
        if total and unit == "bytes":
            return f"{phase} ({total / 1e9:.2f} GB)" if total >= 1e9 else f"{phase} ({total / 1e6:.1f} MB)"
        if total and unit:
            return f"{phase} ({total:,} {unit})"
        return phase

    def __call__(self, phase, done, total=None):
        if not total:        # a count without an end (sorted runs spilled)
            if self.bar is not None:              # shown in the open bar, which goes on
                self.note = f"{phase} {done}"
                self.bar.update(0, current_item=self._item())
            elif hasattr(self.stream, "isatty") and self.stream.isatty():
                self.stream.write(f"{phase} {done}\n")
                self.stream.flush()
            return
        done = int(done)
        if phase != self.phase:
            self.done()
            self.phase = phase
            self.note = None
            self.bar = click.progressbar(length=int(total), label=self._label(phase, total),
                                         file=self.stream, show_eta=True, show_percent=True,
                                         item_show_func=lambda x: x)
            self.bar.__enter__()
            # the rate counts from the first report on: what was done before it took an unknown
            # time (a first chunk reported at once would otherwise read as millions of MB/s)
            self.t0, self.pos0 = time.perf_counter(), done
            self.pos = 0
        if done > self.pos:
            self.bar.update(done - self.pos, current_item=self._item(done))
            self.pos = done

    def _item(self, done=None):
        """The rate since the phase's first report (once there is some), and the note."""
        done = self.pos if done is None else done
        parts = []
        dt = time.perf_counter() - self.t0
        if done > self.pos0 and dt >= 0.05:
            rate = (done - self.pos0) / dt
            unit = self.units.get(self.phase)
            if unit == "bytes":
                parts.append(f"{rate / 1e6:.0f} MB/s")
            elif unit:
                parts.append(f"{rate / 1e6:.1f} M {unit}/s")
        if self.note:
            parts.append(self.note)
        return ", ".join(parts) or None

    def done(self):
        """Finish the open bar at its last position (a phase that ended early says so)."""
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
            self.phase = None
            self.note = None
