/* The compiled column reader's line splitter and HloLiveRange kernels (docs/native.md).
 *
 * split_lines: a chunk of whole lines into a large_string column, as vector._lines did.
 * sequence, live_ranges, peak: grammar.STEP, BUFFER_LIVE_RANGE and PEAK over a column.
 * Each kernel returns (bad, columns...): bad is the index of the first line it does not
 * read, -1 when it read them all (the columns then hold every line).
 */
#include "native.h"

/* -- split_lines -------------------------------------------------------------------- */

/* Whether any of the 8 bytes at `q` is non-ASCII, a CR or a NUL: the bytes the loop in
 * split() must look at one by one (the usual has-a-zero-byte test on the word and on
 * the word xor CRs). Read through memcpy: no alignment is assumed. */
static int word_needs_look(const unsigned char *q) {
    uint64_t w;
    memcpy(&w, q, sizeof w);
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t cr = w ^ (ones * '\r');
    return ((w | ((w - ones) & ~w) | ((cr - ones) & ~cr)) & highs) != 0;
}

/* Split `text` (newline-terminated lines) into `chars` (the lines without their line
 * ends) and `offsets`; 0 if a line holds a lone CR, a NUL or invalid UTF-8 (the line
 * reader words those). A CR right before a newline is dropped with it. Plain ASCII is
 * passed over a word at a time: 0.27 -> 0.165 CPU-s over the 188 MB bench dump. */
static int split(const unsigned char *text, size_t len, char *chars, Buf *offsets) {
    size_t out = 0;
    const unsigned char *p = text, *end = text + len;
    buf_i64(offsets, 0);
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break; /* a piece without its newline is no line */
        const unsigned char *stop = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        for (const unsigned char *q = p; q < stop;) {
            if ((size_t)(stop - q) >= 8 && !word_needs_look(q)) {
                q += 8;
            } else if (*q >= 0x80) {
                uint32_t cp;
                int n = utf8_length(q, stop, &cp);
                if (!n) return 0;
                q += n;
            } else if (*q == '\r' || *q == '\0') {
                return 0;
            } else {
                q++;
            }
        }
        memcpy(chars + out, p, (size_t)(stop - p));
        out += (size_t)(stop - p);
        buf_i64(offsets, (int64_t)out);
        p = nl + 1;
    }
    return !offsets->failed;
}

static PyObject *split_lines(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *chars = PyBytes_FromStringAndSize(NULL, view.len);
    if (!chars) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Buf offsets = {0};
    int ok;
    Py_BEGIN_ALLOW_THREADS;
    ok = split(view.buf, (size_t)view.len, PyBytes_AS_STRING(chars), &offsets);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&view);
    if (!ok) {
        int failed = offsets.failed;
        buf_free(&offsets);
        Py_DECREF(chars);
        if (failed) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    int64_t used = ((int64_t *)offsets.data)[offsets.len / 8 - 1];
    if (_PyBytes_Resize(&chars, (Py_ssize_t)used) < 0) {
        buf_free(&offsets);
        return NULL;
    }
    PyObject *offsets_bytes = buf_bytes(&offsets);
    buf_free(&offsets);
    if (!offsets_bytes) {
        Py_DECREF(chars);
        return NULL;
    }
    return Py_BuildValue("(NN)", offsets_bytes, chars);
}

/* -- starting_with ------------------------------------------------------------------ */

#define MAX_PREFIXES 16

/* The indexes of the lines that start with one of `prefixes` (a tuple of bytes):
 * the section markers of a chunk, found by comparing line starts only. */
static PyObject *starting_with(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *offsets, *chars, *prefixes;
    if (!PyArg_ParseTuple(args, "OOO!", &offsets, &chars, &PyTuple_Type, &prefixes)) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(prefixes);
    if (k > MAX_PREFIXES) {
        PyErr_SetString(PyExc_ValueError, "too many prefixes");
        return NULL;
    }
    const char *text[MAX_PREFIXES];
    size_t length[MAX_PREFIXES];
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, j);
        if (!PyBytes_Check(prefix) || PyBytes_GET_SIZE(prefix) == 0) {
            PyErr_SetString(PyExc_TypeError, "prefixes must be non-empty bytes");
            return NULL;
        }
        text[j] = PyBytes_AS_STRING(prefix);
        length[j] = (size_t)PyBytes_GET_SIZE(prefix);
    }
    Lines lines;
    if (!lines_get(offsets, chars, &lines)) return NULL;
    Buf rows = {0};
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < lines.n; i++) {
        Cur c = line_at(&lines, i);
        for (Py_ssize_t j = 0; j < k; j++) {
            if (c.p < c.end && *c.p == text[j][0] && take(&c, text[j], length[j])) {
                buf_i64(&rows, (int64_t)i);
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS;
    lines_release(&lines);
    PyObject *result = buf_bytes(&rows);
    buf_free(&rows);
    return result;
}

/* -- kernels over a column of lines ------------------------------------------------ */

/* The columns a kernel fills: up to 4 numbers, 2 strings, 1 flag column. */
typedef struct {
    Buf numbers[4];
    StrCol strings[2];
    Buf flags;
    Buf rows; /* the lines read, for a kernel that skips some (peak: blank lines) */
} Out;

typedef int (*ReadLine)(Cur *c, Out *out); /* 1: read and appended; 0: not this kind */

static void out_init(Out *out) {
    memset(out, 0, sizeof *out);
    str_init(&out->strings[0]);
    str_init(&out->strings[1]);
}

static void out_free(Out *out) {
    for (int k = 0; k < 4; k++) buf_free(&out->numbers[k]);
    str_free(&out->strings[0]);
    str_free(&out->strings[1]);
    buf_free(&out->flags);
    buf_free(&out->rows);
}

/* Run `read` over every line (blank ones skipped when `skip_blank`); the index of the
 * first line it does not read, -1 if none. */
static Py_ssize_t run(const Lines *lines, ReadLine read, Out *out, int skip_blank) {
    for (Py_ssize_t i = 0; i < lines->n; i++) {
        Cur c = line_at(lines, i);
        if (skip_blank && at_end(&c)) continue;
        if (!read(&c, out)) return i;
        buf_i64(&out->rows, (int64_t)i);
    }
    return -1;
}

/* (bad, numbers..., (offsets, chars) per string..., flags, rows) as bytes. */
static PyObject *out_tuple(Py_ssize_t bad, Out *out, int numbers, int strings, int flags) {
    Buf *bufs[4 + 2 * 2 + 1 + 1];
    Py_ssize_t n = 0;
    for (int k = 0; k < numbers; k++) bufs[n++] = &out->numbers[k];
    for (int k = 0; k < strings; k++) {
        bufs[n++] = &out->strings[k].offsets;
        bufs[n++] = &out->strings[k].chars;
    }
    if (flags) bufs[n++] = &out->flags;
    bufs[n++] = &out->rows;
    return result_tuple(bad, bufs, n);
}

static PyObject *kernel(PyObject *args, ReadLine read, int numbers, int strings, int flags,
                        int skip_blank) {
    PyObject *offsets, *chars;
    if (!PyArg_ParseTuple(args, "OO", &offsets, &chars)) return NULL;
    Lines lines;
    if (!lines_get(offsets, chars, &lines)) return NULL;
    Out out;
    out_init(&out);
    Py_ssize_t bad;
    Py_BEGIN_ALLOW_THREADS;
    bad = run(&lines, read, &out, skip_blank);
    Py_END_ALLOW_THREADS;
    lines_release(&lines);
    PyObject *result = out_tuple(bad, &out, numbers, strings, flags);
    out_free(&out);
    return result;
}

/* grammar.STEP: `    (?P<step>[0-9]+):(?P<name>\S+)` -> step; name. */
static int read_step(Cur *c, Out *out) {
    int64_t step;
    if (!TAKE(c, "    ") || !take_number(c, &step) || !TAKE(c, ":")) return 0;
    const char *name = c->p;
    if (!take_nonspace_to_end(c)) return 0;
    buf_i64(&out->numbers[0], step);
    str_put(&out->strings[0], name, (size_t)(c->p - name));
    return 1;
}

/* grammar.BUFFER_LIVE_RANGE: `    (?P<name>[^ {}:]+)(?P<idx>INDEX):(?P<start>[0-9]+)-(?P<end>[0-9]+)`
 * -> start, end; name, idx. */
static int read_live_range(Cur *c, Out *out) {
    int64_t start, end;
    if (!TAKE(c, "    ")) return 0;
    const char *name = c->p;
    if (!take_until(c, " {}:")) return 0;
    const char *index = c->p;
    if (!take_index(c)) return 0;
    const char *index_end = c->p;
    if (!TAKE(c, ":") || !take_number(c, &start) || !TAKE(c, "-") || !take_number(c, &end) ||
        !at_end(c))
        return 0;
    buf_i64(&out->numbers[0], start);
    buf_i64(&out->numbers[1], end);
    str_put(&out->strings[0], name, (size_t)(index - name));
    str_put(&out->strings[1], index, (size_t)(index_end - index));
    return 1;
}

/* grammar.PEAK: `    (?P<name>[^ {}:]+)(?P<idx>INDEX)?: (?P<bytes>[0-9]+) bytes`
 * `(?: \(cumulative: (?P<cumulative>[0-9]+) bytes\))?` -> bytes, cumulative; name, idx
 * ("" if none); flags: whether cumulative is printed. */
static int read_peak(Cur *c, Out *out) {
    int64_t bytes, cumulative = 0;
    if (!TAKE(c, "    ")) return 0;
    const char *name = c->p;
    if (!take_until(c, " {}:")) return 0;
    const char *index = c->p;
    take_index(c);
    const char *index_end = c->p;
    if (!TAKE(c, ": ") || !take_number(c, &bytes) || !TAKE(c, " bytes")) return 0;
    int has_cumulative = 0;
    if (!at_end(c)) {
        if (!TAKE(c, " (cumulative: ") || !take_number(c, &cumulative) || !TAKE(c, " bytes)") ||
            !at_end(c))
            return 0;
        has_cumulative = 1;
    }
    buf_i64(&out->numbers[0], bytes);
    buf_i64(&out->numbers[1], cumulative);
    str_put(&out->strings[0], name, (size_t)(index - name));
    str_put(&out->strings[1], index, (size_t)(index_end - index));
    buf_u8(&out->flags, (uint8_t)has_cumulative);
    return 1;
}

static PyObject *sequence(PyObject *self, PyObject *args) {
    (void)self;
    return kernel(args, read_step, 1, 1, 0, 0);
}

static PyObject *live_ranges(PyObject *self, PyObject *args) {
    (void)self;
    return kernel(args, read_live_range, 2, 2, 0, 0);
}

static PyObject *peak(PyObject *self, PyObject *args) {
    (void)self;
    return kernel(args, read_peak, 2, 2, 1, 1);
}

static PyMethodDef methods[] = {
    {"split_lines", split_lines, METH_O,
     "split_lines(text) -> (offsets, chars) of its newline-terminated lines, or None"},
    {"starting_with", starting_with, METH_VARARGS,
     "starting_with(offsets, chars, prefixes) -> int64 indexes of the lines with one"},
    {"sequence", sequence, METH_VARARGS,
     "sequence(offsets, chars) -> (bad, step, name offsets, name chars, rows)"},
    {"live_ranges", live_ranges, METH_VARARGS,
     "live_ranges(offsets, chars) -> (bad, start, end, name.., idx.., rows)"},
    {"peak", peak, METH_VARARGS,
     "peak(offsets, chars) -> (bad, bytes, cumulative, name.., idx.., has_cumulative, rows)"},
    {NULL, NULL, 0, NULL},
};

NATIVE_MODULE(_lines, "The line splitter and HloLiveRange kernels.")
