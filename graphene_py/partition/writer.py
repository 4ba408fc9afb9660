"""Dataset writer: one new version folder per disk, partition files with CRC32 and per-page CRC32C
tables, a checksummed manifest, and the atomic commit of graphene_py/store.py.

`DatasetWriter(disks, name)` first recovers what earlier runs left on these disks (store.recover_
target), then creates `<disk>/<name>/vNNNNNN-RAND/` on every disk, each held under an exclusive
flock while it is written. `commit(manifest)` writes the manifest copies, fsyncs, and replaces the
home disk's CURRENT pointer: the one atomic commit point. Then the other disks' pointers are
updated, the registry entry set, and superseded versions deleted. Anything that fails or is killed
before the commit point leaves the previous dataset current and untouched; anything after it leaves
the new one current. Leaving the context without commit deletes the new folders.
"""
from __future__ import annotations

import datetime
import errno
import json
import os
import shutil
import sys
import uuid as uuidlib
import zlib

import numpy as np

from .. import registry, store
from ..errors import GrapheneError
from ..graph import FORMAT, FORMAT_VERSION, MANIFEST_NAME, dataset_dir
from .direct import DirectAppender

ALIGN = 512
#: Bytes covered by one CRC32C of a data file's page table (`<file>.pcrc`).
PAGE = 4096


def _fault(point: str) -> None:
    """Test hook: GRAPHENE_FAULT_COMMIT=<point> kills this process (SIGKILL) at that point of the
    commit, so tests can aim kills at every step of the commit window."""
    if os.environ.get("GRAPHENE_FAULT_COMMIT") == point:
        import signal
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def disk_full_error(disk: str, e: OSError) -> GrapheneError:
    return GrapheneError(f"disk full while writing to {disk} ({e.strerror}); nothing was written "
                         f"(free space or use other --disks)")


class PartFile:
    """One output file written sequentially, with a running CRC32, zero padding to 512 bytes and
    (pages=True) a CRC32C per PAGE bytes, saved beside it as `<file>.pcrc` at close."""

    def __init__(self, path: str, disk: str, pad: bool = True, pages: bool = False,
                 durable: bool = True):
        self.path, self.disk, self.pad, self.durable = path, disk, pad, durable
        self.f = DirectAppender(path)     # whole pages O_DIRECT: no page-cache copy
        self.crc = 0
        self.size = 0
        self.pages = [] if pages else None
        self._pcrc = 0          # running CRC32C of the current (incomplete) page
        self.page_table = None  # (file name, crc32 of the table) after close

    def _page_sums(self, b: memoryview) -> None:
        from .. import _uring
        fill = self.size % PAGE
        i = 0
        if fill:
            k = min(len(b), PAGE - fill)
            self._pcrc = _uring.crc32c(b[:k], self._pcrc)
            i = k
            if fill + k == PAGE:
                self.pages.append(np.frombuffer(self._pcrc.to_bytes(4, "little"), "<u4"))
                self._pcrc = 0
        whole = (len(b) - i) // PAGE * PAGE
        if whole:
            self.pages.append(np.frombuffer(_uring.page_crcs(b[i:i + whole], PAGE), "<u4"))
            i += whole
        if i < len(b):
            self._pcrc = _uring.crc32c(b[i:], 0)

    def write(self, arr) -> None:
        b = memoryview(np.ascontiguousarray(arr)).cast("B")
        if len(b) == 0:
            return
        self.crc = zlib.crc32(b, self.crc)
        if self.pages is not None:
            self._page_sums(b)
        try:
            self.f.write(b)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None
        self.size += len(b)

    def close(self) -> str:
        if self.pad and self.size % ALIGN:
            self.write(np.zeros(ALIGN - self.size % ALIGN, dtype=np.uint8))
        try:
            self.f.close(fsync=self.durable)
            if self.pages is not None:
                if self.size % PAGE:
                    self.pages.append(np.frombuffer(self._pcrc.to_bytes(4, "little"), "<u4"))
                table = (np.concatenate(self.pages) if self.pages else np.zeros(0, "<u4")).astype("<u4")
                tpath = self.path + ".pcrc"
                with open(tpath, "wb") as f:
                    f.write(table.tobytes())
                    f.flush()
                    if self.durable:
                        os.fsync(f.fileno())
                self.page_table = (os.path.basename(tpath), f"{zlib.crc32(table.tobytes()):08x}")
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.path) from None
        return f"{self.crc:08x}"

    def page_entry(self) -> dict:
        """Manifest entry of the page table: file, its CRC32, page size, page count."""
        name, crc = self.page_table
        return {"file": name, "crc": crc, "page": PAGE, "count": (self.size + PAGE - 1) // PAGE}

    def abort(self) -> None:
        try:
            self.f.abort()
        except OSError:
            pass


def check_disks(disks) -> list:
    """Absolute disk folders; errors (before any work) for missing, non-folder or unwritable ones."""
    if isinstance(disks, (str, bytes, os.PathLike)):
        disks = [disks]                 # one folder given as itself, not as a list of one
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


def recover(disks: list, name: str) -> list:
    """Repair what dead runs left for `name` on these disks (store.recover_target on each)."""
    done = []
    for d in disks:
        done += store.recover_target(d, name)
    return done


def _registered_elsewhere(name: str, home: str):
    """The registered dataset `name` when it lives in another home container than `home`."""
    path = registry.lookup(name)
    if not path:
        return None
    try:
        if os.path.abspath(store.container_of(path)) == os.path.abspath(home):
            return None
    except OSError:
        return None
    return path


class DatasetWriter:
    """Builds one dataset version on every disk; `commit(manifest)` publishes it atomically.
    Use as a context manager: leaving without commit (error, KeyboardInterrupt) deletes the new
    version folders. register=True points the registry name at it right after the commit point."""

    def __init__(self, disks, name: str, force: bool = False, register: bool = True,
                 durable: bool = True):
        self.durable = durable          # False: scratch datasets (no fsync; a crash may lose them)
        self.disks = check_disks(disks)
        self.name = check_name(name)
        self.force = force
        self.register = register
        self.containers = [dataset_dir(d, self.name) for d in self.disks]
        self.home = self.containers[0]
        self._check_foreign()           # before recovery writes anything there (its lock)
        if register:
            registry.load()             # a damaged registry is refused before anything is written
        self.recovered = recover(self.disks, self.name)
        self._check_free()
        self.uuid = str(uuidlib.uuid4())
        self.version = f"v{self._next_gen():06d}-{uuidlib.uuid4().hex[:8]}"
        self.tmp = []          # this version's folder on every disk
        self.made = []         # containers this run created (removed again on abort if empty)
        self.locks = []
        self.committed = False
        self.open_files = []
        d = None
        try:
            for d, c in zip(self.disks, self.containers):
                if not os.path.isdir(c):
                    os.mkdir(c)
                    self.made.append(c)
                v = os.path.join(c, self.version)
                os.mkdir(v)
                self.tmp.append(v)
                self.locks.append(store.lock(v, exclusive=True, block=True))
        except OSError as e:
            self.abort()
            if e.errno == errno.ENOSPC:
                raise disk_full_error(d, e) from None
            raise GrapheneError(f"cannot create a build folder on {d}: {e.strerror}") from None

    def _check_foreign(self) -> None:
        """A folder of the dataset's name holding files no dataset wrote is refused, even with
        force: a dataset there would share it with them (and `graphene rm` leaves them)."""
        for c in self.containers:
            other = store.foreign_entries(c)
            if other:
                shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3
                                                 else "")
                raise GrapheneError(f"{c} exists and holds files that are not a graphene "
                                    f"dataset's ({shown}); choose another --name or disk folder "
                                    f"(--force replaces only a dataset)")

    def _check_free(self) -> None:
        """The name is free on these disks and in the registry, or force is given."""
        if self.force:
            return
        for c in self.containers:
            if store.exists(c):
                raise GrapheneError(f"dataset {self.name!r} already exists at {c} "
                                    f"(use --force to replace it)")
        if self.register:
            other = _registered_elsewhere(self.name, self.home)
            if other:
                raise GrapheneError(f"the name {self.name!r} belongs to the dataset at {other}; "
                                    f"--force replaces that dataset with this one (or choose "
                                    f"another --name)")

    def _next_gen(self) -> int:
        gen = 0
        for c in self.containers:
            for e in store._listdir(c):
                m = store.VERSION_RE.match(e)
                if m:
                    gen = max(gen, int(m["gen"]))
            cur = store.read_current(c)
            if cur:
                gen = max(gen, int(store.VERSION_RE.match(cur["version"])["gen"]))
        return gen + 1

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
        """A scratch folder inside disk i's new version folder (external-sort runs); deleted
        before the commit."""
        p = os.path.join(self.tmp[i], ".spill")
        os.makedirs(p, exist_ok=True)
        return p

    def open(self, disk: int, fname: str, pad: bool = True, pages: bool = False) -> PartFile:
        pf = PartFile(os.path.join(self.tmp[disk], fname), self.disks[disk], pad, pages,
                      self.durable)
        self.open_files.append(pf)
        return pf

    def mirror(self, disk: int, fname: str, new_name: str) -> None:
        """Disk `disk`'s written file `fname` again under `new_name` in the same version folder: a
        hard link (no bytes written), or a copy where the file system has none."""
        src = os.path.join(self.tmp[disk], fname)
        dst = os.path.join(self.tmp[disk], new_name)
        try:
            os.link(src, dst)
        except OSError:
            try:
                shutil.copyfile(src, dst)
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise disk_full_error(self.disks[disk], e) from None
                raise

    def save_npy(self, disk: int, fname: str, arr: np.ndarray) -> str:
        """Save an array; returns its CRC32 (recorded in the manifest)."""
        path = os.path.join(self.tmp[disk], fname)
        with open(path, "wb") as f:
            np.save(f, arr)
            f.flush()
            if self.durable:
                os.fsync(f.fileno())
        from ..graph import crc32_file
        return crc32_file(path)

    def commit(self, manifest: dict) -> str:
        """Write the manifest copies, fsync, switch the home pointer (see module docstring).
        Returns the home container (what the registry records and users open)."""
        manifest = dict(manifest)
        manifest.update(format=FORMAT, version=FORMAT_VERSION, uuid=self.uuid, name=self.name,
                        disks=self.disks,
                        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        manifest = store.seal(manifest)
        text = json.dumps(manifest, indent=1)
        for i, t in enumerate(self.tmp):
            shutil.rmtree(os.path.join(t, ".spill"), ignore_errors=True)
            try:
                with open(os.path.join(t, MANIFEST_NAME), "w") as f:
                    f.write(text)
                    f.flush()
                    if self.durable:
                        os.fsync(f.fileno())
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise disk_full_error(self.disks[i], e) from None
                raise
            if self.durable:
                store.fsync_dir(t)
                store.fsync_dir(self.containers[i])
        _fault("manifests-written")
        pointer = json.dumps({"version": self.version, "uuid": self.uuid,
                              "manifest_crc": manifest["manifest_crc"]})
        lk = store.commit_lock(self.home, block=True)
        try:
            if not self.force:
                self._check_free()          # a concurrent run may have taken the name meanwhile
            replaced = _registered_elsewhere(self.name, self.home) if self.register else None
            _fault("before-pointer")
            try:
                store.write_atomic(os.path.join(self.home, store.CURRENT), pointer, self.durable)
            except OSError as e:
                raise GrapheneError(f"cannot commit {self.name} on {self.disks[0]}: {e.strerror}; "
                                    f"nothing was changed") from None
            self.committed = True             # ---- the commit point ----
            _fault("after-pointer")
            self.after_commit = []
            for i, c in enumerate(self.containers[1:], 1):
                try:
                    store.write_atomic(os.path.join(c, store.CURRENT), pointer, self.durable)
                except OSError as e:
                    self.after_commit.append(f"could not update {c}/{store.CURRENT} ({e.strerror}); "
                                             f"the next open repairs it")
                if i == 1:
                    _fault("hints-partly")
            if self.register:
                registry.register(self.name, self.home)
            _fault("registered")
        finally:
            store.unlock([lk] if lk is not None else [])
        store.unlock(self.locks)
        self.locks = []
        # superseded versions, format-1 leftovers, and a replaced dataset in another place
        cur = store.read_current(self.home) or json.loads(pointer)
        if cur.get("version") == self.version:
            self.after_commit += store.recover_containers(self.home, self.name, self.disks, cur)
        if replaced:
            self._retire(replaced)
        for note in self.after_commit:       # (a replaced dataset's files deleted: say so)
            print(f"note: {note}", file=sys.stderr)
        return self.home

    def _retire(self, path: str) -> None:
        """Delete the dataset this name pointed at before (force onto other disks)."""
        try:
            o = store.open_dataset(path, recover_files=False)
        except (GrapheneError, OSError):
            return
        if os.path.abspath(o.home) == os.path.abspath(self.home):
            store.unlock(o.locks)
            return
        mine = {os.path.abspath(c) for c in self.containers}
        try:
            if any(os.path.abspath(dataset_dir(d, o.manifest["name"])) in mine
                   for d in o.manifest.get("disks", [])):
                # it shares disks with the new version: drop its pointer, leave our containers
                store.unlock(o.locks)
                o.locks = []
                if o.version is not None:
                    os.unlink(os.path.join(o.home, store.CURRENT))
                for d in o.manifest.get("disks", []):
                    c = dataset_dir(d, o.manifest["name"])
                    if os.path.abspath(c) in mine:
                        store._collect_garbage(c, self.version, self.after_commit)
                    else:
                        store._remove_tree(c)
            else:
                store.remove_dataset(o)
            self.after_commit.append(f"removed the dataset {self.name!r} replaced at {path}")
        except (GrapheneError, OSError) as e:
            self.after_commit.append(f"could not remove the replaced dataset at {path} ({e})")

    def abort(self) -> None:
        for pf in self.open_files:
            pf.abort()
        store.unlock(self.locks)
        self.locks = []
        for t in self.tmp:
            shutil.rmtree(t, ignore_errors=True)
        for c in self.made:
            try:
                os.rmdir(c)
            except OSError:
                pass
        self.tmp = []
        self.made = []
