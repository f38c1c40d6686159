/* The compiled column reader's BufferAssignment kernel (docs/native.md).
 *
 * allocations: the body of a "BufferAssignment:" section in one pass. Each line gets a
 * kind as vector.py classifies them (a ` value:` line, an allocation header, the
 * cross-color head, a cross-color `  value:` line, or another line, which the line reader
 * reads), and each line of a bulk kind is read by its grammar.py pattern: ALLOCATION,
 * VALUE, CROSS. It returns (bad, kinds, allocation columns, value columns, cross columns):
 * bad is the first bulk line its pattern does not read (or with a number past int64 that
 * the line reader reads as a number), -1 when there is none.
 */
#include "native.h"

/* The line kinds, numbered as native/__init__.py names them. */
enum { OTHER, ALLOCATION, VALUE, CROSS_HEAD, CROSS };

/* grammar.CROSS_HEAD */
static const char CROSS_HEAD_LINE[] = " reused by buffers of a different color:";

/* -- pieces of the patterns --------------------------------------------------------- */

/* `[0-9a-fA-F]+` */
static int take_hex(Cur *c) {
    const char *p = c->p;
    for (; p < c->end; p++) {
        unsigned char b = (unsigned char)*p, lower = b | 0x20;
        if (!((b >= '0' && b <= '9') || (lower >= 'a' && lower <= 'f'))) break;
    }
    if (p == c->p) return 0;
    c->p = p;
    return 1;
}

/* `.*` from p to end: Python's `.` takes every character but a newline. */
static int dot_star(const char *p, const char *end) {
    return !memchr(p, '\n', (size_t)(end - p));
}

/* -- the columns ------------------------------------------------------------------- */

/* Number and flag columns, then string columns, of each kind (order: __init__.py's). */
enum { A_INDEX, A_SIZE, V_ID, V_COLOR, V_SIZE, V_OFFSET, V_PHI, V_COLORED, C_ID, C_PHI, N_BUFS };
enum { A_ADDRESS, A_REST, V_NAME, V_IDX, V_SHAPE, C_NAME, C_IDX, C_COLOR, C_OTHER, N_STRS };

typedef struct {
    Buf kinds;
    Buf bufs[N_BUFS];
    StrCol strs[N_STRS];
} Out;

static void put(StrCol *col, Cur s) { str_put(col, s.p, span_len(s)); }

/* -- the line kinds ------------------------------------------------------------------ */

/* grammar.ALLOCATION: `allocation (?P<index>[0-9]+): (?:(?P<address>0x[0-9a-fA-F]+), )?`
 * `size (?P<size>[0-9]+)(?P<rest>.*):`. The greedy `rest` ends at the line's last
 * character, which must be the ':'; the size's digits are all taken first, and taking
 * fewer leaves a digit where `rest`'s end needs the same ':'. */
static int read_allocation(Cur *c, Out *out) {
    int64_t index, size;
    if (!TAKE(c, "allocation ") || !take_number(c, &index) || !TAKE(c, ": ")) return 0;
    Cur address = {c->p, c->p};
    if (TAKE(c, "0x")) { /* else `size` must begin here, and it does not begin with 0 */
        if (!take_hex(c)) return 0;
        address.end = c->p;
        if (!TAKE(c, ", ")) return 0;
    }
    if (!TAKE(c, "size ") || !take_number(c, &size)) return 0;
    if (at_end(c) || c->end[-1] != ':' || !dot_star(c->p, c->end - 1)) return 0;
    Cur rest = {c->p, c->end - 1};
    buf_i64(&out->bufs[A_INDEX], index);
    buf_i64(&out->bufs[A_SIZE], size);
    put(&out->strs[A_ADDRESS], address);
    put(&out->strs[A_REST], rest);
    return 1;
}

/* grammar.VALUE: ` value: SHORT \(size=(?P<size>[0-9]+),offset=(?P<offset>[0-9]+)\): `
 * `(?P<shape>.*)`; every number is read as one. */
static int read_value(Cur *c, Out *out) {
    Short s;
    int64_t id, color = 0, size, offset;
    if (!TAKE(c, " value: ") || !take_short(c, &s) || !TAKE(c, " (size=") ||
        !take_number(c, &size) || !TAKE(c, ",offset=") || !take_number(c, &offset) ||
        !TAKE(c, "): ") || !dot_star(c->p, c->end))
        return 0;
    int colored = s.color.p != s.color.end;
    if (!span_number(s.id, &id) || (colored && !span_number(s.color, &color))) return 0;
    buf_i64(&out->bufs[V_ID], id);
    buf_i64(&out->bufs[V_COLOR], color);
    buf_i64(&out->bufs[V_SIZE], size);
    buf_i64(&out->bufs[V_OFFSET], offset);
    buf_u8(&out->bufs[V_PHI], (uint8_t)s.phi);
    buf_u8(&out->bufs[V_COLORED], (uint8_t)colored);
    put(&out->strs[V_NAME], s.name);
    put(&out->strs[V_IDX], s.idx);
    Cur shape = {c->p, c->end};
    put(&out->strs[V_SHAPE], shape);
    return 1;
}

/* grammar.CROSS: `  value: SHORT \(color=(?P<other>[0-9]+)\)`. The line reader reads only
 * the id as a number, so only the id is refused past int64; both colors stay text. */
static int read_cross(Cur *c, Out *out) {
    Short s;
    int64_t id;
    if (!TAKE(c, "  value: ") || !take_short(c, &s) || !TAKE(c, " (color=")) return 0;
    Cur other = {c->p, c->p};
    if (!take_digits(c)) return 0;
    other.end = c->p;
    if (!TAKE(c, ")") || !at_end(c) || !span_number(s.id, &id)) return 0;
    buf_i64(&out->bufs[C_ID], id);
    buf_u8(&out->bufs[C_PHI], (uint8_t)s.phi);
    put(&out->strs[C_NAME], s.name);
    put(&out->strs[C_IDX], s.idx);
    put(&out->strs[C_COLOR], s.color);
    put(&out->strs[C_OTHER], other);
    return 1;
}

/* vector.py's classes, in its order (the prefixes exclude each other). */
static int kind_of(Cur c) {
    if (TAKE(&c, " value: ")) return VALUE;
    if (TAKE(&c, "allocation ")) return ALLOCATION;
    if (TAKE(&c, CROSS_HEAD_LINE) && at_end(&c)) return CROSS_HEAD;
    if (TAKE(&c, "  value: ")) return CROSS;
    return OTHER;
}

static Py_ssize_t run(const Lines *lines, Out *out) {
    for (Py_ssize_t i = 0; i < lines->n; i++) {
        Cur c = line_at(lines, i);
        int kind = kind_of(c), ok = 1;
        if (kind == ALLOCATION) ok = read_allocation(&c, out);
        if (kind == VALUE) ok = read_value(&c, out);
        if (kind == CROSS) ok = read_cross(&c, out);
        if (!ok) return i;
        buf_u8(&out->kinds, (uint8_t)kind);
    }
    return -1;
}

/* -- to Python --------------------------------------------------------------------- */

#define STR(k) &out->strs[k].offsets, &out->strs[k].chars

static PyObject *out_tuple(Py_ssize_t bad, Out *out) {
    Buf *const alloc[] = {&out->bufs[A_INDEX], &out->bufs[A_SIZE], STR(A_ADDRESS), STR(A_REST)};
    Buf *const value[] = {&out->bufs[V_ID],    &out->bufs[V_COLOR], &out->bufs[V_SIZE],
                          &out->bufs[V_OFFSET], &out->bufs[V_PHI],   &out->bufs[V_COLORED],
                          STR(V_NAME),          STR(V_IDX),          STR(V_SHAPE)};
    Buf *const cross[] = {&out->bufs[C_ID], &out->bufs[C_PHI], STR(C_NAME),
                          STR(C_IDX),       STR(C_COLOR),      STR(C_OTHER)};
    Buf *const kinds[] = {&out->kinds};
    PyObject *parts[] = {
        bytes_tuple(kinds, 1),
        bytes_tuple(alloc, sizeof alloc / sizeof *alloc),
        bytes_tuple(value, sizeof value / sizeof *value),
        bytes_tuple(cross, sizeof cross / sizeof *cross),
    };
    PyObject *result = NULL;
    if (parts[0] && parts[1] && parts[2] && parts[3])
        result = Py_BuildValue("(nOOOO)", bad, parts[0], parts[1], parts[2], parts[3]);
    for (int k = 0; k < 4; k++) Py_XDECREF(parts[k]);
    return result;
}
#undef STR

static void out_init(Out *out) {
    memset(out, 0, sizeof *out);
    for (int k = 0; k < N_STRS; k++) str_init(&out->strs[k]);
}

static void out_free(Out *out) {
    buf_free(&out->kinds);
    for (int k = 0; k < N_BUFS; k++) buf_free(&out->bufs[k]);
    for (int k = 0; k < N_STRS; k++) str_free(&out->strs[k]);
}

static PyObject *allocations(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *offsets, *chars;
    if (!PyArg_ParseTuple(args, "OO", &offsets, &chars)) return NULL;
    Lines lines;
    if (!lines_get(offsets, chars, &lines)) return NULL;
    Out out;
    out_init(&out);
    Py_ssize_t bad;
    Py_BEGIN_ALLOW_THREADS;
    bad = run(&lines, &out);
    Py_END_ALLOW_THREADS;
    lines_release(&lines);
    PyObject *result = out_tuple(bad, &out);
    out_free(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"allocations", allocations, METH_VARARGS,
     "allocations(offsets, chars) -> (bad, (kinds,), (index, size, address.., rest..), "
     "(id, color, size, offset, phi, colored, name.., idx.., shape..), "
     "(id, phi, name.., idx.., color.., other..))"},
    {NULL, NULL, 0, NULL},
};

NATIVE_MODULE(_allocations, "The BufferAssignment section kernel.")
