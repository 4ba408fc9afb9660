// graphene_py GPU kernels (compiled once per device by cupy.RawModule / NVRTC, -std=c++17).
//
// Conventions: vertex IDs int32 (|V| < 2^31), CSR offsets int64, weights float32.
// Expansion schedules are templates over W, the number of threads that share one vertex's list:
//   W = 1 (thread), 2..32 (sub-warp / warp), 0 (one block per vertex), -1 (the whole grid per vertex).
// Every reduction is per block (shared memory) with one atomic per block, so no kernel hammers one
// address with one atomic per thread.
typedef long long i64;
typedef unsigned long long u64;
typedef int i32;
typedef unsigned int u32;

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }

// Item / lane / width of this thread for schedule W (see above).
template <int W>
__device__ __forceinline__ void schedule(i64 &item, i64 &stride, i64 &lane, i64 &width) {
  const i64 gtid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 nthreads = (i64)gridDim.x * blockDim.x;
  if constexpr (W == 1) { item = gtid; stride = nthreads; lane = 0; width = 1; }
  else if constexpr (W > 1) { item = gtid / W; stride = nthreads / W; lane = gtid % W; width = W; }
  else if constexpr (W == 0) { item = blockIdx.x; stride = gridDim.x; lane = threadIdx.x; width = blockDim.x; }
  else { item = 0; stride = 1; lane = gtid; width = nthreads; }
}

// Append v to q (length counter *cnt): one atomic per group of converged threads (warp aggregation).
__device__ __forceinline__ void warp_append(i32 *q, i32 *cnt, i32 v) {
  const unsigned mask = __activemask();
  const int lane = lane_id();
  const int leader = __ffs(mask) - 1;
  const int rank = __popc(mask & ((1u << lane) - 1u));
  int base = 0;
  if (lane == leader) base = atomicAdd(cnt, __popc(mask));
  base = __shfl_sync(mask, base, leader);
  q[base + rank] = v;
}

// Sum over the block; the result is valid in thread 0. Every thread of the block must call it.
template <class T>
__device__ __forceinline__ T block_sum(T x) {
  __shared__ T sh[32];
  for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(FULL_MASK, x, off);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) sh[w] = x;
  __syncthreads();
  T r = 0;
  if (w == 0) {
    r = (l < (int)(blockDim.x >> 5)) ? sh[l] : (T)0;
    for (int off = 16; off > 0; off >>= 1) r += __shfl_down_sync(FULL_MASK, r, off);
  }
  return r;
}

// ------------------------------------------------------------------------------------------------
// BFS
// ------------------------------------------------------------------------------------------------

// Staged chunks (gpu/chunks.py, HyTGraph's explicit transfer): an edge array in pinned host memory
// is cut into chunks of 2^g_stage_shift entries; a chunk that a superstep's lists cover densely is
// copied into GPU memory before the kernels run (one copy at the bus's full rate), the others are
// read over the bus entry by entry (zero-copy). g_stage_base[s] is the s-th array so served (its
// host pointer, as the kernels get it), g_stage_chunk[s][c] its chunk c's copy in GPU memory, or
// null. g_stage_n = 0 (no array staged: every resident run) costs one constant-cache read.
#define STAGE_ARRAYS 4
#define STAGE_MAXCH 2048
extern "C" {
__constant__ int g_stage_n;
__constant__ int g_stage_shift;
__constant__ const void *g_stage_base[STAGE_ARRAYS];
__device__ const void *g_stage_chunk[STAGE_ARRAYS][STAGE_MAXCH];
}

// a[j] of an edge-sized array, from its chunk's copy in GPU memory when that chunk is staged.
template <class T>
__device__ __forceinline__ T staged_at(const T *__restrict__ a, i64 j) {
  const int ns = g_stage_n;
  for (int s = 0; s < ns; ++s) {
    if (g_stage_base[s] == (const void *)a) {
      const T *c = (const T *)g_stage_chunk[s][j >> g_stage_shift];
      return c ? c[j & ((1ll << g_stage_shift) - 1)] : a[j];
    }
  }
  return a[j];
}

// Per chunk of 2^shift list entries: the entries past each list's first H that the queued
// vertices' lists hold there (edges[c]) and how many of those lists reach it (lists[c]); the
// stager's cost model reads them (gpu/chunks.py). nch <= STAGE_MAXCH.
extern "C" __global__ void chunk_load(const i32 *__restrict__ q, i32 len, const i64 *__restrict__ ptr,
                                      int H, int shift, int nch, u64 *edges, u32 *lists) {
  __shared__ u64 se[STAGE_MAXCH];
  __shared__ u32 sl[STAGE_MAXCH];
  for (int c = threadIdx.x; c < nch; c += blockDim.x) { se[c] = 0; sl[c] = 0; }
  __syncthreads();
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += stride) {
    const int u = q[i];
    const i64 b = ptr[u] + H, e = ptr[u + 1];
    if (b >= e) continue;
    for (i64 c = b >> shift; c <= ((e - 1) >> shift); ++c) {
      const i64 lo = b > (c << shift) ? b : (c << shift);
      const i64 hi = e < ((c + 1) << shift) ? e : ((c + 1) << shift);
      atomicAdd(&se[c], (u64)(hi - lo));
      atomicAdd(&sl[c], 1u);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < nch; c += blockDim.x) {
    if (se[c]) atomicAdd(&edges[c], se[c]);
    if (sl[c]) atomicAdd(&lists[c], sl[c]);
  }
}

// List heads: with the edge arrays in pinned host memory (zero-copy), GPU memory left over holds
// the first H edges of every list, H per vertex (head[u * H + k] = k-th edge of u; -1 past the
// list's end). The BFS kernels read an edge there when it is one of the first H of its list (a
// bottom-up scan mostly stops within them), else from its staged chunk or over the bus. H = 0:
// no heads.
__device__ __forceinline__ int edge_at(const i32 *__restrict__ idx, const i32 *__restrict__ head,
                                       int H, i64 u, i64 b, i64 j) {
  const i64 k = j - b;
  return k < H ? head[u * H + k] : staged_at(idx, j);
}

extern "C" __global__ void edge_heads(const i64 *__restrict__ ptr, const i32 *__restrict__ idx,
                                      i64 n, int H, i32 *head) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n * H; t += stride) {
    const i64 u = t / H, k = t - u * H;
    const i64 j = ptr[u] + k;
    head[t] = j < ptr[u + 1] ? idx[j] : -1;
  }
}

// Small frontiers: one block runs level after level on the device (no host round trip, no grid
// launch per level) while the frontier stays under vcap vertices and ecap edges. Next-frontier
// appends use shared-memory atomics; atomicCAS on depth makes the queue duplicate-free.
// st (int64): [0] frontier length, [1] its level, [2] which queue holds it (0: qa, 1: qb),
//             [3] edges of the frontier (out), [4] += edges of every frontier produced, [5] levels run.
extern "C" __global__ void bfs_block_loop(const i64 *__restrict__ ptr, const i32 *__restrict__ idx,
                                          const i32 *__restrict__ head, int H, i32 *depth, i32 *parent, i32 *qa, i32 *qb, i64 *st,
                                          i32 vcap, i64 ecap, i64 max_levels) {
  __shared__ int s_next;
  __shared__ u64 s_edges;
  int len = (int)st[0];
  int level = (int)st[1];
  int cur = (int)st[2];
  u64 ne = (u64)st[3];
  u64 produced = 0;
  i64 done = 0;
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, lane = threadIdx.x & 31;
  while (len > 0 && done < max_levels) {
    if (threadIdx.x == 0) { s_next = 0; s_edges = 0; }
    __syncthreads();
    const i32 *qc = cur ? qb : qa;
    i32 *qn = cur ? qa : qb;
    for (int i = warp; i < len; i += nwarps) {
      const int u = qc[i];
      const i64 b = ptr[u], e = ptr[u + 1];
      for (i64 j = b + lane; j < e; j += 32) {
        const int v = edge_at(idx, head, H, u, b, j);
        if (depth[v] < 0 && atomicCAS(&depth[v], -1, level + 1) == -1) {
          parent[v] = u;
          const int pos = atomicAdd(&s_next, 1);
          qn[pos] = v;
          atomicAdd(&s_edges, (u64)(ptr[v + 1] - ptr[v]));
        }
      }
    }
    __syncthreads();
    const int nn = s_next;
    ne = s_edges;
    __syncthreads();
    produced += ne;
    len = nn;
    level += 1;
    cur ^= 1;
    done += 1;
    if (nn > vcap || ne > (u64)ecap) break;
  }
  if (threadIdx.x == 0) {
    st[0] = len; st[1] = level; st[2] = cur; st[3] = (i64)ne; st[4] += (i64)produced; st[5] = done;
  }
}

// Split a frontier queue into degree bins (Enterprise): < t1 thread, < t2 warp, < t3 block, else grid.
// cnt[0..3]: bin lengths. Also sums the frontier's out-edges into *esum (one atomic per block).
extern "C" __global__ void bfs_classify(const i32 *__restrict__ q, i32 len, const i64 *__restrict__ ptr,
                                        i32 *b0, i32 *b1, i32 *b2, i32 *b3, i32 *cnt, u64 *esum,
                                        i64 t1, i64 t2, i64 t3) {
  u64 acc = 0;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += stride) {
    const int u = q[i];
    const i64 d = ptr[u + 1] - ptr[u];
    acc += (u64)d;
    if (d < t1) warp_append(b0, cnt + 0, u);
    else if (d < t2) warp_append(b1, cnt + 1, u);
    else if (d < t3) warp_append(b2, cnt + 2, u);
    else warp_append(b3, cnt + 3, u);
  }
  const u64 s = block_sum<u64>(acc);
  if (threadIdx.x == 0 && s) atomicAdd(esum, s);
}

// Top-down step over one degree bin. The bin's length is read on the device (*lenp) so that the
// host never waits between classify and expand. Claims with atomicCAS (duplicate-free queue);
// *esum += out-edges of the claimed vertices (next frontier's edges, for the direction switch).
template <int W>
__global__ void bfs_push(const i32 *__restrict__ list, const i32 *lenp, const i64 *__restrict__ ptr,
                         const i32 *__restrict__ idx, const i32 *__restrict__ head, int H, i32 *depth, i32 *parent, i32 level, i32 *qn,
                         i32 *qn_len, u64 *esum) {
  const i64 len = *lenp;
  i64 item, stride, lane, width;
  schedule<W>(item, stride, lane, width);
  u64 acc = 0;
  for (; item < len; item += stride) {
    const int u = list[item];
    const i64 b = ptr[u], e = ptr[u + 1];
    for (i64 j = b + lane; j < e; j += width) {
      const int v = edge_at(idx, head, H, u, b, j);
      if (depth[v] < 0 && atomicCAS(&depth[v], -1, level + 1) == -1) {
        parent[v] = u;
        acc += (u64)(ptr[v + 1] - ptr[v]);
        warp_append(qn, qn_len, v);
      }
    }
  }
  const u64 s = block_sum<u64>(acc);
  if (threadIdx.x == 0 && s) atomicAdd(esum, s);
}

// Bottom-up step: every unvisited vertex scans its in-neighbours for one in the frontier bitmap and
// stops at the first hit. The next bitmap is written one word per warp with __ballot_sync: no atomics,
// no duplicates. cnt[0] += vertices found, *esum += their out-edges (one atomic per block).
extern "C" __global__ void bfs_pull(const i64 *__restrict__ iptr, const i32 *__restrict__ iidx,
                                    const i32 *__restrict__ ihead, int H, const i64 *__restrict__ optr, i32 *depth, i32 *parent,
                                    const u32 *__restrict__ front, u32 *next, i32 n, i32 level,
                                    i32 *cnt, u64 *esum) {
  const i64 nwords = ((i64)n + 31) >> 5;
  const i64 npad = nwords << 5;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const int lane = lane_id();
  u64 acc = 0;
  u32 found_n = 0;
  for (i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x; v - lane < npad; v += stride) {
    bool found = false;
    if (v < n && depth[v] < 0) {
      const i64 b = iptr[v], e = iptr[v + 1];
      for (i64 j = b; j < e; ++j) {
        const int u = edge_at(iidx, ihead, H, v, b, j);
        if ((front[u >> 5] >> (u & 31)) & 1u) {
          depth[v] = level + 1;
          parent[v] = u;
          found = true;
          break;
        }
      }
      if (found) acc += (u64)(optr[v + 1] - optr[v]);
    }
    const unsigned m = __ballot_sync(FULL_MASK, found);
    if (lane == 0 && (v >> 5) < nwords) next[v >> 5] = m;
    found_n += found ? 1u : 0u;
  }
  const u64 s = block_sum<u64>(acc);
  const u64 f = block_sum<u64>((u64)found_n);
  if (threadIdx.x == 0) {
    if (s) atomicAdd(esum, s);
    if (f) atomicAdd(cnt, (i32)f);
  }
}

extern "C" __global__ void queue_to_bitmap(const i32 *__restrict__ q, i32 len, u32 *bm) {
  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < len) {
    const int v = q[i];
    atomicOr(&bm[v >> 5], 1u << (v & 31));
  }
}

// ------------------------------------------------------------------------------------------------
// PageRank (pull)
// ------------------------------------------------------------------------------------------------

// contrib[v] = score[v] / outdeg[v] (float32 for the gather), dangling[0] += score of sinks.
// With has_inv, contrib is stored at inv[v] (vertices renumbered by descending out-degree), so the
// gathers of the pull step hit a compact, mostly L2-resident prefix of the array.
extern "C" __global__ void pr_contrib(const double *__restrict__ score, const i64 *__restrict__ optr,
                                      float *contrib, i32 n, double *dangling,
                                      const i32 *__restrict__ inv, i32 has_inv) {
  double acc = 0.0;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
    const i64 d = optr[v + 1] - optr[v];
    const double s = score[v];
    const i64 at = has_inv ? (i64)inv[v] : v;
    if (d == 0) { acc += s; contrib[at] = 0.0f; }
    else contrib[at] = (float)(s / (double)d);
  }
  const double t = block_sum<double>(acc);
  if (threadIdx.x == 0 && t != 0.0) atomicAdd(dangling, t);
}

// new[v] = (1-alpha)/n + alpha * (sum_{u->v} contrib[u] + dangling/n); err += |new - old|.
// Vertices come from a static in-degree bin `list` (len known on the host).
// Fused with the next iteration's contributions: cnext[v] = new[v]/outdeg[v], and *dnext += new
// scores of sinks (their contributions are never gathered: no vertex has them as in-neighbours).
// HUB > 0: the first HUB contributions (the hubs, after renumbering by degree) are staged in shared
// memory once per block and gathered from there.
#define PR_GATHER(a) (((HUB) > 0 && (a) < hub_n) ? s_hub[(a)] : __ldg(contrib + (a)))
template <int W, int HUB>
__global__ void pr_pull(const i32 *__restrict__ list, i32 len, const i64 *__restrict__ iptr,
                        const i32 *__restrict__ iidx, const float *__restrict__ contrib,
                        const double *__restrict__ old, double *out, double alpha, i32 n,
                        const double *dangling, double *err, const i64 *__restrict__ optr,
                        float *cnext, double *dnext) {
  __shared__ float s_hub[HUB > 0 ? HUB : 1];
  const int hub_n = HUB > 0 ? (n < HUB ? n : HUB) : 0;
  if constexpr (HUB > 0) {
    for (int i = threadIdx.x; i < hub_n; i += blockDim.x) s_hub[i] = contrib[i];
    __syncthreads();
  }
  const double add = (1.0 - alpha) / (double)n + alpha * dangling[0] / (double)n;
  double e_acc = 0.0, d_acc = 0.0;
  if constexpr (W >= 1 && W <= 32) {
    // Loop is uniform per warp (all lanes iterate together) so the shuffles below are safe.
    const i64 gtid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 per_warp = 32 / W;
    const i64 warp_g = gtid >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    const int lane = lane_id();
    const int sub = lane / W, sl = lane % W;
    for (i64 base = warp_g * per_warp; base < len; base += nwarps * per_warp) {
      const i64 item = base + sub;
      float sum = 0.0f;
      int v = -1;
      if (item < len) {
        v = list[item];
        const i64 b = iptr[v], e = iptr[v + 1];
        // Edge IDs stream once (__ldcs: evict-first, so they do not push the hubs' contributions
        // out of L1/L2); several independent gathers in flight per thread.
        i64 j = b + sl;
        for (; j + 3 * W < e; j += 4 * W) {
          const int a0 = __ldcs(iidx + j), a1 = __ldcs(iidx + j + W), a2 = __ldcs(iidx + j + 2 * W),
                    a3 = __ldcs(iidx + j + 3 * W);
          sum += (PR_GATHER(a0) + PR_GATHER(a1)) + (PR_GATHER(a2) + PR_GATHER(a3));
        }
        if (j + W < e) {
          const int a0 = __ldcs(iidx + j), a1 = __ldcs(iidx + j + W);
          sum += PR_GATHER(a0) + PR_GATHER(a1);
          j += 2 * W;
        }
        if (j < e) {
          const int a0 = __ldcs(iidx + j);
          sum += PR_GATHER(a0);
        }
      }
      if constexpr (W > 1) {
        for (int off = W / 2; off > 0; off >>= 1) sum += __shfl_down_sync(FULL_MASK, sum, off, W);
      }
      if (v >= 0 && sl == 0) {
        const double nv = add + alpha * (double)sum;
        e_acc += fabs(nv - old[v]);
        out[v] = nv;
        const i64 d = optr[v + 1] - optr[v];
        if (d == 0) d_acc += nv; else cnext[v] = (float)(nv / (double)d);
      }
    }
  } else {  // one block per vertex
    for (i64 item = blockIdx.x; item < len; item += gridDim.x) {
      const int v = list[item];
      const i64 b = iptr[v], e = iptr[v + 1];
      double sum = 0.0;
      const i64 bd = blockDim.x;
      i64 j = b + threadIdx.x;
      for (; j + 3 * bd < e; j += 4 * bd) {
        const int a0 = __ldcs(iidx + j), a1 = __ldcs(iidx + j + bd), a2 = __ldcs(iidx + j + 2 * bd),
                  a3 = __ldcs(iidx + j + 3 * bd);
        sum += (double)((PR_GATHER(a0) + PR_GATHER(a1)) + (PR_GATHER(a2) + PR_GATHER(a3)));
      }
      for (; j < e; j += bd) {
        const int a0 = __ldcs(iidx + j);
        sum += (double)PR_GATHER(a0);
      }
      const double t = block_sum<double>(sum);
      if (threadIdx.x == 0) {
        const double nv = add + alpha * t;
        e_acc += fabs(nv - old[v]);
        out[v] = nv;
        const i64 d = optr[v + 1] - optr[v];
        if (d == 0) d_acc += nv; else cnext[v] = (float)(nv / (double)d);
      }
      __syncthreads();
    }
  }
  const double t = block_sum<double>(e_acc);
  const double dd = block_sum<double>(d_acc);
  if (threadIdx.x == 0) {
    if (t != 0.0) atomicAdd(err, t);
    if (dd != 0.0) atomicAdd(dnext, dd);
  }
}

// Hub rows, tiled (propagation blocking inside shared memory; Beamer et al. IPDPS'17, Lakhotia et
// al. ATC'18). The pull kernels above spend one 32-byte L2 sector on every random 4-byte gather of
// contrib[u]; for the hubs' long in-lists that is most of the iteration. Here the hubs are split
// into groups of G = 2^gbits rows and their in-edges are stored tile-major: tile = (group, source
// segment of S = 2^sbits vertices), each edge one 32-bit word (u - segment base) << gbits | (hub -
// group base), sorted by (tile, word). One block takes a chunk (a contiguous edge range inside one
// group), keeps the group's G partial sums in shared memory, copies each source segment's
// contributions into shared memory once (coalesced: S/8 sectors) when the chunk has >= load_min
// edges in that tile (else it gathers them from global memory), adds every edge's contribution to
// its hub's partial sum with a shared-memory atomic, and finally adds its nonzero partial sums to
// hub_sum (double atomics). FIXED: partial sums in u64 fixed point (scale 2^62, exact adds; every
// partial sum is <= the total score 1, so no overflow); else float.
#define PR_FIX_SCALE 4611686018427387904.0f
#define PR_FIX_INV (1.0 / 4611686018427387904.0)
template <int FIXED>
__device__ __forceinline__ void pr_tile_add(unsigned char *smem, u32 d, float x) {
  if constexpr (FIXED) atomicAdd(reinterpret_cast<u64 *>(smem) + d, (u64)__float2ull_rn(x * PR_FIX_SCALE));
  else atomicAdd(reinterpret_cast<float *>(smem) + d, x);
}
// Edges [a, b) of one tile, thread-strided so that a warp's 32 atomics hit consecutive partial
// sums (words are sorted by source, then hub: 4 consecutive words per thread, as uint4 loads, put
// each of a warp's atomics 32 bytes apart, 8-way bank conflicts; measured 30% slower).
template <int FIXED, bool STAGED>
__device__ __forceinline__ void pr_tile_edges(unsigned char *smem, const float *sc, const float *gsrc,
                                              const u32 *__restrict__ words, i64 a, i64 b, int gbits,
                                              u32 gmask) {
  const i64 bd = blockDim.x;
  i64 e = a + threadIdx.x;
#define PR_TILE_X(w) (STAGED ? sc[(w) >> gbits] : __ldg(gsrc + ((w) >> gbits)))
  for (; e + 3 * bd < b; e += 4 * bd) {
    const u32 w0 = __ldcs(words + e), w1 = __ldcs(words + e + bd), w2 = __ldcs(words + e + 2 * bd),
              w3 = __ldcs(words + e + 3 * bd);
    const float x0 = PR_TILE_X(w0), x1 = PR_TILE_X(w1), x2 = PR_TILE_X(w2), x3 = PR_TILE_X(w3);
    pr_tile_add<FIXED>(smem, w0 & gmask, x0);
    pr_tile_add<FIXED>(smem, w1 & gmask, x1);
    pr_tile_add<FIXED>(smem, w2 & gmask, x2);
    pr_tile_add<FIXED>(smem, w3 & gmask, x3);
  }
  for (; e < b; e += bd) {
    const u32 w0 = __ldcs(words + e);
    pr_tile_add<FIXED>(smem, w0 & gmask, PR_TILE_X(w0));
  }
#undef PR_TILE_X
}
// Edges [a, b) of one tile stored hub-major (sorted by hub, then source): each lane of a warp takes
// 8 consecutive words (two 16-byte loads), sums its runs of equal hubs in a register and adds
// each run but its last to the partial sums; the lanes' last runs are then summed across the warp
// (a segmented reduction: equal hubs sit in consecutive lanes), one shared atomic per hub. A hub
// with thousands of in-edges in the tile costs one atomic per 256 edges instead of one per edge.
template <int FIXED> struct PrTileAcc { typedef float T; };
template <> struct PrTileAcc<1> { typedef u64 T; };
template <int FIXED>
__device__ __forceinline__ void pr_tile_edges_runs(unsigned char *smem, const float *gsrc,
                                                   const u32 *__restrict__ words, i64 a, i64 b,
                                                   int gbits, u32 gmask) {
  using acc_t = typename PrTileAcc<FIXED>::T;
  const int lane = lane_id();
  const i64 stride = (i64)(blockDim.x >> 5) * 256;
  const u32 NONE = 0xFFFFFFFFu;
  for (i64 wb = (a & ~(i64)3) + (i64)(threadIdx.x >> 5) * 256; wb < b; wb += stride) {  // warp-uniform
    const i64 e0 = wb + 8 * lane;
    u32 w[8];
    int valid = 0;
    if (e0 >= a && e0 + 8 <= b) {
      const uint4 p = __ldcs(reinterpret_cast<const uint4 *>(words + e0));
      const uint4 q = __ldcs(reinterpret_cast<const uint4 *>(words + e0 + 4));
      w[0] = p.x; w[1] = p.y; w[2] = p.z; w[3] = p.w; w[4] = q.x; w[5] = q.y; w[6] = q.z; w[7] = q.w;
      valid = 0xFF;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const bool ok = e0 + k >= a && e0 + k < b;
        w[k] = ok ? __ldcs(words + e0 + k) : 0u;
        valid |= (int)ok << k;
      }
    }
    u32 cur = NONE;
    acc_t acc = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (valid >> k & 1) {
        const u32 h = w[k] & gmask;
        const float x = __ldg(gsrc + (w[k] >> gbits));
        acc_t v;
        if constexpr (FIXED) v = (u64)__float2ull_rn(x * PR_FIX_SCALE);
        else v = x;
        if (h != cur) {
          if (cur != NONE) atomicAdd(reinterpret_cast<acc_t *>(smem) + cur, acc);
          cur = h;
          acc = v;
        } else {
          acc += v;
        }
      }
    }
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const u32 ok = __shfl_down_sync(FULL_MASK, cur, off);
      const acc_t ov = __shfl_down_sync(FULL_MASK, acc, off);
      if (lane + off < 32 && ok == cur) acc += ov;
    }
    const u32 before = __shfl_up_sync(FULL_MASK, cur, 1);
    if (cur != NONE && (lane == 0 || before != cur)) atomicAdd(reinterpret_cast<acc_t *>(smem) + cur, acc);
  }
}
template <int FIXED, int RUNS>
__global__ void pr_tile(const i64 *__restrict__ chunk_lo, const i32 *__restrict__ chunk_tile,
                        const i64 *__restrict__ tile_ptr, const u32 *__restrict__ words,
                        const float *__restrict__ contrib, i32 n, i32 nseg, i32 gbits, i32 sbits,
                        i64 load_min, double *hub_sum) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int G = 1 << gbits;
  const i64 S = (i64)1 << sbits;
  const u32 gmask = (u32)G - 1u;
  float *sc = reinterpret_cast<float *>(smem + (size_t)G * (FIXED ? 8 : 4));
  const i64 lo = chunk_lo[blockIdx.x], hi = chunk_lo[blockIdx.x + 1];
  i64 t = chunk_tile[blockIdx.x];
  const i64 g = t / nseg;
  for (int i = threadIdx.x; i < G; i += blockDim.x) {
    if constexpr (FIXED) reinterpret_cast<u64 *>(smem)[i] = 0ull;
    else reinterpret_cast<float *>(smem)[i] = 0.0f;
  }
  __syncthreads();
  for (;; ++t) {  // uniform over the block: every thread reads the same offsets
    const i64 t0 = tile_ptr[t];
    if (t0 >= hi) break;
    const i64 t1 = tile_ptr[t + 1];
    const i64 a = t0 > lo ? t0 : lo, b = t1 < hi ? t1 : hi;
    if (a >= b) continue;
    const i64 base = (t - g * nseg) << sbits;
    if constexpr (RUNS) {
      pr_tile_edges_runs<FIXED>(smem, contrib + base, words, a, b, gbits, gmask);
    } else if (b - a >= load_min) {
      const i64 cnt = (n - base) < S ? (n - base) : S;
      __syncthreads();  // every thread is done with the previous segment
      if (sbits >= 2) {  // float4 loads, up to four in flight per thread (base is a multiple of 4)
        const float4 *g4 = reinterpret_cast<const float4 *>(contrib + base);
        float4 *s4 = reinterpret_cast<float4 *>(sc);
        const i64 c4 = cnt >> 2, bd = blockDim.x;
        for (i64 i = threadIdx.x; i < c4; i += 4 * bd) {
          float4 v[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) if (i + k * bd < c4) v[k] = __ldg(g4 + i + k * bd);
#pragma unroll
          for (int k = 0; k < 4; ++k) if (i + k * bd < c4) s4[i + k * bd] = v[k];
        }
        for (i64 i = (c4 << 2) + threadIdx.x; i < cnt; i += bd) sc[i] = __ldg(contrib + base + i);
      } else {
        for (i64 i = threadIdx.x; i < cnt; i += blockDim.x) sc[i] = __ldg(contrib + base + i);
      }
      __syncthreads();
      pr_tile_edges<FIXED, true>(smem, sc, contrib + base, words, a, b, gbits, gmask);
    } else {
      pr_tile_edges<FIXED, false>(smem, sc, contrib + base, words, a, b, gbits, gmask);
    }
  }
  __syncthreads();
  double *dst = hub_sum + (g << gbits);
  for (int i = threadIdx.x; i < G; i += blockDim.x) {
    if constexpr (FIXED) {
      const u64 v = reinterpret_cast<u64 *>(smem)[i];
      if (v) atomicAdd(dst + i, (double)v * PR_FIX_INV);
    } else {
      const float v = reinterpret_cast<float *>(smem)[i];
      if (v != 0.0f) atomicAdd(dst + i, (double)v);
    }
  }
}

// The hubs' new scores: hub_sum (the tiles' partial sums; zeroed here for the next iteration) plus
// the gathers of their edges left out of the tiles (rest_ptr/rest_idx, one warp per hub), then as
// pr_pull's epilogue.
extern "C" __global__ void pr_hub_finish(const i32 *__restrict__ hubs, i32 nh, double *hub_sum,
                                         const i64 *__restrict__ rest_ptr,
                                         const i32 *__restrict__ rest_idx,
                                         const float *__restrict__ contrib,
                                         const double *__restrict__ old, double *out, double alpha,
                                         i32 n, const double *dangling, double *err,
                                         const i64 *__restrict__ optr, float *cnext, double *dnext) {
  const double add = (1.0 - alpha) / (double)n + alpha * dangling[0] / (double)n;
  double e_acc = 0.0, d_acc = 0.0;
  const i64 gw = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const i64 nw = ((i64)gridDim.x * blockDim.x) >> 5;
  const int lane = lane_id();
  for (i64 h = gw; h < nh; h += nw) {  // uniform per warp
    const i64 b = rest_ptr[h], e = rest_ptr[h + 1];
    double sum = 0.0;
    i64 j = b + lane;
    for (; j + 96 < e; j += 128) {
      const int a0 = __ldcs(rest_idx + j), a1 = __ldcs(rest_idx + j + 32), a2 = __ldcs(rest_idx + j + 64),
                a3 = __ldcs(rest_idx + j + 96);
      sum += (double)((__ldg(contrib + a0) + __ldg(contrib + a1)) + (__ldg(contrib + a2) + __ldg(contrib + a3)));
    }
    for (; j < e; j += 32) sum += (double)__ldg(contrib + __ldcs(rest_idx + j));
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_down_sync(FULL_MASK, sum, off);
    if (lane == 0) {
      const int v = hubs[h];
      const double nv = add + alpha * (hub_sum[h] + sum);
      hub_sum[h] = 0.0;
      e_acc += fabs(nv - old[v]);
      out[v] = nv;
      const i64 d = optr[v + 1] - optr[v];
      if (d == 0) d_acc += nv; else cnext[v] = (float)(nv / (double)d);
    }
  }
  const double t = block_sum<double>(e_acc);
  const double dd = block_sum<double>(d_acc);
  if (threadIdx.x == 0) {
    if (t != 0.0) atomicAdd(err, t);
    if (dd != 0.0) atomicAdd(dnext, dd);
  }
}

// ------------------------------------------------------------------------------------------------
// WCC: lock-free union-find, always hooking the larger root under the smaller one, so every root is
// its tree's minimum vertex ID and the final label is the component's minimum ID.
// ------------------------------------------------------------------------------------------------

__device__ __forceinline__ int uf_find(volatile i32 *c, int x) {
  while (true) {
    const int p = c[x];
    const int gp = c[p];
    if (p == gp) return p;
    c[x] = gp;  // path halving; gp is an ancestor of x, so this never breaks the forest
    x = gp;
  }
}

__device__ __forceinline__ void uf_unite(i32 *c, int a, int b) {
  while (true) {
    a = uf_find(c, a);
    b = uf_find(c, b);
    if (a == b) return;
    if (a < b) { const int t = a; a = b; b = t; }
    if (atomicCAS(&c[a], a, b) == a) return;
  }
}

// sym: the CSR is symmetric, so each undirected edge is united once (from its larger endpoint).
template <int W>
__global__ void wcc_hook(const i32 *__restrict__ list, i32 len, const i64 *__restrict__ ptr,
                         const i32 *__restrict__ idx, i32 *comp, i32 sym) {
  i64 item, stride, lane, width;
  schedule<W>(item, stride, lane, width);
  for (; item < len; item += stride) {
    const int u = list[item];
    const i64 b = ptr[u], e = ptr[u + 1];
    for (i64 j = b + lane; j < e; j += width) {
      const int v = idx[j];
      if (v == u || (sym && v > u)) continue;
      uf_unite(comp, u, v);
    }
  }
}

// Afforest (Sutton et al., IPDPS'18), phase 1: unite every vertex with its r-th neighbour.
extern "C" __global__ void wcc_sample(const i64 *__restrict__ ptr, const i32 *__restrict__ idx,
                                      const i32 *__restrict__ head, int H, i32 *comp, i32 n, i32 r) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < n; u += stride) {
    const i64 j = ptr[u] + r;
    if (j < ptr[u + 1]) {
      const int v = edge_at(idx, head, H, u, ptr[u], j);
      if (v != (int)u) uf_unite(comp, (int)u, v);
    }
  }
}

// Afforest, last phase: vertices outside the component `giant` unite the rest of their list (from
// position `skip`). Correct without the giant's own lists: on a symmetric CSR every edge leaving the
// giant component is also in the list of its other endpoint, which is outside it (directed graphs
// add a pass over the in-lists with skip 0). comp[u] == giant is read while other threads link, but
// membership only grows: a stale "not giant" only repeats work.
template <int W>
__global__ void wcc_link_rest(const i32 *__restrict__ list, i32 len, const i64 *__restrict__ ptr,
                              const i32 *__restrict__ idx, const i32 *__restrict__ head, int H,
                              i32 *comp, i32 giant, i32 skip) {
  i64 item, stride, lane, width;
  schedule<W>(item, stride, lane, width);
  for (; item < len; item += stride) {
    const int u = list[item];
    if (comp[u] == giant) continue;
    const i64 b = ptr[u], e = ptr[u + 1];
    for (i64 j = b + skip + lane; j < e; j += width) {
      const int v = edge_at(idx, head, H, u, b, j);
      if (v != u) uf_unite(comp, u, v);
    }
  }
}

// Labels from the union-find forest without writing it (no races): lab[v] = root of v.
extern "C" __global__ void wcc_compress(const i32 *comp, i32 *lab, i32 n) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
    int r = comp[v];
    while (true) { const int p = comp[r]; if (p == r) break; r = p; }
    lab[v] = r;
  }
}

// Check + repair (Shiloach-Vishkin style): for every edge with different labels, hook the larger
// label under the smaller one (atomicMin) and raise *flag. With a correct union-find pass this finds
// nothing and is the verification pass.
template <int W>
__global__ void wcc_sv_hook(const i32 *__restrict__ list, i32 len, const i64 *__restrict__ ptr,
                            const i32 *__restrict__ idx, i32 *lab, i32 *flag) {
  i64 item, stride, lane, width;
  schedule<W>(item, stride, lane, width);
  int changed = 0;
  for (; item < len; item += stride) {
    const int u = list[item];
    const i64 b = ptr[u], e = ptr[u + 1];
    for (i64 j = b + lane; j < e; j += width) {
      const int lu = lab[u], lv = lab[idx[j]];
      if (lu != lv) {
        atomicMin(&lab[lu > lv ? lu : lv], lu < lv ? lu : lv);
        changed = 1;
      }
    }
  }
  if (changed) flag[0] = 1;
}

// Pointer jumping to the root; labels only decrease and every label is a vertex of the same component.
extern "C" __global__ void wcc_jump(i32 *lab, i32 n) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
    int r = lab[v];
    while (true) { const int p = lab[r]; if (p == r) break; r = p; }
    lab[v] = r;
  }
}

// ------------------------------------------------------------------------------------------------
// Multi-source BFS (iBFS): one word per vertex, bit j = reached by source j. Bottom-up step with early
// exit when the word is full; new bits give the depth of (source, vertex). flag[0] = 1 if anything new.
// ------------------------------------------------------------------------------------------------
template <class WT>
__global__ void msbfs_pull(const i64 *__restrict__ iptr, const i32 *__restrict__ iidx,
                           const i32 *__restrict__ ihead, int H, const WT *__restrict__ cur, WT *nxt, i32 n, WT full, i32 level,
                           i32 *depth, i32 *flag) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  int any = 0;
  for (i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x; v < n; v += stride) {
    const WT c = cur[v];
    WT acc = c;
    if (c != full) {
      const i64 b = iptr[v], e = iptr[v + 1];
      for (i64 j = b; j < e; ++j) {
        acc |= cur[edge_at(iidx, ihead, H, v, b, j)];
        if (acc == full) break;
      }
    }
    nxt[v] = acc;
    WT nw = acc & ~c;
    if (nw) {
      any = 1;
      while (nw) {
        const int bit = (sizeof(WT) == 8) ? (__ffsll((long long)nw) - 1) : (__ffs((int)nw) - 1);
        depth[(i64)bit * n + v] = level + 1;
        nw &= nw - 1;
      }
    }
  }
  if (any) flag[0] = 1;
}

// ------------------------------------------------------------------------------------------------
// SSSP (delta-stepping, near/far): relax the out-edges of a queue of vertices. Distances are float64
// stored as uint64 bits (non-negative doubles order like their bit patterns), so atomicMin works.
// A vertex improved below `bound` joins the next near queue once per iteration (stamp).
// ------------------------------------------------------------------------------------------------
extern "C" __global__ void sssp_relax(const i32 *__restrict__ q, i32 len, const i64 *__restrict__ ptr,
                                      const i32 *__restrict__ idx, const float *__restrict__ w,
                                      i32 has_w, u64 *dist, i32 *stamp, i32 iter, double bound,
                                      i32 *qn, i32 *qn_len) {
  i64 item, stride, lane, width;
  schedule<32>(item, stride, lane, width);
  for (; item < len; item += stride) {
    const int u = q[item];
    const double du = __longlong_as_double((long long)dist[u]);
    const i64 b = ptr[u], e = ptr[u + 1];
    for (i64 j = b + lane; j < e; j += width) {
      const int v = staged_at(idx, j);
      const double nd = du + (has_w ? (double)staged_at(w, j) : 1.0);
      const u64 nb = (u64)__double_as_longlong(nd);
      if (nb < dist[v]) {
        const u64 old = atomicMin(&dist[v], nb);
        if (nb < old && nd < bound) {
          if (atomicExch(&stamp[v], iter) != iter) warp_append(qn, qn_len, v);
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// k-core peeling: remove the queued vertices (core = k) and decrement their neighbours' degrees; a
// neighbour whose degree falls from k+1 to k is queued (exactly one thread sees that transition).
// ------------------------------------------------------------------------------------------------
// A queued vertex's list entries (both directions): the size test for the device-side loop below.
__device__ __forceinline__ i64 kcore_entries(const i64 *__restrict__ ptr, const i64 *__restrict__ ptr2,
                                             i32 has2, int v) {
  return (ptr[v + 1] - ptr[v]) + (has2 ? ptr2[v + 1] - ptr2[v] : 0);
}

// Remove u (core k): decrement its neighbours' degrees, `lane` of `width` threads over its lists
// in both directions; append(v) for each neighbour whose degree falls from k + 1 to k.
template <class Append>
__device__ __forceinline__ void kcore_remove(int u, i64 lane, i64 width, const i64 *__restrict__ ptr,
                                             const i32 *__restrict__ idx, const i32 *__restrict__ head,
                                             int H, const i64 *__restrict__ ptr2,
                                             const i32 *__restrict__ idx2, const i32 *__restrict__ head2,
                                             int H2, i32 has2, i32 *deg, i32 *core, i32 k, Append &append) {
  if (lane == 0) core[u] = k;
  for (int pass = 0; pass < (has2 ? 2 : 1); ++pass) {
    const i64 *p = pass ? ptr2 : ptr;
    const i32 *ix = pass ? idx2 : idx;
    const i32 *hd = pass ? head2 : head;
    const int hk = pass ? H2 : H;
    const i64 b = p[u], e = p[u + 1];
    for (i64 j = b + lane; j < e; j += width) {
      const int v = edge_at(ix, hd, hk, u, b, j);
      if (v == u) continue;
      const int old = atomicSub(&deg[v], 1);
      if (old == k + 1) append(v);
    }
  }
}

// The next queue in global memory, one atomic per warp (kcore_peel); *edges += its list entries.
struct KcoreGridQueue {
  i32 *q; i32 *len; u64 *edges; const i64 *ptr; const i64 *ptr2; i32 has2;
  __device__ __forceinline__ void operator()(int v) {
    warp_append(q, len, v);
    atomicAdd(edges, (u64)kcore_entries(ptr, ptr2, has2, v));
  }
};

// The next queue of one block (kcore_peel_loop): its length and entries in shared memory.
struct KcoreBlockQueue {
  i32 *q; int *len; u64 *edges; const i64 *ptr; const i64 *ptr2; i32 has2;
  __device__ __forceinline__ void operator()(int v) {
    q[atomicAdd(len, 1)] = v;
    atomicAdd(edges, (u64)kcore_entries(ptr, ptr2, has2, v));
  }
};

extern "C" __global__ void kcore_peel(const i32 *__restrict__ q, i32 len, const i64 *__restrict__ ptr,
                                      const i32 *__restrict__ idx, const i32 *__restrict__ head, int H,
                                      const i64 *__restrict__ ptr2, const i32 *__restrict__ idx2,
                                      const i32 *__restrict__ head2, int H2, i32 has2, i32 *deg,
                                      i32 *core, i32 k, i32 *qn, i32 *qn_len, u64 *qn_edges) {
  i64 item, stride, lane, width;
  schedule<32>(item, stride, lane, width);
  KcoreGridQueue append{qn, qn_len, qn_edges, ptr, ptr2, has2};
  for (; item < len; item += stride)
    kcore_remove(q[item], lane, width, ptr, idx, head, H, ptr2, idx2, head2, H2, has2, deg, core, k, append);
}

// Small peel queues: one block runs round after round of kcore_peel on the device (no host round
// trip, no grid launch per round) while the queue stays under vcap vertices and ecap list entries:
// a chain peels two vertices a round, each round a launch and a wait without this.
// st (int64): [0] queue length, [1] which queue holds it (0: qa, 1: qb), [2] its list entries (-1:
//             counted here first; more than ecap: nothing is run), [3] rounds run (out), [4]
//             vertices removed (out).
extern "C" __global__ void kcore_peel_loop(i32 *qa, i32 *qb, const i64 *__restrict__ ptr,
                                           const i32 *__restrict__ idx, const i32 *__restrict__ head, int H,
                                           const i64 *__restrict__ ptr2, const i32 *__restrict__ idx2,
                                           const i32 *__restrict__ head2, int H2, i32 has2, i32 *deg,
                                           i32 *core, i32 k, i64 *st, i32 vcap, i64 ecap) {
  __shared__ int s_next;
  __shared__ u64 s_edges;
  __shared__ u64 s_first;
  int len = (int)st[0];
  int cur = (int)st[1];
  i64 rounds = 0, removed = 0;
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, lane = threadIdx.x & 31;
  if (st[2] < 0) {          // the queue's entries, counted here (no round trip to the host)
    const i32 *qc = cur ? qb : qa;
    u64 c = 0;
    for (int i = threadIdx.x; i < len; i += blockDim.x) c += (u64)kcore_entries(ptr, ptr2, has2, qc[i]);
    const u64 tot = block_sum<u64>(c);
    if (threadIdx.x == 0) s_first = tot;
    __syncthreads();
    if (s_first > (u64)ecap) {
      if (threadIdx.x == 0) { st[2] = (i64)s_first; st[3] = 0; st[4] = 0; }
      return;
    }
  }
  u64 ne = 0;
  while (len > 0) {
    if (threadIdx.x == 0) { s_next = 0; s_edges = 0; }
    __syncthreads();
    const i32 *qc = cur ? qb : qa;
    KcoreBlockQueue append{cur ? qa : qb, &s_next, &s_edges, ptr, ptr2, has2};
    for (int i = warp; i < len; i += nwarps)
      kcore_remove(qc[i], lane, 32, ptr, idx, head, H, ptr2, idx2, head2, H2, has2, deg, core, k, append);
    __syncthreads();
    removed += len;
    len = s_next;
    ne = s_edges;
    __syncthreads();
    cur ^= 1;
    rounds += 1;
    if (len > vcap || ne > (u64)ecap) break;
  }
  if (threadIdx.x == 0) {
    st[0] = len; st[1] = cur; st[2] = (i64)ne; st[3] = rounds; st[4] = removed;
  }
}

// deg[u] += number of non-self-loop entries in u's list.
template <int W>
__global__ void count_nonself(const i32 *__restrict__ list, i32 len, const i64 *__restrict__ ptr,
                              const i32 *__restrict__ idx, i32 *deg) {
  i64 item, stride, lane, width;
  schedule<W>(item, stride, lane, width);
  for (; item < len; item += stride) {
    const int u = list[item];
    const i64 b = ptr[u], e = ptr[u + 1];
    int c = 0;
    for (i64 j = b + lane; j < e; j += width) c += (idx[j] != u);
    if (c) atomicAdd(&deg[u], c);
  }
}

// k-core from a partial peel (a CPU run handed over): deg[u] += u's non-self-loop entries still
// alive (core < 0), for the alive u of the list only.
template <int W>
__global__ void count_alive_nonself(const i32 *__restrict__ list, i32 len,
                                    const i64 *__restrict__ ptr, const i32 *__restrict__ idx,
                                    const i32 *__restrict__ core, i32 *deg) {
  i64 item, stride, lane, width;
  schedule<W>(item, stride, lane, width);
  for (; item < len; item += stride) {
    const int u = list[item];
    if (core[u] >= 0) continue;
    const i64 b = ptr[u], e = ptr[u + 1];
    int c = 0;
    for (i64 j = b + lane; j < e; j += width) {
      const int x = idx[j];
      c += (x != u) & (core[x] < 0);
    }
    if (c) atomicAdd(&deg[u], c);
  }
}
