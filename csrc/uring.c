/*
 * graphene_py._uring: the native io_uring IO engine (Graphene FAST'17 §4.4-4.5).
 *
 * One io_uring ring and one native pthread ("worker") per disk. A batch of extents
 * (file, offset, length) is split by disk; each worker keeps up to queue_depth reads in flight,
 * each into a free slot of its own contiguous share of the caller's buffer pool, and pushes every
 * finished read as (request_id, slot) onto its disk's completion queue. Consumers (compute threads)
 * call get() with the GIL released: they take from their own disk's queue first and steal from the
 * others when it is empty. release() hands slots back to the owning worker; a worker without a free
 * slot waits (backpressure), so memory stays fixed.
 *
 * io_uring is used through the kernel interface only (io_uring_setup/_enter/_register syscalls and
 * mmap of the SQ/CQ rings); ring indices shared with the kernel are read with acquire and written
 * with release ordering. Optional (each kept only if the kernel accepts it, and measured in
 * tools/bench_io.py): the pool registered as fixed buffers (READ_FIXED), the files registered
 * (IOSQE_FIXED_FILE), and SINGLE_ISSUER|DEFER_TASKRUN (completions run in the worker's own
 * io_uring_enter instead of by IPI).
 *
 * Faults: short reads are completed by resubmitting the remainder; -EINTR/-EAGAIN are retried;
 * a read ending at end-of-file is zero-filled only inside the final 512-byte block (files are padded
 * to 512 B; a read may cover the padding); any other error or an EOF before the requested length is
 * recorded once and makes get() raise ReadError(disk, file_id, offset, length, errno, request_id)
 * (errno 0 = unexpected end of file). No partial data is ever handed out.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#ifndef IORING_SETUP_R_DISABLED
#define IORING_SETUP_R_DISABLED (1U << 6)
#endif
#define REG_ENABLE_RINGS 12 /* IORING_REGISTER_ENABLE_RINGS */

#define MAX_RETRIES 10000 /* EINTR/EAGAIN/short-read resubmissions of one request */
#define REG_CHUNK (1ULL << 30) /* registered buffers are at most 1 GiB each */

static PyObject *ReadError;

/* ------------------------------------------------------------------ raw io_uring */

typedef struct {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *sq_flags;
    unsigned sq_entries;
    struct io_uring_sqe *sqes;
    unsigned *cq_head, *cq_tail, *cq_mask;
    unsigned cq_entries;
    struct io_uring_cqe *cqes;
    void *sq_ptr, *cq_ptr;
    size_t sq_sz, cq_sz, sqes_sz;
    unsigned local_tail; /* next SQ tail to publish */
} ring_t;

static int sys_setup(unsigned entries, struct io_uring_params *p) {
    return (int)syscall(__NR_io_uring_setup, entries, p);
}
static int sys_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags) {
    return (int)syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, NULL, 0);
}
static int sys_register(int fd, unsigned op, void *arg, unsigned nr) {
    return (int)syscall(__NR_io_uring_register, fd, op, arg, nr);
}

static void ring_free(ring_t *r) {
    if (r->sqes && r->sqes != MAP_FAILED) munmap(r->sqes, r->sqes_sz);
    if (r->cq_ptr && r->cq_ptr != MAP_FAILED && r->cq_ptr != r->sq_ptr) munmap(r->cq_ptr, r->cq_sz);
    if (r->sq_ptr && r->sq_ptr != MAP_FAILED) munmap(r->sq_ptr, r->sq_sz);
    if (r->fd >= 0) close(r->fd);
    memset(r, 0, sizeof(*r));
    r->fd = -1;
}

/* Returns 0 or -errno. */
static int ring_init(ring_t *r, unsigned entries, unsigned flags) {
    struct io_uring_params p;
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    memset(&p, 0, sizeof(p));
    p.flags = flags;
    int fd = sys_setup(entries, &p);
    if (fd < 0) return -errno;
    r->fd = fd;
    r->sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) {
        if (r->cq_sz > r->sq_sz) r->sq_sz = r->cq_sz;
        r->cq_sz = r->sq_sz;
    }
    r->sq_ptr = mmap(NULL, r->sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                     IORING_OFF_SQ_RING);
    if (r->sq_ptr == MAP_FAILED) { int e = errno; ring_free(r); return -e; }
    if (single) {
        r->cq_ptr = r->sq_ptr;
    } else {
        r->cq_ptr = mmap(NULL, r->cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                         IORING_OFF_CQ_RING);
        if (r->cq_ptr == MAP_FAILED) { int e = errno; ring_free(r); return -e; }
    }
    r->sqes_sz = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                   IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) { int e = errno; ring_free(r); return -e; }
    char *sq = r->sq_ptr, *cq = r->cq_ptr;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_flags = (unsigned *)(sq + p.sq_off.flags);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->sq_entries = p.sq_entries;
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cq_entries = p.cq_entries;
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    /* SQE i always sits at array slot i: fill the indirection array once. */
    for (unsigned i = 0; i < p.sq_entries; i++) r->sq_array[i] = i;
    r->local_tail = *r->sq_tail;
    return 0;
}

/* Next free SQE (caller guarantees space: in-flight <= sq_entries). */
static struct io_uring_sqe *ring_get_sqe(ring_t *r) {
    unsigned head = __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE);
    if (r->local_tail - head >= r->sq_entries) return NULL;
    struct io_uring_sqe *sqe = &r->sqes[r->local_tail & *r->sq_mask];
    r->local_tail++;
    memset(sqe, 0, sizeof(*sqe));
    return sqe;
}

/* Make the prepared SQEs visible to the kernel. */
static void ring_publish(ring_t *r) {
    __atomic_store_n(r->sq_tail, r->local_tail, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ reader state */

typedef struct {
    int64_t req;  /* request id in the batch */
    int64_t slot; /* destination slot */
    int64_t done; /* bytes already read */
    int retries;
} ctx_t;

struct Reader;

typedef struct {
    struct Reader *rd;
    int index;
    int has_files;
    ring_t ring;
    pthread_t thread;
    int thread_started;
    int fixed_bufs, fixed_files, defer;
    int ring_error; /* -errno from enabling the ring in the worker, 0 if fine */
    /* slots [slot_lo, slot_hi) belong to this disk; free ones on a stack (under rd->mu) */
    int64_t slot_lo, slot_hi;
    int64_t *free_slots;
    int64_t nfree;
    /* this batch's requests for this disk (under rd->mu) */
    int64_t *pending;
    int64_t npending, next_pending;
    /* completion queue: ring buffer of (req, slot), capacity = nslots (under rd->mu) */
    int64_t *cq;
    int64_t cq_cap, cq_head, cq_count;
    /* in flight (worker thread only, except inflight which submit() reads under mu) */
    ctx_t *ctx;
    int *free_ctx;
    int nfree_ctx;
    int inflight;     /* worker thread's own count */
    int inflight_pub; /* copy published under rd->mu (read by submit) */
    int qd;
    pthread_cond_t wake;
    /* stats (under rd->mu) */
    uint64_t requests, bytes, submit_calls, stolen, retries;
    int max_inflight;
    double io_seconds;
} disk_t;

typedef struct Reader {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cond; /* consumers: completions, errors, drained */
    int mu_init;
    int nfiles, ndisks;
    int *fds;
    int *disk_of;
    Py_buffer pool;
    int have_pool;
    char *base;
    int64_t slot_bytes, nslots, slots_per_reg;
    unsigned char *slot_state; /* 0 free (owned by its worker), 1 handed out, 2 being read */
    int32_t *slot_owner;
    disk_t *disks;
    /* batch */
    int32_t *b_file;
    int64_t *b_off, *b_len;
    int64_t b_cap, b_total, b_handed, b_completed;
    int64_t batch_no;
    /* error record (first wins) */
    int err_set, err_disk, err_file, err_errno;
    int64_t err_off, err_len, err_req;
    int stop, closed;
    int complete_batch; /* completions a worker waits for while it has more work queued */
    double wait_seconds;
    uint64_t get_calls;
} Reader;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ worker */

static void prep_read(disk_t *d, struct io_uring_sqe *sqe, int ci) {
    Reader *rd = d->rd;
    ctx_t *c = &d->ctx[ci];
    int32_t f = rd->b_file[c->req];
    int64_t off = rd->b_off[c->req] + c->done;
    int64_t len = rd->b_len[c->req] - c->done;
    char *addr = rd->base + c->slot * rd->slot_bytes + c->done;
    if (d->fixed_bufs) {
        sqe->opcode = IORING_OP_READ_FIXED;
        sqe->buf_index = (uint16_t)(c->slot / rd->slots_per_reg);
    } else {
        sqe->opcode = IORING_OP_READ;
    }
    if (d->fixed_files) {
        sqe->fd = f;
        sqe->flags = IOSQE_FIXED_FILE;
    } else {
        sqe->fd = rd->fds[f];
    }
    sqe->off = (uint64_t)off;
    sqe->addr = (uint64_t)(uintptr_t)addr;
    sqe->len = (uint32_t)len;
    sqe->user_data = (uint64_t)ci;
}

static void record_error(Reader *rd, int disk, int64_t req, int64_t done, int err) {
    /* under rd->mu */
    if (rd->err_set) return;
    rd->err_set = 1;
    rd->err_disk = disk;
    rd->err_file = rd->b_file[req];
    rd->err_off = rd->b_off[req];
    rd->err_len = rd->b_len[req];
    rd->err_errno = err;
    rd->err_req = req;
    (void)done;
}

/* Slots a disk can use now: its own free ones, plus those of disks with no queued work left in
 * this batch (borrowing keeps a consumer that holds all of one disk's slots from deadlocking
 * while another disk's slots sit idle). Under rd->mu. */
static int disk_idle(disk_t *q) { return q->next_pending >= q->npending; }

static int64_t usable_slots(Reader *rd, disk_t *d) {
    int64_t n = d->nfree;
    for (int i = 0; i < rd->ndisks; i++)
        if (i != d->index && disk_idle(&rd->disks[i])) n += rd->disks[i].nfree;
    return n;
}

static int64_t pop_slot(Reader *rd, disk_t *d) {
    if (d->nfree > 0) return d->free_slots[--d->nfree];
    for (int i = 0; i < rd->ndisks; i++) {
        disk_t *q = &rd->disks[i];
        if (i != d->index && disk_idle(q) && q->nfree > 0) return q->free_slots[--q->nfree];
    }
    return -1; /* not reached: callers check usable_slots() first */
}

static void push_slot(Reader *rd, int64_t s) {
    disk_t *o = &rd->disks[rd->slot_owner[s]];
    rd->slot_state[s] = 0;
    o->free_slots[o->nfree++] = s;
    if (!disk_idle(o)) {
        pthread_cond_signal(&o->wake);
    } else { /* the owner has nothing to read: a busy disk may borrow it */
        for (int i = 0; i < rd->ndisks; i++)
            if (!disk_idle(&rd->disks[i])) pthread_cond_signal(&rd->disks[i].wake);
    }
}

/* Outcome of one CQE: 0 = done, 1 = resubmit, -errno or -100000 (EOF) = failed. */
#define EOF_ERR (-100000)
static int handle_cqe(disk_t *d, ctx_t *c, int res) {
    Reader *rd = d->rd;
    int64_t len = rd->b_len[c->req];
    if (res == -EINTR || res == -EAGAIN) {
        return (++c->retries > MAX_RETRIES) ? res : 1;
    }
    if (res < 0) return res;
    if (res > 0) {
        c->done += res;
        if (c->done >= len) return 0;
    }
    /* short read or EOF: is the rest of the extent past the end of the file? */
    struct stat st;
    int fd = rd->fds[rd->b_file[c->req]];
    if (fstat(fd, &st) != 0) return -errno;
    int64_t pos = rd->b_off[c->req] + c->done;
    int64_t end = rd->b_off[c->req] + len;
    int64_t padded = ((int64_t)st.st_size + 511) / 512 * 512;
    if (pos >= (int64_t)st.st_size) {
        if (end <= padded) { /* only the 512-byte padding of the last block is missing */
            memset(rd->base + c->slot * rd->slot_bytes + c->done, 0, (size_t)(len - c->done));
            c->done = len;
            return 0;
        }
        return EOF_ERR;
    }
    if (res == 0) return EOF_ERR; /* EOF before the file size we see: file is changing */
    return (++c->retries > MAX_RETRIES) ? -EIO : 1;
}

static void *worker_main(void *arg) {
    disk_t *d = arg;
    Reader *rd = d->rd;
    ring_t *ring = &d->ring;
    int64_t *take_req = malloc(sizeof(int64_t) * d->qd);
    int64_t *take_slot = malloc(sizeof(int64_t) * d->qd);
    int64_t *done_pair = malloc(sizeof(int64_t) * 2 * (d->qd + 1));
    int *resub = malloc(sizeof(int) * (d->qd + 1));
    int64_t *ret_slots = malloc(sizeof(int64_t) * (d->qd + 1));
    double busy_since = 0;
    unsigned unsubmitted = 0;

    if (d->defer) {
        int rc = sys_register(ring->fd, REG_ENABLE_RINGS, NULL, 0);
        if (rc < 0) d->ring_error = -errno;
    }

    pthread_mutex_lock(&rd->mu);
    if (!take_req || !take_slot || !done_pair || !resub || !ret_slots) d->ring_error = -ENOMEM;
    for (;;) {
        if (d->ring_error && !rd->err_set && rd->b_handed < rd->b_total) {
            /* ring unusable: fail the batch instead of hanging */
            if (d->next_pending < d->npending) {
                record_error(rd, d->index, d->pending[d->next_pending], 0, -d->ring_error);
                pthread_cond_broadcast(&rd->cond);
            }
        }
        if (rd->stop && d->inflight == 0) break;
        int64_t avail = 0;
        int more_work = 0;
        if (!rd->stop && !rd->err_set && !d->ring_error) {
            avail = d->npending - d->next_pending;
            int64_t usable = avail > 0 ? usable_slots(rd, d) : 0;
            if (avail > usable) avail = usable;
            if (avail > d->qd - d->inflight) avail = d->qd - d->inflight;
            /* after this round, is there still queued work and a free slot for it? */
            more_work = d->npending - d->next_pending > avail && usable > avail;
        }
        if (avail == 0 && d->inflight == 0 && unsubmitted == 0) {
            pthread_cond_wait(&d->wake, &rd->mu);
            continue;
        }
        for (int64_t i = 0; i < avail; i++) {
            take_req[i] = d->pending[d->next_pending++];
            take_slot[i] = pop_slot(rd, d);
            rd->slot_state[take_slot[i]] = 2;
        }
        if (avail > 0 && disk_idle(d)) {
            /* this disk is done issuing: its spare slots may serve the others */
            for (int i = 0; i < rd->ndisks; i++)
                if (!disk_idle(&rd->disks[i])) pthread_cond_signal(&rd->disks[i].wake);
        }
        d->inflight_pub = d->inflight + (int)avail;
        pthread_mutex_unlock(&rd->mu);

        /* fill SQEs */
        for (int64_t i = 0; i < avail; i++) {
            int ci = d->free_ctx[--d->nfree_ctx];
            ctx_t *c = &d->ctx[ci];
            c->req = take_req[i];
            c->slot = take_slot[i];
            c->done = 0;
            c->retries = 0;
            struct io_uring_sqe *sqe = ring_get_sqe(ring);
            prep_read(d, sqe, ci); /* space guaranteed: inflight <= qd <= sq_entries */
            if (d->inflight == 0) busy_since = now_s();
            d->inflight++;
            unsubmitted++;
        }
        int peak = d->inflight;
        ring_publish(ring);

        /* one syscall: submit everything prepared and wait for at least one completion */
        /* wait for one completion, or for a batch of them while more work is queued (fewer
         * syscalls and wake-ups; the disk still has inflight - complete_batch reads queued) */
        unsigned min_complete = d->inflight > 0 ? 1 : 0;
        if (more_work && d->inflight >= rd->complete_batch) min_complete = (unsigned)rd->complete_batch;
        unsigned flags = min_complete ? IORING_ENTER_GETEVENTS : 0;
        int rc = sys_enter(ring->fd, unsubmitted, min_complete, flags);
        int enter_err = 0;
        if (rc < 0) {
            enter_err = errno;
        } else {
            unsubmitted -= (unsigned)rc;
        }

        /* reap */
        int ndone = 0, nresub = 0, nret = 0, failed = 0;
        int64_t fail_req = 0;
        int fail_err = 0;
        unsigned head = *ring->cq_head;
        unsigned tail = __atomic_load_n(ring->cq_tail, __ATOMIC_ACQUIRE);
        while (head != tail) {
            struct io_uring_cqe *cqe = &ring->cqes[head & *ring->cq_mask];
            int ci = (int)cqe->user_data;
            int res = cqe->res;
            head++;
            ctx_t *c = &d->ctx[ci];
            int out = handle_cqe(d, c, res);
            if (out == 1) {
                resub[nresub++] = ci;
                continue;
            }
            d->inflight--;
            d->free_ctx[d->nfree_ctx++] = ci;
            if (out == 0) {
                done_pair[2 * ndone] = c->req;
                done_pair[2 * ndone + 1] = c->slot;
                ndone++;
            } else {
                ret_slots[nret++] = c->slot;
                if (!failed) {
                    failed = 1;
                    fail_req = c->req;
                    fail_err = (out == EOF_ERR) ? 0 : -out;
                }
            }
            if (head - tail == 0) tail = __atomic_load_n(ring->cq_tail, __ATOMIC_ACQUIRE);
        }
        __atomic_store_n(ring->cq_head, head, __ATOMIC_RELEASE);
        for (int i = 0; i < nresub; i++) {
            struct io_uring_sqe *sqe = ring_get_sqe(ring); /* space: unsubmitted+nresub <= qd */
            prep_read(d, sqe, resub[i]);
            unsubmitted++;
        }
        if (nresub) ring_publish(ring);
        double t_idle = 0;
        if (d->inflight == 0 && (ndone || nret)) t_idle = now_s();

        pthread_mutex_lock(&rd->mu);
        d->submit_calls++;
        if (peak > d->max_inflight) d->max_inflight = peak;
        d->retries += nresub;
        if (t_idle > 0) d->io_seconds += t_idle - busy_since;
        if (enter_err && enter_err != EINTR && enter_err != EAGAIN && enter_err != EBUSY) {
            /* the ring itself failed: nothing more can complete here */
            d->ring_error = -enter_err;
            if (!rd->err_set) {
                int64_t r = d->next_pending > 0 ? d->pending[d->next_pending - 1] : 0;
                if (d->npending > 0) record_error(rd, d->index, r, 0, enter_err);
            }
            pthread_cond_broadcast(&rd->cond);
            if (d->inflight > 0 && unsubmitted >= (unsigned)d->inflight) {
                /* nothing reached the kernel: drop the in-flight bookkeeping */
                d->inflight = 0;
                unsubmitted = 0;
            }
        }
        for (int i = 0; i < ndone; i++) {
            int64_t q = d->index;
            disk_t *dq = &rd->disks[q];
            int64_t pos = (dq->cq_head + dq->cq_count) % dq->cq_cap;
            dq->cq[2 * pos] = done_pair[2 * i];
            dq->cq[2 * pos + 1] = done_pair[2 * i + 1];
            dq->cq_count++;
            d->requests++;
            d->bytes += (uint64_t)rd->b_len[done_pair[2 * i]];
        }
        rd->b_completed += ndone;
        d->inflight_pub = d->inflight;
        for (int i = 0; i < nret; i++) push_slot(rd, ret_slots[i]);
        if (failed) record_error(rd, d->index, fail_req, 0, fail_err);
        if (ndone || failed || d->inflight == 0) pthread_cond_broadcast(&rd->cond);
        if (d->ring_error && d->inflight > 0 && enter_err && enter_err != EINTR && enter_err != EAGAIN &&
            enter_err != EBUSY) {
            /* cannot reap what is in flight; avoid a busy loop */
            pthread_mutex_unlock(&rd->mu);
            usleep(1000);
            pthread_mutex_lock(&rd->mu);
        }
    }
    pthread_mutex_unlock(&rd->mu);
    free(take_req);
    free(take_slot);
    free(done_pair);
    free(resub);
    free(ret_slots);
    return NULL;
}

/* ------------------------------------------------------------------ Python type */

static void reader_shutdown(Reader *self) {
    if (self->closed) return;
    self->closed = 1;
    if (self->mu_init) {
        pthread_mutex_lock(&self->mu);
        self->stop = 1;
        for (int i = 0; i < self->ndisks; i++) pthread_cond_signal(&self->disks[i].wake);
        pthread_cond_broadcast(&self->cond);
        pthread_mutex_unlock(&self->mu);
    }
    if (self->disks) {
        for (int i = 0; i < self->ndisks; i++) {
            disk_t *d = &self->disks[i];
            if (d->thread_started) {
                Py_BEGIN_ALLOW_THREADS
                pthread_join(d->thread, NULL);
                Py_END_ALLOW_THREADS
                d->thread_started = 0;
            }
            ring_free(&d->ring);
        }
    }
    if (self->have_pool) {
        PyBuffer_Release(&self->pool);
        self->have_pool = 0;
    }
}

static void reader_free_mem(Reader *self) {
    if (self->disks) {
        for (int i = 0; i < self->ndisks; i++) {
            disk_t *d = &self->disks[i];
            free(d->free_slots);
            free(d->pending);
            free(d->cq);
            free(d->ctx);
            free(d->free_ctx);
            pthread_cond_destroy(&d->wake);
        }
        free(self->disks);
        self->disks = NULL;
    }
    free(self->fds);
    free(self->disk_of);
    free(self->slot_state);
    free(self->slot_owner);
    free(self->b_file);
    free(self->b_off);
    free(self->b_len);
    self->fds = NULL;
    self->disk_of = NULL;
    self->slot_state = NULL;
    self->slot_owner = NULL;
    self->b_file = NULL;
    self->b_off = self->b_len = NULL;
}

static void Reader_dealloc(Reader *self) {
    reader_shutdown(self);
    reader_free_mem(self);
    if (self->mu_init) {
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->cond);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int seq_to_ints(PyObject *seq, int **out, int *n, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    int *a = malloc(sizeof(int) * (k ? k : 1));
    if (!a) { Py_DECREF(fast); PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < k; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) { free(a); Py_DECREF(fast); return -1; }
        a[i] = (int)v;
    }
    Py_DECREF(fast);
    *out = a;
    *n = (int)k;
    return 0;
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"fds", "disk_of", "pool", "slot_bytes", "nslots", "queue_depth",
                             "fixed_buffers", "fixed_files", "defer_taskrun", "complete_batch", NULL};
    PyObject *fds_o, *disk_o, *pool_o;
    long long slot_bytes, nslots;
    int qd = 64, want_fixed_bufs = 1, want_fixed_files = 1, want_defer = 1, cbatch = 0;
    if (self->fds || self->disks) {
        PyErr_SetString(PyExc_RuntimeError, "Reader already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOLL|ipppi", kwlist, &fds_o, &disk_o, &pool_o,
                                     &slot_bytes, &nslots, &qd, &want_fixed_bufs, &want_fixed_files,
                                     &want_defer, &cbatch))
        return -1;
    int nf = 0, nd = 0;
    if (seq_to_ints(fds_o, &self->fds, &nf, "fds must be a sequence of ints") < 0) return -1;
    if (seq_to_ints(disk_o, &self->disk_of, &nd, "disk_of must be a sequence of ints") < 0) return -1;
    if (nf != nd || nf == 0) {
        PyErr_SetString(PyExc_ValueError, "fds and disk_of must be non-empty and of equal length");
        return -1;
    }
    self->nfiles = nf;
    /* 0 = auto: qd/8: fewer syscalls and thread wake-ups than one per completion while >= 7/8
     * of the queue stays busy (tools/bench_io.py, 4 KB QD64, ratio to fio in interleaved rounds:
     * qd/8 0.92-0.94, qd/4 0.87-0.89, 1 0.89; CPU per request the same) */
    self->complete_batch = cbatch > 0 ? cbatch : (qd / 8 > 0 ? qd / 8 : 1);
    int ndisks = 0;
    for (int i = 0; i < nf; i++) {
        if (self->disk_of[i] < 0 || self->disk_of[i] > 4095) {
            PyErr_SetString(PyExc_ValueError, "disk index out of range");
            return -1;
        }
        if (self->disk_of[i] + 1 > ndisks) ndisks = self->disk_of[i] + 1;
    }
    if (slot_bytes <= 0 || slot_bytes % 512 != 0 || slot_bytes > (1LL << 30)) {
        PyErr_SetString(PyExc_ValueError, "slot_bytes must be a positive multiple of 512, at most 1 GiB");
        return -1;
    }
    if (qd < 1 || qd > 4096) {
        PyErr_SetString(PyExc_ValueError, "queue_depth must be in 1..4096");
        return -1;
    }
    if (PyObject_GetBuffer(pool_o, &self->pool, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->have_pool = 1;
    if (nslots <= 0 || (long long)self->pool.len < slot_bytes * nslots) {
        PyErr_SetString(PyExc_ValueError, "pool buffer smaller than nslots * slot_bytes");
        return -1;
    }
    self->base = self->pool.buf;
    self->slot_bytes = slot_bytes;
    self->nslots = nslots;
    self->slots_per_reg = (int64_t)(REG_CHUNK / (uint64_t)slot_bytes);
    self->ndisks = ndisks;

    /* which disks have files: only those get slots and workers */
    int *has = calloc(ndisks, sizeof(int));
    int nactive = 0;
    for (int i = 0; i < nf; i++) has[self->disk_of[i]] = 1;
    for (int i = 0; i < ndisks; i++) nactive += has[i];
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cond, NULL);
    self->mu_init = 1;
    self->slot_state = calloc(nslots, 1);
    self->slot_owner = malloc(sizeof(int32_t) * nslots);
    self->disks = calloc(ndisks, sizeof(disk_t));
    if (!self->slot_state || !self->slot_owner || !self->disks) {
        free(has);
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < ndisks; i++) {
        self->disks[i].ring.fd = -1;
        pthread_cond_init(&self->disks[i].wake, NULL);
    }
    int k = 0;
    for (int i = 0; i < ndisks; i++) {
        disk_t *d = &self->disks[i];
        d->rd = self;
        d->index = i;
        d->has_files = has[i];
        if (has[i]) {
            d->slot_lo = (int64_t)k * nslots / nactive;
            d->slot_hi = (int64_t)(k + 1) * nslots / nactive;
            k++;
        }
        int64_t ns = d->slot_hi - d->slot_lo;
        d->qd = qd;
        d->free_slots = malloc(sizeof(int64_t) * (ns ? ns : 1));
        d->cq_cap = nslots; /* with borrowing, a disk may hold any slot */
        d->cq = malloc(sizeof(int64_t) * 2 * d->cq_cap);
        d->ctx = malloc(sizeof(ctx_t) * qd);
        d->free_ctx = malloc(sizeof(int) * qd);
        if (!d->free_slots || !d->cq || !d->ctx || !d->free_ctx) {
            free(has);
            PyErr_NoMemory();
            return -1;
        }
        /* stack: lowest slot popped first */
        d->nfree = 0;
        for (int64_t s = d->slot_hi - 1; s >= d->slot_lo; s--) {
            d->free_slots[d->nfree++] = s;
            self->slot_owner[s] = i;
        }
        for (int c = 0; c < qd; c++) d->free_ctx[c] = qd - 1 - c;
        d->nfree_ctx = qd;
    }
    free(has);

    /* rings */
    for (int i = 0; i < ndisks; i++) {
        disk_t *d = &self->disks[i];
        if (!d->has_files) continue;
        int rc = -EINVAL;
        if (want_defer) {
            rc = ring_init(&d->ring, (unsigned)qd,
                           IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                               IORING_SETUP_R_DISABLED);
            if (rc == 0) d->defer = 1;
        }
        if (rc != 0 && rc != -ENOSYS && rc != -EPERM && rc != -ENOMEM) rc = ring_init(&d->ring, (unsigned)qd, 0);
        if (rc != 0) {
            /* OSError(errno, text): `auto` engine selection catches it and falls back */
            PyObject *e = PyObject_CallFunction(PyExc_OSError, "is", -rc,
                                                "io_uring_setup failed (io_uring unavailable?)");
            if (e) {
                PyErr_SetObject((PyObject *)Py_TYPE(e), e);
                Py_DECREF(e);
            }
            return -1;
        }
        if (want_fixed_bufs) {
            int64_t nreg = (nslots + self->slots_per_reg - 1) / self->slots_per_reg;
            struct iovec *iov = malloc(sizeof(struct iovec) * nreg);
            if (iov) {
                for (int64_t j = 0; j < nreg; j++) {
                    int64_t s0 = j * self->slots_per_reg;
                    int64_t s1 = s0 + self->slots_per_reg;
                    if (s1 > nslots) s1 = nslots;
                    iov[j].iov_base = self->base + s0 * slot_bytes;
                    iov[j].iov_len = (size_t)((s1 - s0) * slot_bytes);
                }
                if (nreg <= 16384 && sys_register(d->ring.fd, IORING_REGISTER_BUFFERS, iov, (unsigned)nreg) == 0)
                    d->fixed_bufs = 1;
                free(iov);
            }
        }
        if (want_fixed_files) {
            if (sys_register(d->ring.fd, IORING_REGISTER_FILES, self->fds, (unsigned)nf) == 0)
                d->fixed_files = 1;
        }
    }
    /* workers */
    for (int i = 0; i < ndisks; i++) {
        disk_t *d = &self->disks[i];
        if (!d->has_files) continue;
        int rc = pthread_create(&d->thread, NULL, worker_main, d);
        if (rc != 0) {
            PyErr_Format(PyExc_OSError, "pthread_create failed: %s", strerror(rc));
            return -1;
        }
        d->thread_started = 1;
    }
    return 0;
}

static int get_buf(PyObject *o, Py_buffer *b, Py_ssize_t itemsize, const char *name, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, b, flags) < 0) return -1;
    if (b->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s must have %zd-byte items", name, itemsize);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *Reader_submit(Reader *self, PyObject *args) {
    PyObject *fo, *oo, *lo;
    if (!PyArg_ParseTuple(args, "OOO", &fo, &oo, &lo)) return NULL;
    if (self->closed) {
        PyErr_SetString(PyExc_RuntimeError, "engine is closed");
        return NULL;
    }
    Py_buffer fb, ob, lb;
    if (get_buf(fo, &fb, 4, "file_ids", 0) < 0) return NULL;
    if (get_buf(oo, &ob, 8, "offsets", 0) < 0) { PyBuffer_Release(&fb); return NULL; }
    if (get_buf(lo, &lb, 8, "lengths", 0) < 0) { PyBuffer_Release(&fb); PyBuffer_Release(&ob); return NULL; }
    PyObject *ret = NULL;
    int64_t k = fb.len / 4;
    const int32_t *F = fb.buf;
    const int64_t *O = ob.buf, *L = lb.buf;
    if (ob.len / 8 != k || lb.len / 8 != k) {
        PyErr_SetString(PyExc_ValueError, "file_ids, offsets and lengths differ in length");
        goto out;
    }
    for (int64_t i = 0; i < k; i++) {
        if (F[i] < 0 || F[i] >= self->nfiles) {
            PyErr_Format(PyExc_ValueError, "request %lld: file id %d out of range", (long long)i, F[i]);
            goto out;
        }
        if (O[i] < 0 || O[i] % 512 || L[i] <= 0 || L[i] % 512 || L[i] > self->slot_bytes) {
            PyErr_Format(PyExc_ValueError,
                         "request %lld: offset %lld length %lld must be 512-aligned with "
                         "0 < length <= slot_bytes (%lld)",
                         (long long)i, (long long)O[i], (long long)L[i], (long long)self->slot_bytes);
            goto out;
        }
    }
    int busy = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    if (self->b_handed < self->b_total && !self->err_set) {
        busy = 1;
    } else {
        /* wait until nothing of the previous batch is in flight (after an error) */
        for (;;) {
            int inflight = 0;
            for (int i = 0; i < self->ndisks; i++) inflight += self->disks[i].inflight_pub;
            if (inflight == 0 || self->stop) break;
            pthread_cond_wait(&self->cond, &self->mu);
        }
    }
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (busy) {
        PyErr_SetString(PyExc_RuntimeError, "submit() while the previous batch is still being read");
        goto out;
    }
    /* grow batch arrays (GIL held; workers are idle on this batch) */
    pthread_mutex_lock(&self->mu);
    if (k > self->b_cap) {
        int32_t *nf = realloc(self->b_file, sizeof(int32_t) * k);
        if (nf) self->b_file = nf;
        int64_t *no = realloc(self->b_off, sizeof(int64_t) * k);
        if (no) self->b_off = no;
        int64_t *nl = realloc(self->b_len, sizeof(int64_t) * k);
        if (nl) self->b_len = nl;
        int ok = nf && no && nl;
        for (int i = 0; ok && i < self->ndisks; i++) {
            int64_t *np_ = realloc(self->disks[i].pending, sizeof(int64_t) * k);
            if (np_) self->disks[i].pending = np_; else ok = 0;
        }
        if (!ok) {
            pthread_mutex_unlock(&self->mu);
            PyErr_NoMemory();
            goto out;
        }
        self->b_cap = k;
    }
    /* undelivered completions of a failed batch: their slots go back */
    for (int i = 0; i < self->ndisks; i++) {
        disk_t *d = &self->disks[i];
        while (d->cq_count > 0) {
            int64_t s = d->cq[2 * d->cq_head + 1];
            d->cq_head = (d->cq_head + 1) % d->cq_cap;
            d->cq_count--;
            push_slot(self, s);
        }
        d->cq_head = 0;
        d->npending = d->next_pending = 0;
    }
    memcpy(self->b_file, F, sizeof(int32_t) * k);
    memcpy(self->b_off, O, sizeof(int64_t) * k);
    memcpy(self->b_len, L, sizeof(int64_t) * k);
    for (int64_t i = 0; i < k; i++) {
        disk_t *d = &self->disks[self->disk_of[F[i]]];
        d->pending[d->npending++] = i;
    }
    self->b_total = k;
    self->b_handed = 0;
    self->b_completed = 0;
    self->err_set = 0;
    self->batch_no++;
    for (int i = 0; i < self->ndisks; i++)
        if (self->disks[i].npending) pthread_cond_signal(&self->disks[i].wake);
    pthread_mutex_unlock(&self->mu);
    ret = Py_None;
    Py_INCREF(ret);
out:
    PyBuffer_Release(&fb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&lb);
    return ret;
}

/* take up to max_n completions from disk q into out; under mu */
static int64_t take_from(Reader *self, int q, int64_t *out, int64_t max_n) {
    disk_t *d = &self->disks[q];
    int64_t n = 0;
    while (n < max_n && d->cq_count > 0) {
        out[2 * n] = d->cq[2 * d->cq_head];
        out[2 * n + 1] = d->cq[2 * d->cq_head + 1];
        d->cq_head = (d->cq_head + 1) % d->cq_cap;
        d->cq_count--;
        n++;
    }
    return n;
}

static PyObject *Reader_get(Reader *self, PyObject *args) {
    int disk;
    Py_ssize_t max_n;
    PyObject *outo;
    if (!PyArg_ParseTuple(args, "inO", &disk, &max_n, &outo)) return NULL;
    Py_buffer ob;
    if (get_buf(outo, &ob, 8, "out", 1) < 0) return NULL;
    if (max_n < 1 || ob.len / 8 < 2 * max_n) {
        PyBuffer_Release(&ob);
        PyErr_SetString(PyExc_ValueError, "out must hold 2*max_n int64 and max_n >= 1");
        return NULL;
    }
    if (self->ndisks > 0) disk = ((disk % self->ndisks) + self->ndisks) % self->ndisks;
    int64_t *out = ob.buf;
    int64_t n = 0;
    int state = 0; /* 0 ok, 1 error, 2 closed, 3 timed out: check for signals and wait again */
    int e_disk = 0, e_file = 0, e_errno = 0;
    int64_t e_off = 0, e_len = 0, e_req = 0;
    int first = 1;
again:
    state = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    double t0 = 0;
    if (first) self->get_calls++;
    first = 0;
    for (;;) {
        if (self->err_set) {
            state = 1;
            e_disk = self->err_disk; e_file = self->err_file; e_errno = self->err_errno;
            e_off = self->err_off; e_len = self->err_len; e_req = self->err_req;
            break;
        }
        if (self->stop) { state = 2; break; }
        n = take_from(self, disk, out, max_n);
        if (n == 0) {
            for (int j = 1; j < self->ndisks && n < max_n; j++) {
                int q = (disk + j) % self->ndisks;
                int64_t m = take_from(self, q, out + 2 * n, max_n - n);
                self->disks[disk].stolen += m; /* counted for the consumer's disk */
                n += m;
            }
        }
        if (n > 0) {
            self->b_handed += n;
            for (int64_t i = 0; i < n; i++) self->slot_state[out[2 * i + 1]] = 1;
            break;
        }
        if (self->b_handed >= self->b_total) break;
        if (t0 == 0) t0 = now_s();
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 200 * 1000 * 1000; /* wake up now and then so Ctrl-C works */
        if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
        if (pthread_cond_timedwait(&self->cond, &self->mu, &dl) == ETIMEDOUT) { state = 3; break; }
    }
    if (t0 != 0) self->wait_seconds += now_s() - t0;
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    if (state == 3) {
        if (PyErr_CheckSignals() < 0) {
            PyBuffer_Release(&ob);
            return NULL;
        }
        goto again;
    }
    PyBuffer_Release(&ob);
    if (state == 1) {
        PyObject *t = Py_BuildValue("(iiLLiL)", e_disk, e_file, (long long)e_off, (long long)e_len,
                                    e_errno, (long long)e_req);
        if (t) {
            PyErr_SetObject(ReadError, t);
            Py_DECREF(t);
        }
        return NULL;
    }
    if (state == 2) {
        PyErr_SetString(PyExc_RuntimeError, "engine is closed");
        return NULL;
    }
    return PyLong_FromLongLong(n);
}

static PyObject *Reader_release(Reader *self, PyObject *args) {
    PyObject *so;
    if (!PyArg_ParseTuple(args, "O", &so)) return NULL;
    Py_buffer sb;
    if (get_buf(so, &sb, 8, "slots", 0) < 0) return NULL;
    const int64_t *S = sb.buf;
    int64_t k = sb.len / 8;
    int64_t bad = -1;
    int why = 0;
    if (self->closed) {
        PyBuffer_Release(&sb);
        Py_RETURN_NONE; /* nothing to give back to */
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mu);
    for (int64_t i = 0; i < k; i++) {
        int64_t s = S[i];
        if (s < 0 || s >= self->nslots) { bad = s; why = 1; break; }
        if (self->slot_state[s] != 1) { bad = s; why = 2; break; }
        push_slot(self, s);
    }
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&sb);
    if (why == 1) {
        PyErr_Format(PyExc_ValueError, "slot %lld out of range", (long long)bad);
        return NULL;
    }
    if (why == 2) {
        PyErr_Format(PyExc_ValueError, "slot %lld released but not held (double release?)", (long long)bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Reader_stats(Reader *self, PyObject *noargs) {
    PyObject *per = PyList_New(0);
    if (!per) return NULL;
    unsigned long long req = 0, byt = 0, subm = 0, stolen = 0, retr = 0;
    double io = 0;
    int maxin = 0;
    int fb = 1, ff = 1, df = 1, any = 0;
    if (self->mu_init) pthread_mutex_lock(&self->mu);
    for (int i = 0; self->disks && i < self->ndisks; i++) {
        disk_t *d = &self->disks[i];
        req += d->requests; byt += d->bytes; subm += d->submit_calls; stolen += d->stolen;
        retr += d->retries; io += d->io_seconds;
        if (d->max_inflight > maxin) maxin = d->max_inflight;
        if (d->has_files) {
            any = 1;
            fb &= d->fixed_bufs; ff &= d->fixed_files; df &= d->defer;
        }
        PyObject *dd = Py_BuildValue(
            "{s:i,s:K,s:K,s:d,s:i,s:K,s:K,s:K,s:L}", "disk", i, "requests",
            (unsigned long long)d->requests, "bytes", (unsigned long long)d->bytes, "io_seconds",
            d->io_seconds, "max_inflight", d->max_inflight, "submit_calls",
            (unsigned long long)d->submit_calls, "stolen", (unsigned long long)d->stolen, "retries",
            (unsigned long long)d->retries, "slots", (long long)(d->slot_hi - d->slot_lo));
        if (dd) { PyList_Append(per, dd); Py_DECREF(dd); }
    }
    double wait = self->wait_seconds;
    unsigned long long gets = self->get_calls;
    if (self->mu_init) pthread_mutex_unlock(&self->mu);
    if (!any) fb = ff = df = 0;
    PyObject *r = Py_BuildValue(
        "{s:K,s:K,s:d,s:i,s:K,s:d,s:K,s:K,s:K,s:O,s:O,s:O,s:N}", "requests", req, "bytes", byt,
        "io_seconds", io, "max_inflight", maxin, "submit_calls", subm, "wait_seconds", wait,
        "get_calls", gets, "stolen", stolen, "retries", retr, "fixed_buffers", fb ? Py_True : Py_False,
        "fixed_files", ff ? Py_True : Py_False, "defer_taskrun", df ? Py_True : Py_False, "per_disk", per);
    return r;
}

static PyObject *Reader_close(Reader *self, PyObject *noargs) {
    reader_shutdown(self);
    Py_RETURN_NONE;
}

static PyObject *Reader_closed(Reader *self, void *c) { return PyBool_FromLong(self->closed); }

static PyMethodDef Reader_methods[] = {
    {"submit", (PyCFunction)Reader_submit, METH_VARARGS,
     "submit(file_ids int32, offsets int64, lengths int64): start a batch"},
    {"get", (PyCFunction)Reader_get, METH_VARARGS,
     "get(disk, max_n, out int64[2*max_n]) -> n; blocks with the GIL released; 0 = batch done"},
    {"release", (PyCFunction)Reader_release, METH_VARARGS, "release(slots int64): give slots back"},
    {"stats", (PyCFunction)Reader_stats, METH_NOARGS, "cumulative statistics (dict)"},
    {"close", (PyCFunction)Reader_close, METH_NOARGS, "stop workers and free the rings (idempotent)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Reader_getset[] = {
    {"closed", (getter)Reader_closed, NULL, "whether close() ran", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "graphene_py._uring.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(fds, disk_of, pool, slot_bytes, nslots, queue_depth=64, fixed_buffers=True, "
              "fixed_files=True, defer_taskrun=True, complete_batch=0): io_uring reader, one ring and thread per disk",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
    .tp_getset = Reader_getset,
};

/* probe(): 0 if io_uring_setup works here, else the errno */
static PyObject *mod_probe(PyObject *m, PyObject *noargs) {
    ring_t r;
    int rc = ring_init(&r, 4, 0);
    if (rc == 0) ring_free(&r);
    return PyLong_FromLong(rc == 0 ? 0 : -rc);
}

/* csrc/crc32c.c: page checksums */
PyObject *gp_crc32c(PyObject *m, PyObject *args);
PyObject *gp_page_crcs(PyObject *m, PyObject *args);
PyObject *gp_check_pages(PyObject *m, PyObject *args);
PyObject *gp_crc32c_hw(PyObject *m, PyObject *noargs);
/* csrc/warm.c: the files a command's start reads, asked for ahead */
PyObject *gp_warm_files(PyObject *m, PyObject *args);

static PyMethodDef mod_methods[] = {
    {"probe", mod_probe, METH_NOARGS, "probe() -> 0 if io_uring works, else errno"},
    {"crc32c", gp_crc32c, METH_VARARGS, "crc32c(buffer, crc=0, software=False) -> int"},
    {"page_crcs", gp_page_crcs, METH_VARARGS, "page_crcs(buffer, page_size) -> bytes (uint32 LE per page)"},
    {"check_pages", gp_check_pages, METH_VARARGS,
     "check_pages(buf, rows, n, col, req_file, req_off, req_len, table, table_base, file_size, "
     "page_shift) -> None or (row, page offset, expected, got)"},
    {"crc32c_hardware", gp_crc32c_hw, METH_NOARGS, "whether the SSE4.2 crc32 instruction is used"},
    {"warm_files", gp_warm_files, METH_VARARGS,
     "warm_files(paths, threads) -> threads started: stat each .py, readahead (WILLNEED) the rest, "
     "on detached native threads; returns at once"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_uring",
                                 "Native io_uring engine (kernel interface, one ring/thread per disk)",
                                 -1, mod_methods};

PyMODINIT_FUNC PyInit__uring(void) {
    if (PyType_Ready(&ReaderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&mod);
    if (!m) return NULL;
    ReadError = PyErr_NewException("graphene_py._uring.ReadError", PyExc_Exception, NULL);
    Py_INCREF(ReadError);
    PyModule_AddObject(m, "ReadError", ReadError);
    Py_INCREF(&ReaderType);
    PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType);
    return m;
}
