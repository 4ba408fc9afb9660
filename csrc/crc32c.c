/* CRC32C (Castagnoli) page checksums for graphene_py datasets.
 *
 * Every adjacency and weight file has a table of one CRC32C per 4 KB page (the last page may be
 * shorter), written by the partitioner. Reads verify the pages of every extent as it arrives
 * (check_pages), so damaged data is an error naming the file and byte offset, never a wrong answer.
 *
 * The SSE4.2 crc32 instruction is used when the CPU has it (checked at run time with
 * __builtin_cpu_supports; never assumed), else a slicing-by-8 table: the same values either way.
 * The GIL is released while checksumming.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table8[8][256];
static void shift_init(void);
static int have_hw = 0;
static int ready = 0;

static void crc_init(void) {
    if (ready) return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        table8[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table8[t][i] = (table8[t - 1][i] >> 8) ^ table8[0][table8[t - 1][i] & 0xff];
    shift_init();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    have_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    ready = 1;
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n && ((uintptr_t)p & 7)) { crc = (crc >> 8) ^ table8[0][(crc ^ *p++) & 0xff]; n--; }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table8[7][w & 0xff] ^ table8[6][(w >> 8) & 0xff] ^ table8[5][(w >> 16) & 0xff] ^
              table8[4][(w >> 24) & 0xff] ^ table8[3][(w >> 32) & 0xff] ^
              table8[2][(w >> 40) & 0xff] ^ table8[1][(w >> 48) & 0xff] ^ table8[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ table8[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

/* Appending zeros to a CRC register is linear over GF(2): shift_tab[k][b] is the register that
 * byte b at position k (little-endian) becomes after SHIFT_LEN zero bytes. Three streams of
 * SHIFT_LEN bytes then run in parallel (the crc32 instruction has a latency of 3 cycles and a
 * throughput of 1) and are joined: crc(A B) = shift(crc(A)) ^ crc(B) on the raw register. */
#define SHIFT_LEN 1360
static uint32_t shift_tab[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1) sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void compose(uint32_t *out, const uint32_t *a, const uint32_t *b) {   /* out = a o b */
    uint32_t t[32];
    for (int n = 0; n < 32; n++) t[n] = gf2_times(a, b[n]);
    memcpy(out, t, sizeof(t));
}

static void shift_init(void) {
    /* M = the operator of one zero bit, squared three times: one zero byte; then M^SHIFT_LEN */
    uint32_t m[32], r[32];
    m[0] = POLY;
    for (int n = 1; n < 32; n++) m[n] = 1u << (n - 1);
    for (int k = 0; k < 3; k++) compose(m, m, m);
    for (int n = 0; n < 32; n++) r[n] = 1u << n;
    for (uint32_t len = SHIFT_LEN; len; len >>= 1) {
        if (len & 1) compose(r, m, r);
        compose(m, m, m);
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) shift_tab[k][b] = gf2_times(r, b << (8 * k));
}

static inline uint32_t shift(uint32_t c) {
    return shift_tab[0][c & 0xff] ^ shift_tab[1][(c >> 8) & 0xff] ^ shift_tab[2][(c >> 16) & 0xff] ^
           shift_tab[3][c >> 24];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) { c = __builtin_ia32_crc32qi((uint32_t)c, *p++); n--; }
    while (n >= 3 * SHIFT_LEN) {
        uint64_t c1 = 0, c2 = 0, w0, w1, w2;
        const uint8_t *end = p + SHIFT_LEN;
        do {
            memcpy(&w0, p, 8);
            memcpy(&w1, p + SHIFT_LEN, 8);
            memcpy(&w2, p + 2 * SHIFT_LEN, 8);
            c = __builtin_ia32_crc32di(c, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
            p += 8;
        } while (p < end);
        c = shift((uint32_t)c) ^ (uint32_t)c1;
        c = shift((uint32_t)c) ^ (uint32_t)c2;
        p += 2 * SHIFT_LEN;
        n -= 3 * SHIFT_LEN;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

static inline uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n) {
#if defined(__x86_64__)
    if (have_hw) return crc_hw(crc, p, n);
#endif
    return crc_sw(crc, p, n);
}

/* crc32c(buffer, crc=0, software=False) -> int */
PyObject *gp_crc32c(PyObject *m, PyObject *args) {
    Py_buffer b;
    unsigned int crc = 0;
    int sw = 0;
    if (!PyArg_ParseTuple(args, "y*|Ip", &b, &crc, &sw)) return NULL;
    crc_init();
    uint32_t r;
    Py_BEGIN_ALLOW_THREADS
    r = sw ? crc_sw(crc, (const uint8_t *)b.buf, (size_t)b.len)
           : crc32c(crc, (const uint8_t *)b.buf, (size_t)b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(r);
}

/* page_crcs(buffer, page_size) -> bytes: one little-endian uint32 CRC32C per page (last may be short) */
PyObject *gp_page_crcs(PyObject *m, PyObject *args) {
    Py_buffer b;
    Py_ssize_t page;
    if (!PyArg_ParseTuple(args, "y*n", &b, &page)) return NULL;
    if (page <= 0) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "page_size must be > 0");
        return NULL;
    }
    crc_init();
    Py_ssize_t npages = (b.len + page - 1) / page;
    PyObject *out = PyBytes_FromStringAndSize(NULL, npages * 4);
    if (!out) { PyBuffer_Release(&b); return NULL; }
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    const uint8_t *p = (const uint8_t *)b.buf;
    Py_ssize_t len = b.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < npages; i++) {
        Py_ssize_t n = len - i * page < page ? len - i * page : page;
        uint32_t c = crc32c(0, p + i * page, (size_t)n);
        o[4 * i] = c & 0xff; o[4 * i + 1] = (c >> 8) & 0xff;
        o[4 * i + 2] = (c >> 16) & 0xff; o[4 * i + 3] = c >> 24;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return out;
}

/* check_pages(buf, rows, n, col, req_file, req_off, req_len, table, table_base, file_size,
 *             page_shift) -> None, or (row, byte offset of the bad page, expected, got)
 *
 * rows: int64 (>= n, 3), row k = (request r, byte position of column 1 data in buf, of column 2);
 * `col` picks the position column. Request r read req_len[r] bytes of file req_file[r] at
 * req_off[r]. table[table_base[f] + p] is the CRC32C of page p of file f, whose size is
 * file_size[f]. Every page that the extent covers whole (or up to the end of the file) is checked. */
PyObject *gp_check_pages(PyObject *m, PyObject *args) {
    Py_buffer buf, rows, rf, ro, rl, tab, tb, fs;
    Py_ssize_t n;
    int col, shift;
    if (!PyArg_ParseTuple(args, "y*y*niy*y*y*y*y*y*i", &buf, &rows, &n, &col, &rf, &ro, &rl, &tab,
                          &tb, &fs, &shift))
        return NULL;
    crc_init();
    const int64_t *R = (const int64_t *)rows.buf;
    const int32_t *RF = (const int32_t *)rf.buf;
    const int64_t *RO = (const int64_t *)ro.buf;
    const int64_t *RL = (const int64_t *)rl.buf;
    const uint32_t *T = (const uint32_t *)tab.buf;
    const int64_t *TB = (const int64_t *)tb.buf;
    const int64_t *FS = (const int64_t *)fs.buf;
    const uint8_t *B = (const uint8_t *)buf.buf;
    int64_t page = (int64_t)1 << shift;
    Py_ssize_t nreq = rf.len / 4, nfiles = fs.len / 8, ntab = tab.len / 4;
    Py_ssize_t bad_row = -1;
    int64_t bad_off = 0;
    uint32_t want = 0, got = 0;
    int range_err = 0;
    if (col < 1 || col > 2 || rows.len < n * 24) range_err = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n && !range_err && bad_row < 0; k++) {
        int64_t r = R[3 * k], pos = R[3 * k + col];
        if (r < 0 || r >= nreq) { range_err = 1; break; }
        int32_t f = RF[r];
        if (f < 0 || f >= nfiles) { range_err = 1; break; }
        int64_t off = RO[r], end = RO[r] + RL[r], size = FS[f];
        if (end > size) end = size;
        int64_t p = (off + page - 1) >> shift;         /* first page starting inside the extent */
        for (; (p << shift) < end; p++) {
            int64_t po = p << shift, pe = po + page;
            if (pe > size) pe = size;
            if (pe > end) break;                       /* page not wholly read: cannot check */
            if (TB[f] + p >= ntab || pos + (po - off) + (pe - po) > (int64_t)buf.len || pos < 0) {
                range_err = 1;
                break;
            }
            uint32_t c = crc32c(0, B + pos + (po - off), (size_t)(pe - po));
            if (c != T[TB[f] + p]) {
                bad_row = k;
                bad_off = po;
                want = T[TB[f] + p];
                got = c;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf); PyBuffer_Release(&rows); PyBuffer_Release(&rf); PyBuffer_Release(&ro);
    PyBuffer_Release(&rl); PyBuffer_Release(&tab); PyBuffer_Release(&tb); PyBuffer_Release(&fs);
    if (range_err) {
        PyErr_SetString(PyExc_ValueError, "check_pages: arguments out of range");
        return NULL;
    }
    if (bad_row < 0) Py_RETURN_NONE;
    return Py_BuildValue("(nLkk)", bad_row, (long long)bad_off, (unsigned long)want, (unsigned long)got);
}

/* crc32c_hardware() -> bool: whether the SSE4.2 instruction is in use */
PyObject *gp_crc32c_hw(PyObject *m, PyObject *noargs) {
    crc_init();
    return PyBool_FromLong(have_hw);
}
