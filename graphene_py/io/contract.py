"""The one IO engine interface every engine implements (`uring`, `liburing`, `pread`).

Model (Graphene §4.4, §4.5.2): one IO worker per disk reads *extents* (file, byte offset, length)
into fixed-size *slots* of a shared buffer pool and publishes each completed extent on that disk's
completion queue; compute threads take completions (their own disk first, then stealing from the
others) and give slots back when done. The pool is bounded: a worker with no free slot waits
(backpressure), so memory use is fixed.

Contract (checked by tests/test_engines.py for every engine):

    eng = make_engine(name, files, disk_of, pool, queue_depth=64, direct=True)
        files    list of paths (file id = index); opened read-only, O_DIRECT when `direct`
        disk_of  disk index of every file (one worker per distinct disk)
        pool     BufferPool (graphene_py.io.buffers): pool.view is a writable uint8 numpy array of
                 pool.nslots * pool.slot_bytes bytes, slot s at [s*slot_bytes, (s+1)*slot_bytes)

    eng.submit(file_ids int32[k], offsets int64[k], lengths int64[k]) -> None
        Starts one batch (a superstep's extents, any order, any disks). Each extent must satisfy
        offset % 512 == 0, length % 512 == 0, 0 < length <= pool.slot_bytes, offset+length <= size
        of the file rounded up to 512. Request id = position in these arrays. Only one batch is in
        flight at a time: submit() again only after get() reported the previous batch finished.

    eng.get(disk, max_n) -> int64 array of shape (n, 2), rows (request_id, slot)
        Blocks (GIL released) until at least one completion is available, preferring `disk`'s queue
        and stealing from the other disks' queues when it is empty; returns up to max_n rows.
        Returns an empty (0, 2) array once every request of the batch has been handed out.
        The data of request i is pool.view[slot*slot_bytes : slot*slot_bytes + lengths[i]]; it is
        exactly the file's bytes (short reads completed; EINTR/EAGAIN retried).
        Raises GrapheneIOError naming disk, file, offset and length on EIO or a read past the end
        of a file shorter than expected; never returns partial data.

    eng.release(slots int64[n]) -> None     give slots back to the pool (any thread)
    eng.stats() -> dict                     cumulative: requests, bytes, io_seconds, max_inflight,
                                            wait_seconds, per-disk counts
    eng.close()                             stop workers, close files (also as context manager)

Engines also expose `name`, `direct` (whether O_DIRECT is in effect; False after a fallback on a
filesystem that refuses it, e.g. tmpfs) and `notes` (list of human-readable fallback notices).
"""
from __future__ import annotations

import abc

import numpy as np


class Engine(abc.ABC):
    name = "abstract"

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True):
        self.files = list(files)
        self.disk_of = np.asarray(disk_of, dtype=np.int32)
        self.pool = pool
        self.queue_depth = int(queue_depth)
        self.direct = bool(direct)
        self.notes = []
        self.ndisks = int(self.disk_of.max()) + 1 if len(self.disk_of) else 1

    @abc.abstractmethod
    def submit(self, file_ids, offsets, lengths) -> None: ...

    @abc.abstractmethod
    def get(self, disk: int, max_n: int) -> np.ndarray: ...

    @abc.abstractmethod
    def release(self, slots) -> None: ...

    @abc.abstractmethod
    def stats(self) -> dict: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
