"""Atomic array operations for numba compute functions (LLVM cmpxchg / atomicrmw, monotonic order).

Compute functions run concurrently on several threads; most algorithms avoid shared writes with the
tid-indexed per-thread buffers the iterator hands them, but a few updates are naturally atomic:
BFS claims a vertex with one compare-and-swap (so every vertex enters the next frontier exactly once
and its parent is the claimer), and appends to a shared queue with one fetch-and-add.

    atomic_cas(arr, i, expected, new) -> old value   (arr[i] = new if arr[i] == expected)
    atomic_add(arr, i, delta)         -> old value   (integer arrays)
    atomic_min(arr, i, value)         -> old value   (signed integer arrays)
    atomic_or(arr, i, bits)           -> old value   (integer arrays; e.g. claim a bit of a bitmap)
    atomic_fadd(arr, i, delta)        -> old value   (float32/float64 arrays; acquire-release)
    atomic_add_acq_rel(arr, i, delta) -> old value   (integer arrays; acquire-release)
    atomic_add2(arr, i, j, delta)     -> old value   (arr[i, j] of a 2-D integer array)

`arr` must be a C-contiguous numpy array of a 4- or 8-byte dtype; call these only from @njit code.
Monotonic ordering is enough for the first four: the superstep barrier (thread join) orders
everything between supersteps. The acquire-release pair is for hand-offs *within* a superstep: e.g.
threads each add a partial sum (atomic_fadd) and then count their piece (atomic_add_acq_rel); the
thread whose count completes the total then sees every partial sum (the counter's RMWs form a
release sequence).
"""
from __future__ import annotations

from ..jit import intrinsic, prefetch  # noqa: F401  (prefetch: part of this module's API)

# numba's typing and code generation are imported inside the intrinsics: they run when a kernel
# that calls one is compiled, by when numba is in use (graphene_py.jit imports it on demand)


def _ptr(context, builder, aryty, ary, idx):
    from numba.core import cgutils
    a = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, a, [idx])


@intrinsic
def atomic_cas(typingctx, ary, idx, expected, new):
    from numba import types
    if not isinstance(ary, types.Array) or not isinstance(ary.dtype, types.Integer):
        return None
    dt = ary.dtype
    sig = dt(ary, types.intp, dt, dt)

    def codegen(context, builder, signature, args):
        arr, i, exp, nv = args
        ptr = _ptr(context, builder, signature.args[0], arr, i)
        res = builder.cmpxchg(ptr, exp, nv, "monotonic", "monotonic")
        return builder.extract_value(res, 0)

    return sig, codegen


def _rmw(op, ordering="monotonic", kind="Integer"):
    """An intrinsic f(arr, i, val) -> old value: LLVM `atomicrmw op` on arr[i] with `ordering`, for
    arrays whose dtype is a numba `types.<kind>` (op "min" becomes "umin" on unsigned integers)."""

    def rmw(typingctx, ary, idx, val):
        from numba import types
        if not isinstance(ary, types.Array) or not isinstance(ary.dtype, getattr(types, kind)):
            return None
        dt = ary.dtype
        sig = dt(ary, types.intp, dt)
        llop = "umin" if op == "min" and not dt.signed else op

        def codegen(context, builder, signature, args):
            arr, i, v = args
            ptr = _ptr(context, builder, signature.args[0], arr, i)
            return builder.atomic_rmw(llop, ptr, v, ordering)

        return sig, codegen

    return intrinsic(rmw)


atomic_add = _rmw("add")
atomic_min = _rmw("min")
atomic_or = _rmw("or")
atomic_fadd = _rmw("fadd", "acq_rel", "Float")
atomic_add_acq_rel = _rmw("add", "acq_rel")


@intrinsic
def atomic_add2(typingctx, ary, i, j, val):
    """atomic_add on a 2-D integer array element (fetch-and-add, monotonic; returns the old value)."""
    from numba import types
    if not (isinstance(ary, types.Array) and ary.ndim == 2 and isinstance(ary.dtype, types.Integer)):
        return None
    sig = ary.dtype(ary, types.intp, types.intp, ary.dtype)

    def codegen(context, builder, signature, args):
        arr, ii, jj, v = args
        aty = signature.args[0]
        a = context.make_array(aty)(context, builder, arr)
        from numba.core import cgutils
        ptr = cgutils.get_item_pointer(context, builder, aty, a, [ii, jj])
        return builder.atomic_rmw("add", ptr, v, "monotonic")

    return sig, codegen


@intrinsic
def float_bits(typingctx, x):
    """The IEEE-754 bits of a float64 as an int64. For non-negative floats (and +inf) the bits
    order as the values do, so atomic_min on an int64 view of a float64 array is a float min."""
    from numba import types
    if not isinstance(x, types.Float) or x.bitwidth != 64:
        return None
    from llvmlite import ir

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(x), codegen


@intrinsic
def order_key(typingctx, x, keys):
    """x as an element of `keys`, the integer array an atomic_min orders it in: a float64's
    IEEE-754 bits into an int64 array (float_bits), an integer converted into an array of its
    own kind (an unsigned array takes "umin": integer distances in 4 bytes, algos/sssp.py)."""
    from numba import types
    if not (isinstance(keys, types.Array) and isinstance(keys.dtype, types.Integer)):
        return None
    kt = keys.dtype
    if isinstance(x, types.Float):
        if x.bitwidth != 64 or kt.bitwidth != 64:
            return None
    elif not isinstance(x, types.Integer):
        return None
    from llvmlite import ir

    def codegen(context, builder, signature, args):
        if isinstance(x, types.Float):
            return builder.bitcast(args[0], ir.IntType(64))
        return context.cast(builder, args[0], x, kt)

    return kt(x, keys), codegen


@intrinsic
def copy_into(typingctx, dst, do, src, so, n):
    """dst[do:do + n] = src[so:so + n] as one memcpy (1-D arrays of one dtype, not overlapping;
    indices unchecked). numba's slice assignment copies an element at a time with its strides:
    2.7 GB/s against 11-17 for a plain copy (64 KB pieces, uint8), and the adjacency cache's
    copy-in was 9-14% of a cold SSSP's samples."""
    from numba import types
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)
            and dst.ndim == 1 and src.ndim == 1 and dst.dtype == src.dtype):
        return None

    def codegen(context, builder, signature, args):
        from numba.core import cgutils
        d, i, s_, j, k = args
        ty = signature.args
        dp = _ptr(context, builder, ty[0], d, context.cast(builder, i, ty[1], types.intp))
        sp = _ptr(context, builder, ty[2], s_, context.cast(builder, j, ty[3], types.intp))
        cnt = context.cast(builder, k, ty[4], types.intp)
        item = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(dst.dtype)))
        cgutils.raw_memcpy(builder, dp, sp, cnt, item)
        return context.get_dummy_value()

    return types.none(dst, do, src, so, n), codegen


@intrinsic
def cast_like(typingctx, x, v):
    """v converted to x's type (e.g. a float32 weight added to a uint32 distance as a uint32,
    not promoted to float64 as numba's typing of the sum would)."""
    from numba import types
    if not (isinstance(x, types.Number) and isinstance(v, types.Number)):
        return None

    def codegen(context, builder, signature, args):
        return context.cast(builder, args[1], v, x)

    return x(x, v), codegen


@intrinsic
def unowned(typingctx, ary):
    """The same array without its owner record (numba's meminfo): views cut from it then take
    and drop no reference. process_batch cuts a view of its buffer for every list it hands on;
    each view's reference was an atomic add and subtract on the buffer's one shared counter,
    which the compute threads' cores passed back and forth (NRT_incref and NRT_decref were 18% of
    delta PageRank's samples on kron22 in RAM, 2 threads). Only for arrays that outlive every view
    cut from the result (a kernel's arguments, for the kernel's call)."""
    from numba import types
    if not isinstance(ary, types.Array):
        return None

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        src = context.make_array(aty)(context, builder, args[0])
        out = context.make_array(signature.return_type)(context, builder)
        context.populate_array(out, data=src.data, shape=src.shape, strides=src.strides,
                               itemsize=src.itemsize, meminfo=None, parent=None)
        return out._getvalue()

    return ary(ary), codegen


@intrinsic
def unowned_all(typingctx, tup):
    """A tuple (a kernel's state) with each array in it unowned (see unowned), the rest as it is:
    a compute kernel that unpacks its state on every call took a reference to each array and
    dropped it again, on counters every compute thread shares."""
    from numba import types
    if not isinstance(tup, types.BaseTuple):
        return None

    def codegen(context, builder, signature, args):
        ty = signature.args[0]
        val = args[0]
        for i, et in enumerate(ty.types):
            if isinstance(et, types.Array):
                src = context.make_array(et)(context, builder, builder.extract_value(val, i))
                out = context.make_array(et)(context, builder)
                context.populate_array(out, data=src.data, shape=src.shape, strides=src.strides,
                                       itemsize=src.itemsize, meminfo=None, parent=None)
                val = builder.insert_value(val, out._getvalue(), i)
        return val

    return tup(tup), codegen
