/* What every kernel of the compiled column reader shares (docs/native.md).
 *
 * A kernel reads one kind of dump line over a column of lines (an Arrow large_string
 * array: int64 offsets into one character buffer) and returns its fields as column
 * buffers: `bytes` of int64 numbers, of uint8 flags, and string columns as int32
 * offsets plus characters (Arrow's layout, wrapped without a copy by kernels.py).
 * It reads only what grammar.py's pattern for the kind matches, exactly as Python's
 * `re` reads it; the first line it does not read ends the kernel, which returns
 * that line's index so that the line reader, which words errors, reads the module.
 *
 * Safety on hostile input: every offset is checked before use (lines_get), every
 * read is bounded by the line's end, numbers past int64 are refused, and the work is
 * linear in the input. The loops run without the GIL and touch no Python object.
 */
#ifndef BUFFERHOUSE_NATIVE_H
#define BUFFERHOUSE_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -- growable buffers ---------------------------------------------------------------- */

/* A column under construction; `failed` is set once an allocation fails, or (with
 * `too_long`) once a string column passes what int32 offsets address. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed, too_long;
} Buf;

static inline int buf_reserve(Buf *b, size_t more) {
    if (b->failed) return 0;
    if (more > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return 0;
    }
    if (b->len + more <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
        b->failed = 1;
        return 0;
    }
    b->data = data;
    b->cap = cap;
    return 1;
}

static inline void buf_put(Buf *b, const void *p, size_t n) {
    if (!buf_reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

static inline void buf_i64(Buf *b, int64_t v) { buf_put(b, &v, sizeof v); }

static inline void buf_u8(Buf *b, uint8_t v) { buf_put(b, &v, 1); }

static inline void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* The buffer as `bytes` (a copy), or NULL with a Python error set. Needs the GIL. */
static inline PyObject *buf_bytes(const Buf *b) {
    if (b->too_long) {
        PyErr_SetString(PyExc_OverflowError, "a string column past 2 GiB");
        return NULL;
    }
    if (b->failed) return PyErr_NoMemory();
    return PyBytes_FromStringAndSize(b->len ? b->data : "", (Py_ssize_t)b->len);
}

/* A tuple of `bytes`, one per buffer; NULL with a Python error (MemoryError if one
 * failed to grow, OverflowError if a string column passed 2 GiB). Needs the GIL. */
static inline PyObject *bytes_tuple(Buf *const *bufs, Py_ssize_t n) {
    PyObject *tuple = PyTuple_New(n);
    if (!tuple) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *b = buf_bytes(bufs[k]);
        if (!b) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, k, b);
    }
    return tuple;
}

/* A kernel's result, (bad, bytes of each buffer...): bad is the index of the first line
 * not read, -1 when all were. */
static inline PyObject *result_tuple(Py_ssize_t bad, Buf *const *bufs, Py_ssize_t n) {
    PyObject *columns = bytes_tuple(bufs, n);
    if (!columns) return NULL;
    PyObject *head = Py_BuildValue("(n)", bad);
    PyObject *result = head ? PySequence_Concat(head, columns) : NULL;
    Py_XDECREF(head);
    Py_DECREF(columns);
    return result;
}

/* A string column: Arrow's int32 offsets, one more than strings, then the characters. */
typedef struct {
    Buf offsets, chars;
} StrCol;

static inline void str_init(StrCol *c) {
    memset(c, 0, sizeof *c);
    int32_t zero = 0;
    buf_put(&c->offsets, &zero, sizeof zero);
}

static inline void str_put(StrCol *c, const char *p, size_t n) {
    /* Past what int32 offsets address, the column stops growing and buf_bytes raises
     * OverflowError for it (the wrappers read that as Irregular). */
    if (!c->chars.too_long && n > (size_t)INT32_MAX - c->chars.len) c->chars.too_long = 1;
    if (!c->chars.too_long) buf_put(&c->chars, p, n);
    int32_t end = (int32_t)(c->chars.too_long || c->chars.failed ? 0 : c->chars.len);
    buf_put(&c->offsets, &end, sizeof end);
}

static inline void str_free(StrCol *c) {
    buf_free(&c->offsets);
    buf_free(&c->chars);
}

/* -- the input lines --------------------------------------------------------------- */

typedef struct {
    Py_buffer offsets_view, chars_view;
    const int64_t *offsets; /* n + 1 entries, each within chars, never decreasing */
    const char *chars;
    Py_ssize_t n;
} Lines;

/* Take the lines from (offsets, chars) buffers; 0 with a Python error if they do not
 * describe lines (offsets out of the buffer, decreasing, or misaligned). */
static inline int lines_get(PyObject *offsets, PyObject *chars, Lines *lines) {
    memset(lines, 0, sizeof *lines);
    if (PyObject_GetBuffer(offsets, &lines->offsets_view, PyBUF_SIMPLE) < 0) return 0;
    if (PyObject_GetBuffer(chars, &lines->chars_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&lines->offsets_view);
        return 0;
    }
    Py_ssize_t bytes = lines->offsets_view.len;
    const char *why = NULL;
    if (bytes % 8 || bytes < 8)
        why = "offsets must be n + 1 int64 values";
    else if ((uintptr_t)lines->offsets_view.buf % _Alignof(int64_t))
        why = "offsets must be aligned to 8 bytes";
    if (!why) {
        lines->offsets = lines->offsets_view.buf;
        lines->chars = lines->chars_view.buf;
        lines->n = bytes / 8 - 1;
        const int64_t *o = lines->offsets;
        int64_t size = (int64_t)lines->chars_view.len;
        if (o[0] < 0 || o[lines->n] > size) why = "offsets past the characters";
        for (Py_ssize_t i = 0; !why && i < lines->n; i++)
            if (o[i + 1] < o[i]) why = "offsets decrease";
    }
    if (why) {
        PyBuffer_Release(&lines->offsets_view);
        PyBuffer_Release(&lines->chars_view);
        PyErr_SetString(PyExc_ValueError, why);
        return 0;
    }
    return 1;
}

static inline void lines_release(Lines *lines) {
    PyBuffer_Release(&lines->offsets_view);
    PyBuffer_Release(&lines->chars_view);
}

/* -- reading a line ---------------------------------------------------------------- */

/* A cursor over one line: `p` moves, `end` bounds every read. */
typedef struct {
    const char *p, *end;
} Cur;

static inline Cur line_at(const Lines *lines, Py_ssize_t i) {
    Cur c = {lines->chars + lines->offsets[i], lines->chars + lines->offsets[i + 1]};
    return c;
}

/* Consume the literal `s` (of length n) if the line continues with it. */
static inline int take(Cur *c, const char *s, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
    c->p += n;
    return 1;
}
#define TAKE(c, literal) take((c), (literal), sizeof(literal) - 1)

static inline int at_end(const Cur *c) { return c->p == c->end; }

/* `[0-9]+` as a number; 0 (nothing consumed) without a digit or past int64 (the line
 * reader words a number too large for 64 bits). */
static inline int take_number(Cur *c, int64_t *out) {
    const char *p = c->p;
    uint64_t v = 0;
    if (p == c->end || *p < '0' || *p > '9') return 0;
    for (; p < c->end && *p >= '0' && *p <= '9'; p++) {
        if (v > (uint64_t)(INT64_MAX - (*p - '0')) / 10) return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = (int64_t)v;
    c->p = p;
    return 1;
}

/* Consume one or more characters other than those in `stops` (ASCII); 0 if none. Bytes
 * of a multi-byte UTF-8 character are never ASCII, so a byte scan reads code points; a
 * NUL is no stop, as in `re` (it cannot be in `stops`). */
static inline int take_until(Cur *c, const char *stops) {
    uint8_t stop[32] = {0};
    for (const unsigned char *s = (const unsigned char *)stops; *s; s++)
        stop[*s >> 3] |= (uint8_t)(1u << (*s & 7));
    const unsigned char *p = (const unsigned char *)c->p, *end = (const unsigned char *)c->end;
    while (p < end && !((stop[*p >> 3] >> (*p & 7)) & 1)) p++;
    if (p == (const unsigned char *)c->p) return 0;
    c->p = (const char *)p;
    return 1;
}

/* `[0-9]+` kept as text (a group the line reader does not read as a number). */
static inline int take_digits(Cur *c) {
    const char *p = c->p;
    while (p < c->end && *p >= '0' && *p <= '9') p++;
    if (p == c->p) return 0;
    c->p = p;
    return 1;
}

static inline size_t span_len(Cur s) { return (size_t)(s.end - s.p); }

/* A span of digits as a number; 0 past int64. */
static inline int span_number(Cur digits, int64_t *out) {
    return take_number(&digits, out) && at_end(&digits);
}

/* `\{[0-9,]*\}`, a ShapeIndex. */
static inline int take_index(Cur *c) {
    const char *start = c->p;
    if (!TAKE(c, "{")) return 0;
    while (c->p < c->end && ((*c->p >= '0' && *c->p <= '9') || *c->p == ',')) c->p++;
    if (!TAKE(c, "}")) {
        c->p = start;
        return 0;
    }
    return 1;
}

/* grammar.SHORT, `<(?P<id>[0-9]+) (?P<name>[^ {}<>]+)(?P<idx>INDEX)?(?P<phi> \(phi\))?`
 * `(?: @(?P<color>[0-9]+))?>`, as spans (an absent idx or color is empty). Each optional
 * part is decided by its first characters, so `re` never backtracks into another reading:
 * the name stops where idx ('{'), phi and color (' ') and '>' begin, and a '{' that does
 * not begin an index ends the match. */
typedef struct {
    Cur id, name, idx, color;
    int phi;
} Short;

static inline int take_short(Cur *c, Short *s) {
    if (!TAKE(c, "<")) return 0;
    s->id.p = c->p;
    if (!take_digits(c)) return 0;
    s->id.end = c->p;
    if (!TAKE(c, " ")) return 0;
    s->name.p = c->p;
    if (!take_until(c, " {}<>")) return 0;
    s->name.end = s->idx.p = c->p;
    take_index(c);
    s->idx.end = c->p;
    s->phi = TAKE(c, " (phi)");
    s->color.p = s->color.end = c->p;
    if (TAKE(c, " @")) {
        s->color.p = c->p;
        if (!take_digits(c)) return 0;
        s->color.end = c->p;
    }
    return TAKE(c, ">");
}

/* The length of the UTF-8 character at p (1-4), 0 if the bytes there are not one. */
static inline int utf8_length(const unsigned char *p, const unsigned char *end, uint32_t *code) {
    unsigned char b = p[0];
    int n;
    uint32_t cp, least;
    if (b < 0x80) {
        *code = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2, cp = b & 0x1F, least = 0x80;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3, cp = b & 0x0F, least = 0x800;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4, cp = b & 0x07, least = 0x10000;
    } else {
        return 0;
    }
    if (end - p < n) return 0;
    for (int k = 1; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[k] & 0x3F);
    }
    if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    *code = cp;
    return n;
}

/* Python's `\s` for str patterns: the characters str.isspace() takes. */
static inline int is_space(uint32_t cp) {
    if (cp <= 0x20) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* `\S+` to the end of the line (Python's reading, Unicode-aware); 0 if the line has a
 * space or an invalid character there, or nothing. */
static inline int take_nonspace_to_end(Cur *c) {
    const unsigned char *p = (const unsigned char *)c->p, *end = (const unsigned char *)c->end;
    if (p == end) return 0;
    while (p < end) {
        uint32_t cp;
        int n = utf8_length(p, end, &cp);
        if (!n || is_space(cp)) return 0;
        p += n;
    }
    c->p = (const char *)p;
    return 1;
}

/* The module object and init function of the extension `name`, whose file defines its
 * `methods` table: the same six lines in every kernel file otherwise. */
#define NATIVE_MODULE(name, doc)                                                       \
    static struct PyModuleDef module = {                                               \
        PyModuleDef_HEAD_INIT, #name, doc, -1, methods, NULL, NULL, NULL, NULL,        \
    };                                                                                 \
    PyMODINIT_FUNC PyInit_##name(void) { return PyModule_Create(&module); }

#endif
