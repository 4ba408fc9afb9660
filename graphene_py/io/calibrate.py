"""Device profiles: how fast a disk serves random reads of each size, measured once and kept.

Graphene fixes its requests at 16 KB with a small merge gap, which suits the SSDs of its paper. A
device with few IOPS (a cloud volume capped at 3-5k IOPS, a throttled cgroup) wants fewer, larger
requests and long merge gaps; a device capped in bandwidth wants no gap bytes at all. So each physical
device is measured once -- random O_DIRECT reads of 4 KB ... 512 KB through the same IO engine and
queue depth the runs use, `seconds` per size, a few seconds in all -- and the profile (IOPS at each
size) is stored in $GRAPHENE_HOME/devices.json. The planner (io/planner.py) then picks, per
superstep, the merge gap and request cap whose exact request count and size (`planner.simulate`)
take the least predicted time: time = requests / IOPS(mean request size), interpolated log-log
between the measured sizes (bandwidth-bound past the largest). Without a profile the fixed defaults
apply (config.MAX_GAP_BLOCKS, MAX_IO_BYTES, 128 KB for large supersteps).

The key of a profile names the device (io/devices.device_key) *and* the process's block-IO cgroup:
a cgroup with a blkio throttle is, to the processes in it, a different device. `graphene calibrate`
measures again (refresh); `graphene partition` measures a device that has no profile yet when the new
dataset puts at least MIN_BYTES on it (the reads need that much room to be random).
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import config, startfiles
from ..errors import GrapheneError

SIZES = (4096, 16384, 65536, 131072, 262144, 524288)
STORE = "devices.json"
#: data a profile is measured over (less would measure the device's own cache)
MIN_BYTES = 64 << 20
SECONDS = 0.3
VERSION = 1
#: the request cap a profile's slot size may grow to (the buffer pool must still hold QD x 2 slots)
MAX_SLOT = 524288


@dataclass
class Profile:
    sizes: list                      # request sizes, bytes, increasing
    iops: list                       # random reads per second at each size
    queue_depth: int = config.QUEUE_DEPTH
    engine: str = ""
    direct: bool = True
    measured_at: float = 0.0
    seconds: float = 0.0             # how long the measurement took
    bytes_over: int = 0              # size of the data the reads were spread over
    folders: list = field(default_factory=list)
    version: int = VERSION

    def __post_init__(self):
        self._ls = np.log(np.asarray(self.sizes, dtype=np.float64))
        self._li = np.log(np.maximum(np.asarray(self.iops, dtype=np.float64), 1e-9))
        self.mbps = [i * s / 1e6 for s, i in zip(self.sizes, self.iops)]
        self._bw = max(i * s for s, i in zip(self.sizes, self.iops))

    @property
    def bandwidth(self):
        """The best bytes per second measured (at any request size)."""
        return self._bw

    def iops_at(self, size):
        """IOPS for requests of `size` bytes (array or scalar): log-log interpolation between the
        measured sizes; below the smallest, its IOPS; past the largest, the best bandwidth seen."""
        s = np.asarray(size, dtype=np.float64)
        s = np.maximum(s, 1.0)
        v = np.exp(np.interp(np.log(s), self._ls, self._li))
        big = s > self.sizes[-1]
        if np.any(big):
            v = np.where(big, np.minimum(self.iops[-1], self._bw / s), v)
        return v

    def seconds_for(self, ios, nbytes):
        """Predicted time to read `nbytes` in `ios` requests (arrays broadcast)."""
        ios = np.asarray(ios, dtype=np.float64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        safe = np.maximum(ios, 1.0)
        return np.where(ios > 0, safe / self.iops_at(nbytes / safe), 0.0)

    def slot_bytes(self, lo=131072, hi=MAX_SLOT):
        """The smallest measured size in [lo, hi] that reaches 90% of the best bandwidth: larger
        requests gain nothing on this device (the buffer slot and dense extent size)."""
        best = 0.9 * self._bw
        for s, i in zip(self.sizes, self.iops):
            if lo <= s <= hi and i * s >= best:
                return int(s)
        return int(min(hi, max(lo, self.sizes[-1])))

    def to_dict(self):
        return {k: v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict) or d.get("version") != VERSION:
            return None
        try:
            sizes, iops = list(d["sizes"]), list(d["iops"])
            if len(sizes) < 2 or len(sizes) != len(iops) or sorted(sizes) != sizes:
                return None
            if not all(float(i) > 0 for i in iops):
                return None
            return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self):
        return ", ".join(f"{_size(s)} {i:,.0f}/s" for s, i in zip(self.sizes, self.iops))


def _size(n):
    return f"{n >> 20}M" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10}K"


# -- keys and the store ---------------------------------------------------------------------------
def cgroup_of(path="/proc/self/cgroup") -> str:
    """This process's block-IO cgroup ("" at the root): the v1 blkio hierarchy, else the v2 one."""
    v2 = ""
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                if "blkio" in parts[1].split(","):
                    return "" if parts[2] == "/" else parts[2]
                if parts[0] == "0" and parts[1] == "":
                    v2 = "" if parts[2] == "/" else parts[2]
    except OSError:
        pass
    return v2


def profile_key(folder):
    """The store's key for the device under `folder` as this process sees it, or None."""
    from .devices import device_key
    dk = device_key(folder)
    if dk is None:
        return None
    cg = cgroup_of()
    return f"{dk}@{cg}" if cg else dk


def _store_path():
    return os.path.join(config.home_dir(), STORE)


def load_all() -> dict:
    startfiles.note(_store_path())
    try:
        with open(_store_path()) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def lookup(key):
    if key is None:
        return None
    return Profile.from_dict(load_all().get(key))


def _update(change):
    """Read-modify-write the store under a lock (concurrent calibrations of different devices)."""
    home = config.home_dir()
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, ".devices.lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        d = load_all()
        change(d)
        fd, tmp = tempfile.mkstemp(dir=home, prefix=".devices.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(d, f, indent=1, sort_keys=True)
            os.replace(tmp, _store_path())
        except BaseException:       # nothing half-written left beside the store
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def save(key, profile):
    _update(lambda d: d.__setitem__(key, profile.to_dict()))


def forget(keys=None) -> list:
    """Remove the profiles of `keys` (all when None); returns the keys removed."""
    gone = []

    def change(d):
        for k in list(d):
            if keys is None or k in keys:
                del d[k]
                gone.append(k)
    _update(change)
    return gone


# -- measuring ------------------------------------------------------------------------------------
def measure(files, queue_depth=None, engine="auto", seconds=SECONDS, sizes=SIZES, seed=1):
    """Random reads over `files` (paths; each at least max(sizes) bytes), `seconds` per size:
    a Profile. Raises OSError/GrapheneIOError as the engine does."""
    from .buffers import BufferPool
    from .engines import make_engine
    qd = int(queue_depth or config.QUEUE_DEPTH)
    fsz = np.array([os.path.getsize(p) for p in files], dtype=np.int64)
    sizes = [int(s) for s in sizes]
    if not len(files) or int(fsz.min()) < max(sizes):
        raise ValueError("calibration needs files of at least "
                         f"{max(sizes)} bytes each")
    rng = np.random.default_rng(seed)
    weight = fsz / fsz.sum()
    t_all = time.perf_counter()
    pool = BufferPool(max(sizes), qd + 8)
    eng = make_engine(engine, list(files), np.zeros(len(files), np.int32), pool, queue_depth=qd)
    try:
        iops = []
        for s in sizes:
            done, spent, batches, k = 0, 0.0, 0, 2 * qd
            rate = None
            while batches < 2 or spent < seconds:
                if rate is not None:    # batches of ~1/4 of the time left, growing at most 4x
                    k = int(min(4 * k, max(2 * qd, rate * (seconds - spent) / 4)))
                fids = rng.choice(len(files), size=k, p=weight).astype(np.int32)
                room = (fsz[fids] - s) // 4096 + 1
                offs = (rng.integers(0, 1 << 62, size=k) % room) * 4096
                lens = np.full(k, s, dtype=np.int64)
                t0 = time.perf_counter()
                eng.submit(fids, offs.astype(np.int64), lens)
                while True:
                    got = eng.get(0, 256)
                    if not len(got):
                        break
                    eng.release(got[:, 1].copy())
                dt = time.perf_counter() - t0
                batches += 1
                if batches == 1:        # the first batch warms the ring and the device: not counted
                    rate = k / max(dt, 1e-6)
                    continue
                done += k
                spent += dt
                rate = done / max(spent, 1e-6)
                if spent >= seconds and batches >= 2:
                    break
            iops.append(done / max(spent, 1e-9))
        name, direct = getattr(eng, "name", str(engine)), bool(getattr(eng, "direct", True))
    finally:
        eng.close()
        pool.close()
    return Profile(sizes=sizes, iops=[float(x) for x in iops], queue_depth=qd, engine=name,
                   direct=direct, measured_at=time.time(),
                   seconds=time.perf_counter() - t_all, bytes_over=int(fsz.sum()))


def _scratch(folder, nbytes):
    """A file of `nbytes` random bytes in `folder`, written with O_DIRECT where the filesystem
    allows (so none of it sits in the page cache). The caller removes it."""
    fd, path = tempfile.mkstemp(dir=folder, prefix=".graphene-calibrate-")
    os.close(fd)
    chunk = 4 << 20
    buf = np.random.default_rng(7).integers(0, 256, chunk, dtype=np.uint8)
    try:
        try:
            f = os.open(path, os.O_WRONLY | getattr(os, "O_DIRECT", 0))
        except OSError:
            f = os.open(path, os.O_WRONLY)
        import mmap
        m = mmap.mmap(-1, chunk)
        m.write(buf.tobytes())
        try:
            left = nbytes
            while left > 0:
                os.write(f, m)
                left -= chunk
            os.fsync(f)
        finally:
            os.close(f)
            m.close()
    except BaseException:
        os.unlink(path)
        raise
    return path


def calibrate_folders(folders, files_of=None, seconds=None, engine="auto", queue_depth=None,
                      min_bytes=None, progress=None):
    """Measure every distinct device under `folders` (one profile per key) and store it.

    files_of: {folder: [paths]} of data already there (a dataset's partition files) to read; a device
    with less than min_bytes of it gets a scratch file of min_bytes, removed after.
    Returns [(key, folders, Profile)]. Folders whose device cannot be named are skipped."""
    seconds = SECONDS if seconds is None else seconds
    min_bytes = MIN_BYTES if min_bytes is None else max(int(min_bytes), max(SIZES))
    groups = {}
    for d in folders:
        k = profile_key(d)
        if k is not None:
            groups.setdefault(k, []).append(d)
    out = []
    for key, dirs in groups.items():
        files = [p for d in dirs for p in (files_of or {}).get(d, [])
                 if os.path.getsize(p) >= max(SIZES)]
        scratch = None
        if sum(os.path.getsize(p) for p in files) < min_bytes:
            if progress:
                progress(f"writing a {min_bytes >> 20} MiB scratch file in {dirs[0]}")
            scratch = _scratch(dirs[0], min_bytes)
            files = [scratch]
        try:
            if progress:
                progress(f"calibrating {key} ({', '.join(dirs)}) ...")
            prof = measure(files, queue_depth=queue_depth, engine=engine, seconds=seconds)
        finally:
            if scratch:
                os.unlink(scratch)
        prof.folders = [os.path.abspath(d) for d in dirs]
        save(key, prof)
        out.append((key, dirs, prof))
    return out


def missing(folders) -> list:
    """The folders (one per device key) whose device has no stored profile."""
    stored = load_all()
    seen, out = set(), []
    for d in folders:
        k = profile_key(d)
        if k is None or k in seen:
            continue
        seen.add(k)
        if Profile.from_dict(stored.get(k)) is None:
            out.append(d)
    return out


def dataset_files(g):
    """{folder: [adjacency and weight files of this version]} of an open dataset."""
    out = {}
    for direction in ("out", "in"):
        try:
            parts = g.parts(direction)
        except GrapheneError:        # no in-edge partitions
            continue
        for p in parts or []:
            if p.num_edges <= 0:
                continue
            folder = g.disks[p.disk]
            for path in (p.adj_path, getattr(p, "wgt_path", None) if g.weighted else None):
                if path and os.path.exists(path):
                    out.setdefault(folder, []).append(path)
    return out


def calibrate_dataset(g, only_missing=False, seconds=None, engine="auto", queue_depth=None,
                      say=None):
    """Measure the devices under dataset g's disks (only those with no profile when only_missing,
    and then only where the dataset holds calibrate.MIN_BYTES or more); returns what was measured."""
    files = dataset_files(g)
    folders = list(g.disks)
    if only_missing:
        # a device's bytes: over every folder of the dataset on it (two folders of one disk
        # with 40 MiB each put 80 MiB on it)
        on = {}
        for d in folders:
            on.setdefault(profile_key(d), []).append(d)
        want = {profile_key(d) for d in missing(folders)}
        folders = [d for k, ds in on.items() if k in want and
                   sum(os.path.getsize(p) for x in ds for p in files.get(x, [])) >= MIN_BYTES
                   for d in ds]
        if not folders:
            return []
    return calibrate_folders(folders, files, seconds=seconds, engine=engine,
                             queue_depth=queue_depth, progress=say)
