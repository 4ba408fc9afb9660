"""Dataset writer: temporary build folders on every disk, partition files with CRC32, manifest,
atomic commit, and recovery of interrupted runs.

A run builds `<disk>/.<name>.tmp-<pid>-<rand>/` on every disk. `commit()` writes the manifest copy
into each, fsyncs, then:
  1. moves an existing `<disk>/<name>/` (--force) aside to `<disk>/.<name>.old-<pid>-<rand>/` on every disk,
  2. renames every tmp folder to `<disk>/<name>/`,
  3. deletes the old folders.
A run killed in step 1 or 2 is repaired by the next run that touches the same disks (`recover()`):
if every disk has either the new dataset in place or its complete tmp folder (manifest written last,
so a tmp folder with a manifest is complete), the commit is rolled forward; otherwise the old folders
are moved back. Tmp folders without a manifest of dead pids are simply deleted.
"""
from __future__ import annotations

import datetime
import errno
import json
import os
import re
import shutil
import uuid as uuidlib
import zlib

import numpy as np

from ..errors import GrapheneError
from ..graph import FORMAT, FORMAT_VERSION, MANIFEST_NAME, dataset_dir

ALIGN = 512
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-(?P<rand>[0-9a-f]+)$")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def disk_full_error(disk: str, e: OSError) -> GrapheneError:
    return GrapheneError(f"disk full while writing to {disk} ({e.strerror}); nothing was written "
                         f"(free space or use other --disks)")


class PartFile:
    """One output file written sequentially, with a running CRC32 and zero padding to 512 bytes."""

    def __init__(self, path: str, disk: str, pad: bool = True):
        self.path, self.disk, self.pad = path, disk, pad
        self.f = open(path, "wb", buffering=0)
        self.crc = 0
        self.size = 0

    def write(self, arr) -> None:
        b = memoryview(np.ascontiguousarray(arr)).cast("B")
        if len(b) == 0:
            return
        self.crc = zlib.crc32(b, self.crc)
        n = 0
        try:
            while n < len(b):
                n += self.f.write(b[n:])
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None
        self.size += len(b)

    def close(self) -> str:
        if self.pad and self.size % ALIGN:
            self.write(np.zeros(ALIGN - self.size % ALIGN, dtype=np.uint8))
        try:
            os.fsync(self.f.fileno())
            self.f.close()
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None
        return f"{self.crc:08x}"

    def abort(self) -> None:
        try:
            self.f.close()
        except OSError:
            pass


def check_disks(disks) -> list:
    """Absolute disk folders; errors (before any work) for missing, non-folder or unwritable ones."""
    if not disks:
        raise GrapheneError("no --disks given (one or more folders to hold the dataset)")
    out = []
    for d in disks:
        a = os.path.abspath(d)
        if not os.path.exists(a):
            raise GrapheneError(f"disk folder {d} does not exist (create it or mount the disk)")
        if not os.path.isdir(a):
            raise GrapheneError(f"disk {d} is not a folder")
        if not os.access(a, os.W_OK | os.X_OK):
            raise GrapheneError(f"disk folder {d} is not writable")
        if a in out:
            raise GrapheneError(f"disk folder {d} given twice")
        out.append(a)
    return out


def check_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or name.startswith(".") or "\0" in name:
        raise GrapheneError(f"bad dataset name {name!r} (a plain folder name, not starting with '.')")
    return name


def recover(disks: list, name: str) -> None:
    """Repair what dead runs left on these disks: delete stale tmp folders, finish or undo an
    interrupted commit of `name` (see module docstring)."""
    stale = {}   # (name, pid, rand) -> {disk: {kind: path}}
    for d in disks:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for e in entries:
            m = _TMP_RE.match(e)
            if not m or _pid_alive(int(m["pid"])):
                continue
            key = (m["name"], m["pid"], m["rand"])
            stale.setdefault(key, {}).setdefault(d, {})[m["kind"]] = os.path.join(d, e)
    for (nm, pid, rand), per_disk in stale.items():
        has_old = any("old" in k for k in per_disk.values())
        if has_old:
            # An interrupted commit: roll forward if the new dataset is complete on every disk.
            new_uuid = None
            for k in per_disk.values():
                if "tmp" in k:
                    man = _read_json(os.path.join(k["tmp"], MANIFEST_NAME))
                    if man:
                        new_uuid = man.get("uuid")
            forward = new_uuid is not None
            if forward:
                for d in disks:
                    k = per_disk.get(d, {})
                    live = _read_json(os.path.join(dataset_dir(d, nm), MANIFEST_NAME))
                    tmpm = _read_json(os.path.join(k["tmp"], MANIFEST_NAME)) if "tmp" in k else None
                    if not ((live and live.get("uuid") == new_uuid) or
                            (tmpm and tmpm.get("uuid") == new_uuid)):
                        forward = False
            for d, k in per_disk.items():
                live = dataset_dir(d, nm)
                if forward:
                    if "tmp" in k:
                        if os.path.exists(live):
                            _move_aside_and_delete(live)
                        os.rename(k["tmp"], live)
                    if "old" in k:
                        shutil.rmtree(k["old"], ignore_errors=True)
                else:
                    if "old" in k:
                        if os.path.exists(live):
                            _move_aside_and_delete(live)
                        os.rename(k["old"], live)
                    if "tmp" in k:
                        shutil.rmtree(k["tmp"], ignore_errors=True)
                _fsync_dir(d)
        else:
            for k in per_disk.values():
                shutil.rmtree(k["tmp"], ignore_errors=True)


def _move_aside_and_delete(path: str) -> None:
    aside = path + f".del-{os.getpid()}"
    os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)


class DatasetWriter:
    """Builds one dataset in tmp folders on every disk; `commit(manifest)` publishes it atomically.
    Use as a context manager: leaving without commit (error, KeyboardInterrupt) deletes the tmp folders."""

    def __init__(self, disks, name: str, force: bool = False):
        self.disks = check_disks(disks)
        self.name = check_name(name)
        self.force = force
        recover(self.disks, self.name)
        for d in self.disks:
            live = dataset_dir(d, self.name)
            if os.path.exists(live) and not force:
                raise GrapheneError(f"dataset {self.name!r} already exists at {live} "
                                    f"(use --force to replace it)")
        self.rand = uuidlib.uuid4().hex[:8]
        self.tmp = []
        self.uuid = str(uuidlib.uuid4())
        self.committed = False
        self.open_files = []
        try:
            for d in self.disks:
                t = os.path.join(d, f".{self.name}.tmp-{os.getpid()}-{self.rand}")
                os.mkdir(t)
                self.tmp.append(t)
        except OSError as e:
            self.abort()
            if e.errno == errno.ENOSPC:
                raise disk_full_error(d, e) from None
            raise GrapheneError(f"cannot create a build folder on {d}: {e.strerror}") from None

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if not self.committed:
            self.abort()
        if isinstance(ev, OSError) and ev.errno == errno.ENOSPC:
            disk = next((d for d in self.disks if getattr(ev, "filename", None) and
                         str(ev.filename).startswith(d)), None)
            raise disk_full_error(disk or ", ".join(self.disks), ev) from None
        return False

    def spill_dir(self, i: int) -> str:
        """A scratch folder inside disk i's tmp folder (for external-sort runs); deleted at commit."""
        p = os.path.join(self.tmp[i], ".spill")
        os.makedirs(p, exist_ok=True)
        return p

    def open(self, disk: int, fname: str, pad: bool = True) -> PartFile:
        pf = PartFile(os.path.join(self.tmp[disk], fname), self.disks[disk], pad)
        self.open_files.append(pf)
        return pf

    def save_npy(self, disk: int, fname: str, arr: np.ndarray) -> None:
        path = os.path.join(self.tmp[disk], fname)
        with open(path, "wb") as f:
            np.save(f, arr)
            f.flush()
            os.fsync(f.fileno())

    def commit(self, manifest: dict) -> str:
        """Write the manifest copies, fsync, rename into place (see module docstring). Returns the
        dataset folder on disk 0."""
        manifest = dict(manifest)
        manifest.update(format=FORMAT, version=FORMAT_VERSION, uuid=self.uuid, name=self.name,
                        disks=self.disks,
                        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        text = json.dumps(manifest, indent=1)
        for i, t in enumerate(self.tmp):
            shutil.rmtree(os.path.join(t, ".spill"), ignore_errors=True)
            p = os.path.join(t, MANIFEST_NAME)
            try:
                with open(p, "w") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise disk_full_error(self.disks[i], e) from None
                raise
            _fsync_dir(t)
        olds = []
        for d in self.disks:
            live = dataset_dir(d, self.name)
            if os.path.lexists(live):
                old = os.path.join(d, f".{self.name}.old-{os.getpid()}-{self.rand}")
                os.rename(live, old)
                olds.append(old)
                _fsync_dir(d)
        for d, t in zip(self.disks, self.tmp):
            os.rename(t, dataset_dir(d, self.name))
            _fsync_dir(d)
        self.committed = True
        for o in olds:
            shutil.rmtree(o, ignore_errors=True)
        return dataset_dir(self.disks[0], self.name)

    def abort(self) -> None:
        for pf in self.open_files:
            pf.abort()
        for t in self.tmp:
            shutil.rmtree(t, ignore_errors=True)
        self.tmp = []
