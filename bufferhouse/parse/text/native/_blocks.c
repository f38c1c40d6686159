/* The compiled column reader's Used values kernels (docs/native.md).
 *
 * used_blocks: one pass over the section's lines gives each its letter (the table
 * grammar.BLOCK_LETTERS, passed in) and reads the lines the letters say: HEADER for
 * 'h', POSITION for 'i' before its block's 'U' line and USE after it, the text after
 * FROM for 'f'. blocks.py checks the string of letters against grammar.BLOCKS.
 * glued: the from instruction lines that end with a GLUED_HEADER, and where it starts.
 * Both return (bad, columns...) as _lines.c does: bad is the first line not read, -1
 * if all were read.
 */
#include "native.h"

/* -- the letters -------------------------------------------------------------------- */

#define MAX_LETTERS 32

typedef struct {
    char letter;
    int prefix; /* 1: the line starts with text; 0: the line is text */
    const char *text;
    size_t len;
} Letter;

typedef struct {
    Letter entry[MAX_LETTERS];
    int n;
    Py_ssize_t from_len; /* the length of the 'f' entry's text (grammar.FROM) */
} Letters;

/* The table from a sequence of (letter, "prefix" | "equal", text); 0 with a Python
 * error if it is not one. The texts stay valid while `table` lives (the caller's). */
static int letters_get(PyObject *table, Letters *out) {
    memset(out, 0, sizeof *out);
    out->from_len = -1;
    PyObject *seq = PySequence_Fast(table, "the letters must be a sequence");
    if (!seq) return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int ok = n <= MAX_LETTERS;
    for (Py_ssize_t k = 0; ok && k < n; k++) {
        PyObject *letter, *how, *text;
        Py_ssize_t letter_len, how_len, text_len;
        ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "UUU", &letter, &how, &text);
        const char *l = ok ? PyUnicode_AsUTF8AndSize(letter, &letter_len) : NULL;
        const char *h = l ? PyUnicode_AsUTF8AndSize(how, &how_len) : NULL;
        const char *t = h ? PyUnicode_AsUTF8AndSize(text, &text_len) : NULL;
        ok = t && letter_len == 1 && (!strcmp(h, "prefix") || !strcmp(h, "equal"));
        if (!ok) break;
        Letter *e = &out->entry[k];
        e->letter = l[0], e->prefix = h[0] == 'p', e->text = t, e->len = (size_t)text_len;
        if (e->letter == 'f' && e->prefix) out->from_len = text_len;
    }
    Py_DECREF(seq);
    if (!ok || out->from_len < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError,
                            "letters: at most 32 (letter, 'prefix' | 'equal', text), an 'f' prefix");
        return 0;
    }
    out->n = (int)n;
    return 1;
}

/* The letter of a line: the last entry that takes it, 'x' if none. */
static char letter_of(const Letters *letters, const Cur *c) {
    size_t len = (size_t)(c->end - c->p);
    for (int k = letters->n - 1; k >= 0; k--) {
        const Letter *e = &letters->entry[k];
        if ((e->prefix ? len >= e->len : len == e->len) && !memcmp(c->p, e->text, e->len))
            return e->letter;
    }
    return 'x';
}

/* -- reading the lines --------------------------------------------------------------- */

/* The columns of used_blocks. */
typedef struct {
    Buf letters;
    Buf ids; /* per header */
    StrCol names;
    Buf pos_block; /* per position: its block, 0 for the first header */
    StrCol pos_name, pos_idx;
    Buf use_block, use_op; /* per use */
    StrCol use_name, use_idx;
    StrCol texts; /* per from line */
    Buf spaced, ends;
} Blocks;

/* grammar.HEADER (SHORT): `<(?P<id>[0-9]+) (?P<name>[^ {}<>]+)(?P<idx>INDEX)?`
 * `(?P<phi> \(phi\))?(?: @(?P<color>[0-9]+))?>` -> id (refused past int64), name. */
static int read_header(Cur *c, Blocks *out) {
    Short s;
    int64_t id;
    if (!take_short(c, &s) || !at_end(c) || !span_number(s.id, &id)) return 0;
    buf_i64(&out->ids, id);
    str_put(&out->names, s.name.p, span_len(s.name));
    return 1;
}

/* `(?: (?P<idx>INDEX))?` at the end of the line -> idx ("" if none). */
static int read_index_to_end(Cur *c, StrCol *idx) {
    const char *index = c->p;
    if (TAKE(c, " ")) {
        index = c->p;
        if (!take_index(c)) return 0;
    }
    if (!at_end(c)) return 0;
    str_put(idx, index, (size_t)(c->p - index));
    return 1;
}

/* grammar.POSITION: `  (?P<name>[^ ,{}]+)(?: (?P<idx>INDEX))?` -> name, idx. */
static int read_position(Cur *c, Blocks *out, int64_t block) {
    if (!TAKE(c, "  ")) return 0;
    const char *name = c->p;
    if (!take_until(c, " ,{}")) return 0;
    const char *name_end = c->p;
    if (!read_index_to_end(c, &out->pos_idx)) return 0;
    buf_i64(&out->pos_block, block);
    str_put(&out->pos_name, name, (size_t)(name_end - name));
    return 1;
}

/* grammar.USE: `  (?P<name>[^ ,{}]+), operand (?P<op>[0-9]+)(?: (?P<idx>INDEX))?`
 * -> name, op (refused past int64), idx. */
static int read_use(Cur *c, Blocks *out, int64_t block) {
    int64_t op;
    if (!TAKE(c, "  ")) return 0;
    const char *name = c->p;
    if (!take_until(c, " ,{}")) return 0;
    const char *name_end = c->p;
    if (!TAKE(c, ", operand ") || !take_number(c, &op)) return 0;
    if (!read_index_to_end(c, &out->use_idx)) return 0;
    buf_i64(&out->use_block, block);
    buf_i64(&out->use_op, op);
    str_put(&out->use_name, name, (size_t)(name_end - name));
    return 1;
}

/* A from instruction line: the text after FROM and one space if it has one; whether it
 * had the space, whether the line ends with '>' (a header may be glued to it). */
static void read_from(Cur *c, Blocks *out, Py_ssize_t from_len) {
    c->p += from_len; /* its letter says the line starts with FROM */
    int spaced = TAKE(c, " ");
    str_put(&out->texts, c->p, (size_t)(c->end - c->p));
    buf_u8(&out->spaced, (uint8_t)spaced);
    buf_u8(&out->ends, (uint8_t)(c->end > c->p && c->end[-1] == '>'));
}

/* Every line's letter, and the lines of the letters read; the first line not read. */
static Py_ssize_t read_blocks(const Lines *lines, const Letters *letters, Blocks *out) {
    int64_t block = -1, uses = -1; /* the headers and ' uses:' lines so far, less one */
    if (!buf_reserve(&out->letters, (size_t)lines->n)) return -1; /* failed: MemoryError */
    for (Py_ssize_t i = 0; i < lines->n; i++) {
        Cur c = line_at(lines, i);
        char letter = letter_of(letters, &c);
        out->letters.data[out->letters.len++] = letter;
        int ok = 1;
        if (letter == 'h') {
            ok = read_header(&c, out);
            block++;
        } else if (letter == 'U') {
            uses++;
        } else if (letter == 'i') {
            ok = uses == block ? read_use(&c, out, block) : read_position(&c, out, block);
        } else if (letter == 'f') {
            read_from(&c, out, letters->from_len);
        }
        if (!ok) return i;
    }
    return -1;
}

static void blocks_init(Blocks *b) {
    memset(b, 0, sizeof *b);
    StrCol *strings[] = {&b->names, &b->pos_name, &b->pos_idx, &b->use_name, &b->use_idx, &b->texts};
    for (size_t k = 0; k < sizeof strings / sizeof strings[0]; k++) str_init(strings[k]);
}

/* The columns in the order the tuple gives them. */
static int blocks_bufs(Blocks *b, Buf **bufs) {
    Buf *all[] = {
        &b->letters,          &b->ids,
        &b->names.offsets,    &b->names.chars,
        &b->pos_block,        &b->pos_name.offsets,
        &b->pos_name.chars,   &b->pos_idx.offsets,
        &b->pos_idx.chars,    &b->use_block,
        &b->use_op,           &b->use_name.offsets,
        &b->use_name.chars,   &b->use_idx.offsets,
        &b->use_idx.chars,    &b->texts.offsets,
        &b->texts.chars,      &b->spaced,
        &b->ends,
    };
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(bufs, all, sizeof all);
    return n;
}

#define MAX_BUFS 24

static PyObject *used_blocks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *offsets, *chars, *table;
    if (!PyArg_ParseTuple(args, "OOO", &offsets, &chars, &table)) return NULL;
    Letters letters;
    if (!letters_get(table, &letters)) return NULL;
    Lines lines;
    if (!lines_get(offsets, chars, &lines)) return NULL;
    Blocks out;
    blocks_init(&out);
    Py_ssize_t bad;
    Py_BEGIN_ALLOW_THREADS;
    bad = read_blocks(&lines, &letters, &out);
    Py_END_ALLOW_THREADS;
    lines_release(&lines);
    Buf *bufs[MAX_BUFS];
    int n = blocks_bufs(&out, bufs);
    PyObject *result = result_tuple(bad, bufs, n);
    for (int k = 0; k < n; k++) buf_free(bufs[k]);
    return result;
}

/* -- glued headers ------------------------------------------------------------------- */

/* grammar.GLUED_HEADER from c->p to the line's end:
 * `<[0-9]+ [A-Za-z_][A-Za-z0-9_.\-]*(?:INDEX)?(?: \(phi\))?(?: @[0-9]+)?>`. */
static int glued_header(Cur *c) {
    if (!TAKE(c, "<") || !take_digits(c) || !TAKE(c, " ") || at_end(c)) return 0;
    char ch = *c->p;
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_')) return 0;
    for (c->p++; c->p < c->end; c->p++) {
        ch = *c->p;
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            break;
    }
    take_index(c);
    TAKE(c, " (phi)");
    if (TAKE(c, " @") && !take_digits(c)) return 0;
    return TAKE(c, ">") && at_end(c);
}

/* Where the header glued to a from instruction line starts, NULL if none: the text
 * after `from` and one space starts with '%' and ends with the leftmost GLUED_HEADER
 * that runs to its end, which is the one at its last '<' (a header holds one '<'). */
static const char *glued_at(Cur c, const char *from, size_t from_len) {
    if ((size_t)(c.end - c.p) < from_len || memcmp(c.p, from, from_len)) return NULL;
    c.p += from_len;
    TAKE(&c, " ");
    if (at_end(&c) || *c.p != '%' || c.end[-1] != '>') return NULL;
    const char *at = c.end - 1;
    while (at > c.p && *at != '<') at--;
    if (at == c.p) return NULL;
    Cur header = {at, c.end};
    return glued_header(&header) ? at : NULL;
}

static PyObject *glued(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *offsets, *chars;
    const char *from;
    Py_ssize_t from_len;
    if (!PyArg_ParseTuple(args, "OOs#", &offsets, &chars, &from, &from_len)) return NULL;
    Lines lines;
    if (!lines_get(offsets, chars, &lines)) return NULL;
    Buf rows = {0}, splits = {0};
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < lines.n; i++) {
        const char *at = glued_at(line_at(&lines, i), from, (size_t)from_len);
        if (at) {
            buf_i64(&rows, (int64_t)i);
            buf_i64(&splits, (int64_t)(at - lines.chars));
        }
    }
    Py_END_ALLOW_THREADS;
    lines_release(&lines);
    Buf *bufs[] = {&rows, &splits};
    PyObject *result = result_tuple(-1, bufs, 2);
    buf_free(&rows);
    buf_free(&splits);
    return result;
}

static PyMethodDef methods[] = {
    {"used_blocks", used_blocks, METH_VARARGS,
     "used_blocks(offsets, chars, letters) -> (bad, letters, id, name.., position block, "
     "name.., idx.., use block, op, name.., idx.., text.., spaced, ends)"},
    {"glued", glued, METH_VARARGS,
     "glued(offsets, chars, from) -> (-1, rows, splits): the from instruction lines with a "
     "header glued to their end, and where in chars each header starts"},
    {NULL, NULL, 0, NULL},
};

NATIVE_MODULE(_blocks, "The Used values kernels.")
