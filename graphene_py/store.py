"""Versioned dataset folders with one atomic commit point, and recovery from whatever a crash left.

A dataset NAME on disks D0..Dk-1 (format 2) is a *container* folder `Di/NAME/` on every disk:

    Di/NAME/CURRENT              {"version": "v000003-1a2b3c4d", "uuid": ..., "manifest_crc": ...}
    Di/NAME/v000003-1a2b3c4d/    one version: manifest.json + the partition files on this disk
    D0/NAME/.lock                commit lock (flock)
    D0/NAME/recovery.log         what recovery did, one line each

The *home* disk is the manifest's first disk. Its CURRENT is the one authority: a version exists
once the home CURRENT names it, and not before. Committing a new version is:

  1. build the version folder on every disk (each held under an exclusive flock while it is being
     written), write and fsync every file and a checksummed manifest copy into each;
  2. replace the home CURRENT (write a temporary file, fsync, rename, fsync the folder): the single
     atomic commit point;
  3. copy the pointer to the other disks' CURRENT (hints, so a dataset opened through any disk's
     folder finds its version fast) and delete superseded versions.

A crash before step 2 leaves the old version current and the new one an unlocked, unreferenced
folder; a crash after it leaves the new version current and stale hints or old folders. Either way
the next open or partition rolls the hints forward and deletes what nothing references
(`recover`), appending what it did to recovery.log (`graphene info` shows it).

Readers hold a shared flock on the version folders they use, so a concurrent commit never deletes
files under a running job; writers hold an exclusive one while building, so recovery never deletes
a build in progress (flocks die with their process: no pid files to go stale).

Format-1 datasets (files and manifest.json directly in `Di/NAME/`, no CURRENT) are still read.
"""
from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import re
import shutil
import zlib
from typing import Optional

from .errors import DatasetError

#: Manifest "format" and the newest "version" this code reads (1: flat folders; 2: versioned).
FORMAT = "graphene_py"
FORMAT_VERSION = 2
CURRENT = "CURRENT"
MANIFEST_NAME = "manifest.json"
LOCK_NAME = ".lock"
LOG_NAME = "recovery.log"
VERSION_RE = re.compile(r"^v(?P<gen>\d{6,})-(?P<rand>[0-9a-f]{8})$")
#: Legacy (format 1) build folders beside the dataset: `.NAME.tmp-PID-RAND`, `.NAME.old-PID-RAND`.
LEGACY_TMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-(?P<rand>[0-9a-f]+)$")
_KEEP = {CURRENT, LOCK_NAME, LOG_NAME}
#: how recovery.log names a version a later partition (--force) replaced (cli info: routine)
REPLACED = "the replaced previous version"


def dataset_dir(disk: str, name: str) -> str:
    """The container folder of dataset `name` on `disk`."""
    return os.path.join(os.path.abspath(disk), name)


# -- small durable-file helpers ---------------------------------------------------------------------
def fsync_dir(path: str) -> None:
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


def write_atomic(path: str, text: str, durable: bool = True) -> None:
    """Replace `path` with `text` atomically and (durable) durably: temp file, fsync, rename,
    fsync of the folder."""
    d = os.path.dirname(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        fsync_dir(d)


def read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            v = json.load(f)
        return v if isinstance(v, dict) else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def manifest_crc(manifest: dict) -> str:
    """CRC32 of the manifest's canonical JSON, without its own `manifest_crc` field."""
    body = {k: v for k, v in manifest.items() if k != "manifest_crc"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(text.encode()):08x}"


def seal(manifest: dict) -> dict:
    m = dict(manifest)
    m["manifest_crc"] = manifest_crc(m)
    return m


def read_current(container: str) -> Optional[dict]:
    cur = read_json(os.path.join(container, CURRENT))
    if cur is None or not VERSION_RE.match(str(cur.get("version", ""))):
        return None
    return cur


# -- locks --------------------------------------------------------------------------------------
def lock(path: str, exclusive: bool, block: bool = False) -> Optional[int]:
    """flock a folder or file: returns the fd holding the lock, or None when someone else holds a
    conflicting one (block=False). Raises OSError when the path cannot be opened."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    fd = os.open(path, flags)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        raise
    return fd


def unlock(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def commit_lock(container: str, block: bool = True) -> Optional[int]:
    """The container's commit lock (a `.lock` file; created if missing)."""
    p = os.path.join(container, LOCK_NAME)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        return None
    return fd


# -- finding a dataset --------------------------------------------------------------------------
def container_of(path: str) -> str:
    """A dataset path as users give it (container, version folder, or a manifest file in either)
    -> the container folder."""
    p = os.path.abspath(path)
    if p.endswith(".json") and os.path.basename(p) == MANIFEST_NAME:
        p = os.path.dirname(p)
    if VERSION_RE.match(os.path.basename(p)) and not os.path.exists(os.path.join(p, CURRENT)):
        parent = os.path.dirname(p)
        if os.path.exists(os.path.join(parent, CURRENT)) or not os.path.exists(
                os.path.join(parent, MANIFEST_NAME)):
            return parent
    return p


def _ours(entry: str) -> bool:
    """Whether a name inside a (format 2) container is one this module writes: the pointer and
    its temporaries, the lock, the recovery log, version folders, half-deleted folders."""
    return (entry in _KEEP or entry.startswith(CURRENT + ".tmp-") or entry.startswith(".del-")
            or VERSION_RE.match(entry) is not None)


def foreign_entries(container: str) -> list:
    """The names inside `container` that no dataset wrote (a folder of the user's that happens to
    bear the dataset's name), sorted; [] for a missing folder, an empty one, or a format-1 dataset
    (its files lie in the container itself)."""
    if not os.path.isdir(container) or os.path.exists(os.path.join(container, MANIFEST_NAME)):
        return []
    return [e for e in _listdir(container) if not _ours(e)]


def exists(container: str) -> bool:
    """Whether a committed dataset (format 1 or 2) lives in this container."""
    return (read_current(container) is not None or
            os.path.exists(os.path.join(container, MANIFEST_NAME)))


def _load_manifest(path: str) -> dict:
    try:
        with open(path) as f:
            m = json.load(f)
    except FileNotFoundError:
        raise DatasetError(f"no dataset at {os.path.dirname(path) or path} ({MANIFEST_NAME} not found)")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: corrupt manifest ({e})")
    if not isinstance(m, dict):
        raise DatasetError(f"{path}: corrupt manifest (not a JSON object)")
    return m


def check_manifest(m: dict, path: str) -> None:
    fmt, version = FORMAT, FORMAT_VERSION
    if m.get("format") != fmt:
        raise DatasetError(f"{path}: not a graphene_py manifest")
    try:
        v = int(m.get("version", -1))
    except (TypeError, ValueError):
        raise DatasetError(f"{path}: corrupt manifest (version {m.get('version')!r})")
    if v > version:
        raise DatasetError(f"{path}: format version {v} is newer than this graphene_py "
                           f"understands ({version}); upgrade graphene_py")
    if "manifest_crc" in m and m["manifest_crc"] != manifest_crc(m):
        raise DatasetError(f"{path}: manifest checksum mismatch (the file was edited or damaged: "
                           f"{m['manifest_crc']} recorded, {manifest_crc(m)} computed)")


class Opened:
    """What `open_dataset` found: the manifest, the folder holding each disk's files, the home
    container, the locks held and what recovery did."""

    def __init__(self, manifest, dirs, home, version, locks, recovered):
        self.manifest, self.dirs, self.home, self.version = manifest, dirs, home, version
        self.locks, self.recovered = locks, recovered


def open_dataset(path: str, recover_files: bool = True) -> Opened:
    """Find the current version of the dataset at `path` (any disk's container, a version folder or
    a manifest), recover what crashes left on its disks, check every disk's manifest copy, and take
    shared locks on the version folders. Retries when a concurrent commit replaces the version
    between reading the pointer and locking it."""
    container = container_of(path)
    last_err = None
    for _ in range(5):
        try:
            return _open_once(container, recover_files)
        except _Retry as e:
            last_err = e
            container = e.container or container
    raise DatasetError(f"{container}: the dataset kept changing while it was being opened "
                       f"({last_err})")


class _Retry(Exception):
    def __init__(self, msg, container=None):
        super().__init__(msg)
        self.container = container


def _open_once(container: str, recover_files) -> Opened:
    cur = read_current(container)
    if cur is None:
        if os.path.exists(os.path.join(container, CURRENT)):
            raise DatasetError(f"{os.path.join(container, CURRENT)}: damaged version pointer")
        mpath = os.path.join(container, MANIFEST_NAME)
        if not os.path.exists(mpath):
            hint = ""
            versions = [e for e in _listdir(container) if VERSION_RE.match(e)] \
                if os.path.isdir(container) else []
            for v in versions:
                m = read_json(os.path.join(container, v, MANIFEST_NAME))
                other = _named_by_a_hint(m, v) if isinstance(m, dict) else None
                if other:
                    raise DatasetError(
                        f"{container}: its version pointer {CURRENT} is missing, while "
                        f"{os.path.join(other, CURRENT)} names version {v} of this dataset "
                        f"(the pointer deleted, or a `graphene rm` cut short); nothing was "
                        f"deleted. Copy {os.path.join(other, CURRENT)} to {container}/ to "
                        f"restore it, or `graphene partition ... --force` to replace it")
            if versions:
                hint = " (only unfinished builds here: an interrupted partition run; nothing was committed)"
                if recover_files:
                    _collect_garbage(container, None, [])
            raise DatasetError(f"no dataset at {container} ({MANIFEST_NAME} not found){hint}")
        m = _load_manifest(mpath)
        check_manifest(m, mpath)
        name = m.get("name")
        dirs = [dataset_dir(d, name) for d in m.get("disks", [])]
        return Opened(m, dirs, dirs[0] if dirs else container, None, [], [])
    version = cur["version"]
    mpath = os.path.join(container, version, MANIFEST_NAME)
    if not os.path.exists(mpath):
        again = read_current(container)
        if again is not None and again.get("version") == version:
            what = "manifest" if os.path.isdir(os.path.dirname(mpath)) else "version folder"
            raise DatasetError(f"{mpath} is missing: {container}/{CURRENT} names version "
                               f"{version}, whose {what} is gone (deleted or damaged)")
        raise _Retry(f"{mpath} vanished")
    m = _load_manifest(mpath)
    check_manifest(m, mpath)
    name, disks = m.get("name"), list(m.get("disks") or [])
    if not name or not disks:
        raise DatasetError(f"{mpath}: corrupt manifest (no name or disks)")
    home = dataset_dir(disks[0], name)
    if os.path.abspath(home) != os.path.abspath(container):
        hc = read_current(home)
        if hc is None:
            raise DatasetError(f"{name}: the home disk folder {home} has no version pointer "
                               f"(disk {disks[0]} missing or not mounted?)")
        if hc["version"] != version:
            raise _Retry("stale pointer", container=home)
        container = home
        cur = hc
    recovered = []
    locks = []
    dirs = []
    try:
        for d in disks:
            c = dataset_dir(d, name)
            vdir = os.path.join(c, version)
            if not os.path.isdir(vdir):
                if not os.path.isdir(c) or not os.path.isdir(d):
                    raise DatasetError(f"{name}: disk folder {c} is missing (disk missing or not "
                                       f"mounted?)")
                raise DatasetError(f"{name}: {c} does not hold version {version} of the dataset "
                                   f"(files deleted?)")
            try:
                fd = lock(vdir, exclusive=False)
            except OSError as e:
                raise DatasetError(f"{name}: cannot open {vdir}: {e.strerror}")
            if fd is None:
                raise DatasetError(f"{name}: version {version} on {d} is locked by a writer")
            locks.append(fd)
            dirs.append(vdir)
            other = os.path.join(vdir, MANIFEST_NAME)
            mo = m if other == mpath else read_json(other)
            if mo is None:
                raise DatasetError(f"{name}: disk folder {vdir} is missing its manifest "
                                   f"(disk damaged?)")
            if mo is not m:
                if not isinstance(mo, dict):
                    raise DatasetError(f"{other}: corrupt manifest (not a JSON object)")
                check_manifest(mo, other)        # its own seal: an edit or damage shows
            if mo.get("uuid") != m.get("uuid"):
                raise DatasetError(f"{name}: manifest on {d} belongs to another dataset "
                                   f"(uuid {mo.get('uuid')} != {m.get('uuid')}): disks swapped?")
            if mo is not m and mo != m:
                raise DatasetError(f"{name}: the manifest on {d} ({other}) differs from the "
                                   f"home disk's ({mpath}): damaged or edited")
        if cur.get("uuid") not in (None, m.get("uuid")):
            raise DatasetError(f"{name}: version pointer {home}/{CURRENT} names dataset "
                               f"{cur.get('uuid')}, its manifest says {m.get('uuid')}")
        if recover_files:
            recovered = recover_containers(home, name, disks, cur)
    except BaseException:
        unlock(locks)
        raise
    return Opened(m, dirs, home, version, locks, recovered)


def _listdir(path: str) -> list:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


# -- recovery -------------------------------------------------------------------------------------
def _is_live(vdir: str) -> bool:
    """A version folder is live when the home container its manifest names points at it. Unknown
    (home unreadable) counts as live: never delete what might be in use."""
    m = read_json(os.path.join(vdir, MANIFEST_NAME))
    if m is None:
        return False
    try:
        home = dataset_dir(m["disks"][0], m["name"])
    except (KeyError, IndexError, TypeError):
        return False
    if not os.path.isdir(home):
        return not os.path.isdir(os.path.dirname(home))   # home disk missing: unknown, keep
    cur = read_current(home)
    if cur is None:
        if os.path.exists(os.path.join(home, CURRENT)):
            return True                                     # damaged pointer: keep everything
        # no home pointer: committed all the same if another disk's pointer names it (the home
        # pointer lost, or a removal cut short): kept, never deleted by a command that reads
        return _named_by_a_hint(m, os.path.basename(vdir)) is not None
    return cur["version"] == os.path.basename(vdir)


def _named_by_a_hint(m: dict, version: str) -> Optional[str]:
    """The container, other than the home one, whose CURRENT names `version` of the dataset of
    manifest m, or None."""
    try:
        name, disks = m["name"], list(m["disks"])
    except (KeyError, TypeError):
        return None
    for d in disks[1:]:
        c = dataset_dir(d, name)
        cur = read_current(c)
        if cur is not None and cur.get("version") == version:
            return c
    return None


def _remove_tree(path: str) -> bool:
    """Delete a folder: rename it to a hidden name first so a crash midway leaves nothing that
    looks like a version. Returns False when it could not be removed (read-only disk...)."""
    parent, base = os.path.split(path)
    doomed = os.path.join(parent, f".del-{base}-{os.getpid()}")
    try:
        os.rename(path, doomed)
    except OSError:
        return False
    shutil.rmtree(doomed, ignore_errors=True)
    return True


def _collect_garbage(container: str, keep: Optional[str], actions: list) -> None:
    """Delete version folders of `container` that are neither `keep` nor locked nor live, stale
    pointer temporaries, and half-deleted folders."""
    for e in _listdir(container):
        p = os.path.join(container, e)
        if e.startswith(".del-"):
            shutil.rmtree(p, ignore_errors=True)
            continue
        if e.startswith(CURRENT + ".tmp-"):
            try:
                os.unlink(p)
            except OSError:
                pass
            continue
        if not VERSION_RE.match(e) or e == keep or not os.path.isdir(p):
            continue
        try:
            fd = lock(p, exclusive=True)
        except OSError:
            continue
        if fd is None:          # a writer building it, or a reader using it
            continue
        try:
            has_manifest = os.path.exists(os.path.join(p, MANIFEST_NAME))
            if _is_live(p):
                continue
            newer = keep is not None and VERSION_RE.match(keep) and (
                int(VERSION_RE.match(e)["gen"]) > int(VERSION_RE.match(keep)["gen"]))
            if _remove_tree(p):
                if not has_manifest:
                    what = "an unfinished build left by an interrupted partition run"
                elif newer or keep is None:
                    what = "a complete build that was never committed: its run was interrupted"
                else:
                    what = REPLACED
                actions.append(f"removed {p} ({what})")
        finally:
            unlock([fd])


def recover_containers(home: str, name: str, disks: list, cur: dict) -> list:
    """On every disk of the committed version `cur`: point CURRENT at it (roll forward), delete
    versions nothing references and format-1 leftovers. Returns what was done (also logged)."""
    actions = []
    lk = commit_lock(home, block=False)
    if lk is None:
        return actions        # a commit is running (or a read-only disk): leave it alone
    try:
        version = cur["version"]
        for d in disks:
            c = dataset_dir(d, name)
            here = read_current(c)
            if os.path.abspath(c) != os.path.abspath(home) and (here is None or
                                                                here.get("version") != version):
                try:
                    write_atomic(os.path.join(c, CURRENT), json.dumps(cur))
                    actions.append(f"pointed {c}/{CURRENT} at committed version {version} "
                                   f"(a commit was interrupted after its commit point)")
                except OSError:
                    pass
            _collect_garbage(c, version, actions)
            # format-1 files beside the versions (a format-1 dataset replaced by a version)
            for e in _listdir(c):
                if e in _KEEP or VERSION_RE.match(e) or e.startswith("."):
                    continue
                p = os.path.join(c, e)
                if os.path.isfile(p) and (e == MANIFEST_NAME or re.match(r"^(out|in)_r\d+_c\d+\.", e)
                                          or e == "relabel.npy"):
                    try:
                        os.unlink(p)
                        actions.append(f"removed {p} (format-1 file of a replaced dataset)")
                    except OSError:
                        pass
        if actions:
            log(home, actions)
    finally:
        unlock([lk])
    return actions


def recover_target(disk: str, name: str) -> list:
    """Before a partition run writes `name` on `disk`: recover the container there (see
    recover_containers), or delete unfinished builds when nothing was ever committed, and finish
    or undo what a format-1 writer left beside it. Returns what was done."""
    actions = recover_legacy([disk], name)
    c = dataset_dir(disk, name)
    if not os.path.isdir(c):
        return actions
    try:
        o = open_dataset(c, recover_files=True)
    except (DatasetError, OSError):
        o = None
    if o is not None:
        actions += o.recovered
        unlock(o.locks)
    elif read_current(c) is None and not os.path.exists(os.path.join(c, MANIFEST_NAME)):
        lk = commit_lock(c, block=False)
        if lk is not None:
            try:
                _collect_garbage(c, None, actions)
            finally:
                unlock([lk])
            if actions:
                log(c, actions)
    return actions


def log(container: str, actions: list) -> None:
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        with open(os.path.join(container, LOG_NAME), "a") as f:
            for a in actions:
                f.write(f"{stamp} {a}\n")
    except OSError:
        pass


def read_log(container: str, last: int = 20) -> list:
    try:
        with open(os.path.join(container, LOG_NAME)) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return lines[-last:]


# -- format 1 leftovers -----------------------------------------------------------------------------
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


def recover_legacy(disks: list, name: str) -> list:
    """What a format-1 writer (before versioned folders) left when it died: `.NAME.tmp-*` build
    folders are deleted; a commit interrupted between moving the old dataset aside (`.NAME.old-*`)
    and renaming the new one into place is rolled forward when the new dataset is complete on every
    disk, else back."""
    actions = []
    stale = {}
    for d in disks:
        for e in _listdir(d):
            m = LEGACY_TMP_RE.match(e)
            if not m or m["name"] != name or _pid_alive(int(m["pid"])):
                continue
            stale.setdefault((m["pid"], m["rand"]), {}).setdefault(d, {})[m["kind"]] = os.path.join(d, e)
    for per_disk in stale.values():
        if not any("old" in k for k in per_disk.values()):
            for k in per_disk.values():
                shutil.rmtree(k["tmp"], ignore_errors=True)
                actions.append(f"removed {k['tmp']} (unfinished build of an interrupted run)")
            continue
        new_uuid = None
        for k in per_disk.values():
            if "tmp" in k:
                man = read_json(os.path.join(k["tmp"], MANIFEST_NAME))
                new_uuid = (man or {}).get("uuid") or new_uuid
        forward = new_uuid is not None
        for d in disks:
            k = per_disk.get(d, {})
            live = read_json(os.path.join(dataset_dir(d, name), MANIFEST_NAME))
            tmpm = read_json(os.path.join(k["tmp"], MANIFEST_NAME)) if "tmp" in k else None
            if not ((live and live.get("uuid") == new_uuid) or (tmpm and tmpm.get("uuid") == new_uuid)):
                forward = False
        for d, k in per_disk.items():
            live = dataset_dir(d, name)
            src = k.get("tmp") if forward else k.get("old")
            drop = k.get("old") if forward else k.get("tmp")
            if src:
                if os.path.exists(live):
                    _remove_tree(live)
                os.rename(src, live)
            if drop:
                shutil.rmtree(drop, ignore_errors=True)
            fsync_dir(d)
        actions.append(f"{'finished' if forward else 'undid'} an interrupted format-1 commit of "
                       f"{name} on {', '.join(sorted(per_disk))}")
    return actions


def remove_dataset(opened: Opened) -> None:
    """Delete a dataset: the home pointer first (the atomic point: from then on it does not
    exist), then every disk's container."""
    name = opened.manifest.get("name")
    disks = list(opened.manifest.get("disks") or [])
    unlock(opened.locks)
    opened.locks = []
    containers = [dataset_dir(d, name) for d in disks]
    home = containers[0] if containers else opened.home
    if opened.version is not None:
        lk = commit_lock(home, block=True)
        try:
            try:
                os.unlink(os.path.join(home, CURRENT))
            except FileNotFoundError:
                pass
            fsync_dir(home)
        finally:
            unlock([lk] if lk is not None else [])
    else:   # format 1: the home manifest is the point of no return
        try:
            os.unlink(os.path.join(home, MANIFEST_NAME))
        except FileNotFoundError:
            pass
        fsync_dir(home)
    for c in containers[1:] + containers[:1]:
        if not os.path.isdir(c):
            continue
        if opened.version is None or not foreign_entries(c):
            if not _remove_tree(c):
                raise DatasetError(f"cannot remove {c} (read-only disk?)")
            continue
        # files the dataset did not write (put there by hand): only the dataset's own go
        for e in _listdir(c):
            if not _ours(e):
                continue
            p = os.path.join(c, e)
            if os.path.isdir(p) and not os.path.islink(p):
                if not _remove_tree(p):
                    raise DatasetError(f"cannot remove {p} (read-only disk?)")
            else:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
                except OSError as err:
                    raise DatasetError(f"cannot remove {p}: {err.strerror}") from None


def errno_name(e: OSError) -> str:
    return errno.errorcode.get(e.errno, str(e.errno))
