/*
 * graphene_py._uring.warm_files: ask the kernel for the files a command's start will read, ahead of
 * the imports that read them (graphene_py/startfiles.py).
 *
 * A fresh `graphene run` on a cold page cache imports ~270 files (numpy's libraries, click, the
 * compiled kernels, its own modules), one after another: each open waits for its directory and
 * inode blocks, each page fault of a library for its read. Here a few detached native threads go
 * through the list at once, without the GIL: stat a source file (its inode, which the import
 * checks against the bytecode); open anything else and POSIX_FADV_WILLNEED its whole length
 * (asynchronous readahead into the page cache). The call returns at once; nothing is ever read
 * into this process, and a path that fails is skipped.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char **paths;
    Py_ssize_t n;
    Py_ssize_t next;      /* the next path to take (atomic) */
    int live;             /* threads still running (atomic): the last one frees the list */
} warm_t;

static void warm_free(warm_t *w) {
    for (Py_ssize_t i = 0; i < w->n; i++) free(w->paths[i]);
    free(w->paths);
    free(w);
}

static void *warm_worker(void *arg) {
    warm_t *w = arg;
    for (;;) {
        Py_ssize_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (i >= w->n) break;
        char *p = w->paths[i];
        char *ranges = strchr(p, '\t');
        if (ranges) *ranges++ = '\0';
        size_t len = strlen(p);
        if (len > 3 && strcmp(p + len - 3, ".py") == 0) {
            struct stat st;
            (void)stat(p, &st);
            continue;
        }
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) continue;
        if (!ranges) {
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
        } else {
            /* off+len,off+len,... (decimal); a malformed tail is ignored */
            char *q = ranges, *end;
            while (*q) {
                unsigned long long off = strtoull(q, &end, 10);
                if (end == q || *end != '+') break;
                q = end + 1;
                unsigned long long n = strtoull(q, &end, 10);
                if (end == q) break;
                if (n && off <= INT64_MAX && n <= INT64_MAX)
                    (void)posix_fadvise(fd, (off_t)off, (off_t)n, POSIX_FADV_WILLNEED);
                q = end;
                if (*q == ',') q++;
                else break;
            }
        }
        close(fd);
    }
    if (__atomic_sub_fetch(&w->live, 1, __ATOMIC_ACQ_REL) == 0) warm_free(w);
    return NULL;
}

/* warm_files(paths: sequence of str, threads: int) -> int: the threads started (0: none could be) */
PyObject *gp_warm_files(PyObject *m, PyObject *args) {
    PyObject *seq;
    int threads;
    if (!PyArg_ParseTuple(args, "Oi", &seq, &threads)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "warm_files: paths must be a sequence of str");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    warm_t *w = calloc(1, sizeof(*w));
    char **paths = calloc(n ? (size_t)n : 1, sizeof(char *));
    if (!w || !paths) {
        free(w);
        free(paths);
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    w->paths = paths;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(fast, i);
        const char *c = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (!c) {
            Py_DECREF(fast);
            warm_free(w);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "warm_files: paths must be str");
            return NULL;
        }
        if (!(w->paths[w->n] = strdup(c))) {
            Py_DECREF(fast);
            warm_free(w);
            return PyErr_NoMemory();
        }
        w->n++;
    }
    Py_DECREF(fast);
    if (threads < 1 || n == 0) {
        warm_free(w);
        return PyLong_FromLong(0);
    }
    if (threads > n) threads = (int)n;
    w->live = threads;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int started = 0;
    for (int t = 0; t < threads; t++) {
        pthread_t tid;
        if (pthread_create(&tid, &attr, warm_worker, w) == 0) {
            started++;
        }
    }
    pthread_attr_destroy(&attr);
    /* threads that never started leave their share of `live` here; the list is freed by whoever
       brings it to zero (here, when none started) */
    if (started < threads && __atomic_sub_fetch(&w->live, threads - started, __ATOMIC_ACQ_REL) == 0)
        warm_free(w);
    return PyLong_FromLong(started);
}
