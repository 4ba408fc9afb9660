"""graphene_py/progress.py: one bar per phase on a terminal, with honest rates."""
from __future__ import annotations

import io
import re
import time

from graphene_py.progress import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def _frames(out):
    return [f for f in re.split(r"[\r\n]", out.getvalue()) if f.strip()]


def test_a_spill_count_shows_inside_the_open_bar_which_goes_on():
    """A count without an end ("spill 3") while a phase's bar is open is shown in that bar; the
    bar is not closed and reopened at 0% (it was, once per spilled run)."""
    out = Tty()
    p = Progress(stream=out, units={"read": "bytes"})
    p("read", 10 << 20, 100 << 20)
    p("spill", 1)
    p("read", 50 << 20, 100 << 20)
    p("spill", 2)
    p("read", 100 << 20, 100 << 20)
    p.done()
    frames = _frames(out)
    starts = [f for f in frames if re.search(r"\b0%", f) and "read" in f]
    assert len(starts) <= 1, frames                  # one bar for the whole phase
    assert any("spill 2" in f for f in frames), frames
    assert not any(f.startswith("spill") for f in frames), frames   # no line of its own


def test_the_rate_counts_from_the_first_report():
    """What was done before a phase's first report took an unknown time: the rate is measured
    from there (a first chunk reported at once read as millions of MB/s)."""
    out = Tty()
    p = Progress(stream=out, units={"read": "bytes"})
    p("read", 500 << 20, 1000 << 20)               # half reported at once
    time.sleep(0.2)
    p("read", 520 << 20, 1000 << 20)               # 20 MiB in ~0.2 s: ~100 MB/s
    p.done()
    rates = [float(m) for m in re.findall(r"(\d+) MB/s", out.getvalue())]
    assert rates and max(rates) < 200, out.getvalue()


def test_no_bar_and_no_count_lines_off_a_terminal():
    out = io.StringIO()
    p = Progress(stream=out, units={"read": "bytes"})
    p("read", 1, 10)
    p.done()
    p("spill", 1)
    assert "spill" not in out.getvalue()


def test_generation_reports_progress_to_the_last_edge(tmp_path):
    """tools/generate.py's bar: generate_to_file reports every chunk, rising, ending at the total
    (a bar that stops short, as the partitioner's last phase once did at about 50%, fails)."""
    from graphene_py.generate import generate_to_file
    seen = []
    info = generate_to_file(str(tmp_path / "k.el"), "kron", scale=10, edge_factor=8, chunk=1000,
                            progress=lambda phase, done, total: seen.append((phase, done, total)))
    assert len(seen) == 9 and {p for p, _, _ in seen} == {"generate"}
    assert [d for _, d, _ in seen] == sorted(d for _, d, _ in seen)
    assert seen[-1][1] == seen[-1][2] == info["num_edges"] == 8 << 10


def test_a_superstep_line_names_the_lists_served_from_ram():
    """A masked superstep whose lists came from kept lists (MS-BFS/APSP's bottom-up levels) has
    frontier 0 and edges > 0: the line says where the edges came from."""
    from graphene_py.algos.common import superstep_line
    st = {"frontier": 0, "active_edges": 1234, "kept_lists": 56, "mode": "mask"}
    assert "kept lists 56 (from RAM)" in superstep_line(3, st)
    del st["kept_lists"]
    assert "kept" not in superstep_line(3, st)


def test_a_streamed_gpu_superstep_line_says_what_moved_and_what_stayed():
    """A streamed GPU iteration's line names its tier, the lists copied in and those kept in GPU
    memory (issue 15: the device and tier of every superstep)."""
    from graphene_py.algos.common import superstep_line
    st = {"iteration": 2, "bytes_moved": 2_500_000, "kept_bytes": 7_000_000,
          "mode": "gpu-stream-ssd", "device": "gpu"}
    line = superstep_line(2, st)
    assert "[gpu-stream-ssd]" in line and "to GPU 2.5 MB" in line
    assert "kept on GPU 7.0 MB" in line
    st["kept_bytes"] = 0
    assert "kept on GPU" not in superstep_line(2, st)


def test_every_superstep_line_says_where_it_ran():
    """Issue 15: the device and tier of every superstep in its progress line. A CPU superstep
    shows its mode; a GPU one its device as well, unless its mode names it; a resident GPU
    run's supersteps get the tier "gpu-resident" (gpu_steps)."""
    from graphene_py.algos.common import superstep_line
    from graphene_py.gpu.resident import gpu_steps
    assert "[scan]" in superstep_line(1, {"mode": "scan"})
    assert "[scan]" in superstep_line(1, {"mode": "scan", "device": "cpu"})
    assert "[gpu-td]" in superstep_line(1, {"mode": "gpu-td", "device": "gpu"})
    assert "[gpu all]" in superstep_line(1, {"mode": "all", "device": "gpu"})
    assert "[gpu]" in superstep_line(1, {"device": "gpu"})
    seen = []
    steps = gpu_steps({"supersteps": [{"frontier": 3}, {"mode": "gpu-bu", "frontier": 9}]},
                      progress=seen.append)
    assert [s["mode"] for s in steps] == ["gpu-resident", "gpu-bu"] and seen == steps
    assert {s["device"] for s in steps} == {"gpu"}
    assert "[gpu-resident]" in superstep_line(0, steps[0])
    one = gpu_steps({"seconds": 0.5, "iterations": 4})        # a run without per-step stats
    assert one == [{"mode": "gpu-resident", "seconds": 0.5, "iterations": 4, "device": "gpu"}]
    assert gpu_steps({"tier": "stream-host"})[0]["mode"] == "gpu-stream-host"
