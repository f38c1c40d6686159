/* The compiled reader of instruction texts, the ` from instruction:` texts (docs/native.md).
 *
 * instructions(offsets, chars) reads each text of the common form
 *   [ROOT ]%name = SHAPE opcode(%a, %b), key=value, ..., metadata={k=v ...}
 * into the columns hlo.parse_instruction gives (instructions.PARSED), and leaves every
 * other text to parse_instruction, which reads it (or words why it cannot). The rule:
 * a text read here gives exactly parse_instruction's columns; any text may be left.
 * Each step below names the part of hlo._parse_general (the reference) it follows.
 * Loops are bounded by the text's end; brackets nest at most MAX_DEPTH deep (a fixed
 * stack, no recursion); every text is read in linear time.
 */
#include "native.h"

#define MAX_DEPTH 128
#define MAX_SHAPE_DEPTH 32 /* shapes._MAX_DEPTH is 100 */

/* -- output columns ------------------------------------------------------------------ */

typedef struct {
    StrCol text;
    Buf valid; /* uint8 per row */
} OptStr;

typedef struct {
    Buf value; /* int32 per row, 0 where null */
    Buf valid;
} OptInt;

typedef struct {
    Buf offsets; /* int32, one more than rows */
    StrCol items;
} StrList;

typedef struct {
    Buf rows; /* int64: the index of each text read */
    StrCol opcode, shape;
    StrList operands, called;
    OptInt parameter_number, source_line, stack_frame_id;
    OptStr fusion_kind, custom_call_target, op_name, op_type, source_file;
    Buf scratch; /* an unquoted value, before it is put in its column */
} Out;

#define OUT_BUFS 33

/* Every buffer of `out`, for marking, rolling back, checking and freeing all at once. */
static int out_bufs(Out *o, Buf **all) {
    int k = 0;
    all[k++] = &o->rows;
    StrCol *strings[] = {&o->opcode, &o->shape, &o->operands.items, &o->called.items,
                         &o->fusion_kind.text, &o->custom_call_target.text, &o->op_name.text,
                         &o->op_type.text, &o->source_file.text};
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) {
        all[k++] = &strings[i]->offsets;
        all[k++] = &strings[i]->chars;
    }
    Buf *others[] = {&o->operands.offsets, &o->called.offsets, &o->parameter_number.value,
                     &o->parameter_number.valid, &o->source_line.value, &o->source_line.valid,
                     &o->stack_frame_id.value, &o->stack_frame_id.valid, &o->fusion_kind.valid,
                     &o->custom_call_target.valid, &o->op_name.valid, &o->op_type.valid,
                     &o->source_file.valid, &o->scratch};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) all[k++] = others[i];
    return k;
}

static void out_init(Out *o) {
    memset(o, 0, sizeof *o);
    StrCol *strings[] = {&o->opcode, &o->shape, &o->operands.items, &o->called.items,
                         &o->fusion_kind.text, &o->custom_call_target.text, &o->op_name.text,
                         &o->op_type.text, &o->source_file.text};
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) str_init(strings[i]);
    int32_t zero = 0;
    buf_put(&o->operands.offsets, &zero, sizeof zero);
    buf_put(&o->called.offsets, &zero, sizeof zero);
}

static void out_free(Out *o) {
    Buf *all[OUT_BUFS];
    int n = out_bufs(o, all);
    for (int k = 0; k < n; k++) buf_free(all[k]);
}

/* The lengths of every column, to roll a text back when it is left after all. */
typedef struct {
    size_t len[OUT_BUFS];
} Mark;

static void out_mark(Out *o, Mark *m) {
    Buf *all[OUT_BUFS];
    int n = out_bufs(o, all);
    for (int k = 0; k < n; k++) m->len[k] = all[k]->len;
}

static void out_rollback(Out *o, const Mark *m) {
    Buf *all[OUT_BUFS];
    int n = out_bufs(o, all);
    for (int k = 0; k < n; k++) all[k]->len = m->len[k];
}

static void str_close(StrCol *c) { str_put(c, "", 0); }

/* Close a row of a list column: its end is the number of items so far. */
static void list_close(StrList *l) {
    size_t items = l->items.offsets.len / sizeof(int32_t) - 1;
    if (items > INT32_MAX) l->offsets.failed = 1;
    int32_t end = (int32_t)items;
    buf_put(&l->offsets, &end, sizeof end);
}

/* -- characters ---------------------------------------------------------------------- */

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static int is_alpha_(char c) { return (c >= 'A' && c <= 'Z') || is_lower(c) || c == '_'; }

/* Consume chars while `ok`; how many. */
static size_t take_while(Cur *c, int (*ok)(char)) {
    const char *start = c->p;
    while (c->p < c->end && ok(*c->p)) c->p++;
    return (size_t)(c->p - start);
}

static int name_char(char c) { return is_alpha_(c) || is_digit(c) || c == '.' || c == '-'; }
static int meta_key_char(char c) { return is_alpha_(c) || is_digit(c); }
static int opcode_char(char c) { return is_lower(c) || is_digit(c) || c == '_' || c == '-'; }
static int elem_char(char c) { return is_lower(c) || is_digit(c); }
static int tile_char(char c) { return is_digit(c) || c == '*'; }
/* A bare metadata value: printable ASCII but space, quote and brackets (a subset of
 * _META_PAIR's `[^\s"]*` that _scan crosses as plain text). */
static int bare_char(char c) { return c > ' ' && c <= '~' && !strchr("\"(){}[]", c); }
/* A bare attribute value: the same but commas, which end it. */
static int bare_attribute_char(char c) { return c != ',' && bare_char(c); }

/* `[A-Za-z_][A-Za-z0-9_.\-]*`, hlo._NAME. */
static int take_name(Cur *c) {
    if (c->p == c->end || !is_alpha_(*c->p)) return 0;
    c->p++;
    take_while(c, name_char);
    return 1;
}

/* 1 to `most` chars of `ok` (a longer run is left for the caller's next check to refuse). */
static int take_some(Cur *c, int (*ok)(char), size_t most) {
    const char *start = c->p;
    while (c->p < c->end && ok(*c->p) && (size_t)(c->p - start) < most) c->p++;
    return c->p > start;
}

/* `[0-9]{1,19}` as shapes' patterns read numbers. */
static int take_int19(Cur *c) { return take_some(c, is_digit, 19); }

/* Whether the rest of the text is whitespace (or nothing), which str.rstrip drops. */
static int rest_is_space(const Cur *c) {
    const unsigned char *p = (const unsigned char *)c->p, *end = (const unsigned char *)c->end;
    while (p < end) {
        uint32_t cp;
        int n = utf8_length(p, end, &cp);
        if (!n || !is_space(cp)) return 0;
        p += n;
    }
    return 1;
}

/* Whether [p, end) is valid UTF-8, as Python decodes it (no surrogates, no overlongs). */
static int valid_utf8(const char *p, const char *end) {
    const unsigned char *q = (const unsigned char *)p, *e = (const unsigned char *)end;
    while (q < e) {
        while (e - q >= 8) { /* eight ASCII bytes at a time */
            uint64_t word;
            memcpy(&word, q, 8);
            if (word & 0x8080808080808080ULL) break;
            q += 8;
        }
        if (q == e) break;
        uint32_t cp;
        int n = utf8_length(q, e, &cp);
        if (!n) return 0;
        q += n;
    }
    return 1;
}

/* -- the shape (shapes._FAST, or a tuple of them) ------------------------------------ */

/* `/\*index=[0-9]{1,19}\*\/`, shapes._INDEX_MARKER, if there. */
static int take_marker(Cur *c) {
    const char *start = c->p;
    if (TAKE(c, "/*index=") && take_int19(c) && TAKE(c, "*/")) return 1;
    c->p = start;
    return 0;
}

/* `[0-9]{1,19}(,[0-9]{1,19})*` or nothing. */
static int take_int_list(Cur *c) {
    if (c->p < c->end && is_digit(*c->p)) {
        do
            if (!take_int19(c)) return 0;
        while (TAKE(c, ","));
    }
    return 1;
}

static int take_tile_item(Cur *c) { return take_some(c, tile_char, 19); }

/* A dimension as _Parser reads it: `N`, `<=N` (bounded) or `?`. */
static int take_dim(Cur *c) { return TAKE(c, "?") || (TAKE(c, "<="), take_int19(c)); }

/* An array `elem[d,...]` with a layout `{m2m[:[T(..)..][E(n)][S(n)]]}`, as shapes._FAST
 * reads it, or its parser (_Parser) where a dimension is dynamic: both read it so. */
static int take_array(Cur *c) {
    if (c->p == c->end || !is_lower(*c->p)) return 0;
    take_while(c, elem_char);
    if (!TAKE(c, "[")) return 0;
    if (c->p < c->end && *c->p != ']') {
        do
            if (!take_dim(c)) return 0;
        while (TAKE(c, ","));
    }
    if (!TAKE(c, "]")) return 0;
    if (!TAKE(c, "{")) return 1;
    if (!take_int_list(c)) return 0;
    if (TAKE(c, ":")) {
        if (TAKE(c, "T")) {
            int groups = 0;
            while (TAKE(c, "(")) {
                if (!take_tile_item(c)) return 0;
                while (TAKE(c, ","))
                    if (!take_tile_item(c)) return 0;
                if (!TAKE(c, ")")) return 0;
                groups++;
            }
            if (!groups) return 0;
        }
        if (TAKE(c, "E(") && !(take_int19(c) && TAKE(c, ")"))) return 0;
        if (TAKE(c, "S(") && !(take_int19(c) && TAKE(c, ")"))) return 0;
    }
    return TAKE(c, "}");
}

/* A shape as parse_shape_at reads it: an array, or a tuple `(shape, /\*index=1*\/shape)`
 * (_Parser: a marker only after a comma) nested at most MAX_SHAPE_DEPTH deep, walked
 * without recursion: `depth` is the number of tuples open. */
static int take_shape(Cur *c) {
    int depth = 0;
    for (;;) {
        if (TAKE(c, "(")) { /* a tuple opens: its first element, or its end */
            if (++depth > MAX_SHAPE_DEPTH) return 0;
            if (!TAKE(c, ")")) continue;
            depth--;
        } else if (!take_array(c)) {
            return 0;
        }
        while (depth && TAKE(c, ")")) depth--; /* after an element: tuples that close */
        if (!depth) return 1;
        if (!TAKE(c, ", ")) return 0;
        take_marker(c);
    }
}

/* -- text hlo._scan crosses ----------------------------------------------------------- */

/* A quoted string as _scan skips it (`"(?:[^"\\]|\\.)*"`); 0 if it does not end. */
static int take_string(Cur *c) {
    if (!TAKE(c, "\"")) return 0;
    while (c->p < c->end) {
        char ch = *c->p++;
        if (ch == '"') return 1;
        if (ch == '\\') {
            if (c->p == c->end) return 0;
            c->p++;
        }
    }
    return 0;
}

/* Move to the first `stop` outside brackets and strings, or to the end, as _scan does;
 * 0 where _scan raises (unbalanced, an unended string) or past MAX_DEPTH. */
static int skip_balanced(Cur *c, char stop) {
    char expect[MAX_DEPTH];
    int depth = 0;
    while (c->p < c->end) {
        char ch = *c->p;
        if (ch == '"') {
            if (!take_string(c)) return 0;
            continue;
        }
        if (!depth && ch == stop) return 1;
        const char *open = strchr("({[", ch), *close = strchr(")}]", ch);
        if (ch && open) {
            if (depth == MAX_DEPTH) return 0;
            expect[depth++] = ")}]"[open - "({["];
        } else if (ch && close) {
            if (!depth || expect[--depth] != ch) return 0;
        }
        c->p++;
    }
    return depth == 0;
}

/* -- fields (parse_instruction's `fields` dict, a slot per key kept) ------------------- */

/* A value as written; p NULL: the key was not given. */
typedef struct {
    const char *p;
    size_t n;
} Span;

enum { KIND, TARGET, OP_NAME, OP_TYPE, SOURCE_FILE, SOURCE_LINE, STACK_FRAME_ID, FIELDS };
static const char *const FIELD_KEYS[FIELDS] = {
    "kind", "custom_call_target", "op_name", "op_type", "source_file", "source_line",
    "stack_frame_id",
};

/* The slot of `key` among the first `last` + 1 fields, -1 if none. */
static int field_of(const char *key, size_t n, int last) {
    for (int f = 0; f <= last; f++)
        if (strlen(FIELD_KEYS[f]) == n && !memcmp(FIELD_KEYS[f], key, n)) return f;
    return -1;
}

/* A value parse_instruction unquotes: a whole quoted string, or `bare` chars. */
static int take_value(Cur *c, int (*bare)(char), Span *out) {
    const char *start = c->p;
    if (c->p < c->end && *c->p == '"') {
        if (!take_string(c)) return 0;
    } else {
        take_while(c, bare);
    }
    out->p = start;
    out->n = (size_t)(c->p - start);
    return 1;
}

/* `{key=value key="value" ...}` as hlo._metadata reads it, pairs one space apart; each
 * pair sets its field. 0 for anything _metadata would not read so. */
static int take_metadata(Cur *c, Span *fields) {
    if (!TAKE(c, "{")) return 0;
    if (TAKE(c, "}")) return 1;
    do {
        const char *key = c->p;
        if (c->p == c->end || !is_alpha_(*c->p)) return 0;
        take_while(c, meta_key_char);
        size_t key_n = (size_t)(c->p - key);
        Span value;
        if (!TAKE(c, "=") || !take_value(c, bare_char, &value)) return 0;
        /* _META_PAIR's quoted value takes no escaped newline (`.`); _scan's does. */
        if (memchr(value.p, '\n', value.n) || memchr(value.p, '\r', value.n)) return 0;
        int f = field_of(key, key_n, FIELDS - 1);
        if (f >= 0) fields[f] = value;
    } while (TAKE(c, " "));
    return TAKE(c, "}");
}

/* Names as _CALLED.findall reads a called computation: `%a` or `{%a, %b}`. */
static int take_called(Cur *c, StrList *called) {
    int braced = TAKE(c, "{");
    do {
        const char *name = c->p + 1;
        if (!TAKE(c, "%") || !take_name(c)) return 0;
        str_put(&called->items, name, (size_t)(c->p - name));
    } while (braced && TAKE(c, ", "));
    return !braced || TAKE(c, "}");
}

static int is_called_key(const char *key, size_t n) {
    static const char *const keys[] = {
        "calls", "to_apply", "body", "condition", "branch_computations", "true_computation",
        "false_computation", "called_computations", "async_wrapped", "select", "scatter",
    }; /* hlo._CALLED_KEYS */
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (strlen(keys[k]) == n && !memcmp(keys[k], key, n)) return 1;
    return 0;
}

#define KEY_IS(key, n, literal) ((n) == sizeof(literal) - 1 && !memcmp((key), (literal), (n)))

/* `, key=value` to the end, as _parse_general's loop reads them; fills `fields` and
 * the called computations. Stops at backend_config after metadata, as it does; space
 * at the end is stripped, from a value too. */
static int take_attributes(Cur *c, Span *fields, StrList *called) {
    int metadata_seen = 0;
    while (!rest_is_space(c)) {
        if (!TAKE(c, ", ")) return 0;
        const char *key = c->p;
        if (!take_name(c)) return 0;
        size_t n = (size_t)(c->p - key);
        if (!TAKE(c, "=")) return 0;
        if (metadata_seen && KEY_IS(key, n, "backend_config")) return 1;
        int ok;
        if (KEY_IS(key, n, "metadata")) {
            metadata_seen = 1;
            ok = take_metadata(c, fields);
        } else if (is_called_key(key, n)) {
            ok = take_called(c, called);
        } else if (field_of(key, n, TARGET) >= 0) {
            ok = take_value(c, bare_attribute_char, &fields[field_of(key, n, TARGET)]);
        } else {
            ok = skip_balanced(c, ','); /* a value parse_instruction does not keep */
        }
        if (!ok || !(rest_is_space(c) || *c->p == ',')) return 0;
    }
    return 1;
}

/* -- the head and the arguments ------------------------------------------------------- */

/* `parameter(N)`'s N, as _PARAM reads it, within int32 (larger ones are the slow path's
 * to word). */
static int take_parameter_number(Cur *c, int32_t *number) {
    const char *start = c->p;
    if (!take_int19(c) || (c->p < c->end && is_digit(*c->p))) return 0;
    uint64_t v = 0;
    for (const char *p = start; p < c->p; p++) v = v * 10 + (uint64_t)(*p - '0');
    if (v > INT32_MAX) return 0;
    *number = (int32_t)v;
    return 1;
}

/* `%a, %b, /\*index=2*\/%c` (or nothing) as _operand_names reads it, each name after its
 * shape too (`f32[2]{0} %a`, as older XLA prints them). */
static int take_operands(Cur *c, StrList *operands) {
    if (c->p < c->end && *c->p == ')') return 1;
    do {
        take_marker(c);
        if (c->p < c->end && *c->p != '%' && !(take_shape(c) && TAKE(c, " "))) return 0;
        const char *name = c->p + 1;
        if (!TAKE(c, "%") || !take_name(c)) return 0;
        str_put(&operands->items, name, (size_t)(c->p - name));
    } while (TAKE(c, ", "));
    return 1;
}

/* -- unquoting (hlo._unquote) ---------------------------------------------------------- */

static int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The bytes absl::CEscape's escape at p (after its backslash) stands for; how many
 * chars it takes, 0 if the char there is not UTF-8. */
static size_t unescape(const char *p, const char *end, Buf *out) {
    static const char from[] = "nt\"'\\?abfvr", to[] = "\n\t\"'\\?\a\b\f\v\r";
    size_t n = 0;
    unsigned value = 0;
    while (n < 3 && p + n < end && p[n] >= '0' && p[n] <= '7') value = value * 8 + (unsigned)(p[n++] - '0');
    if (n) {
        buf_u8(out, (uint8_t)(value & 0xFF));
        return n;
    }
    if (*p == 'x' && p + 1 < end && hex_value(p[1]) >= 0) {
        value = (unsigned)hex_value(p[1]);
        n = 2;
        if (p + 2 < end && hex_value(p[2]) >= 0) value = value * 16 + (unsigned)hex_value(p[n++]);
        buf_u8(out, (uint8_t)value);
        return n;
    }
    const char *escape = *p ? strchr(from, *p) : NULL;
    if (escape) {
        buf_u8(out, (uint8_t)to[escape - from]);
        return 1;
    }
    uint32_t code;
    int length = utf8_length((const unsigned char *)p, (const unsigned char *)end, &code);
    buf_put(out, p, (size_t)length);
    return (size_t)length;
}

/* The value as _unquote gives it, in out->scratch; 0 if its bytes would not be UTF-8
 * (_unquote replaces them: the slow path's). */
static int unquote(const Span *value, Out *out) {
    Buf *s = &out->scratch;
    s->len = 0;
    if (value->n < 2 || value->p[0] != '"' || value->p[value->n - 1] != '"') {
        buf_put(s, value->p, value->n);
        return 1;
    }
    const char *p = value->p + 1, *end = value->p + value->n - 1;
    if (!memchr(p, '\\', (size_t)(end - p))) {
        buf_put(s, p, (size_t)(end - p));
        return 1;
    }
    while (p < end) {
        if (*p != '\\' || p + 1 == end) {
            buf_u8(s, (uint8_t)*p++);
            continue;
        }
        size_t taken = unescape(p + 1, end, s);
        if (!taken) return 0;
        p += 1 + taken;
    }
    return !s->failed && valid_utf8(s->data, s->data + s->len);
}

/* A string field: its unquoted value, or null. */
static int put_field_string(const Span *value, OptStr *column, Out *out) {
    buf_u8(&column->valid, value->p != NULL);
    if (value->p) {
        if (!unquote(value, out)) return 0;
        buf_put(&column->text.chars, out->scratch.data, out->scratch.len);
    }
    str_close(&column->text);
    return 1;
}

static void put_int(OptInt *column, int has, int32_t v) {
    buf_u8(&column->valid, (uint8_t)has);
    int32_t stored = has ? v : 0;
    buf_put(&column->value, &stored, sizeof stored);
}

/* A number field as _int_or_none reads its unquoted value (`-?[0-9]{1,19}`, else null);
 * 0 if it is one but past int32 (the slow path words it). */
static int put_field_int(const Span *value, OptInt *column, Out *out) {
    if (!value->p) {
        put_int(column, 0, 0);
        return 1;
    }
    if (!unquote(value, out)) return 0;
    const char *p = out->scratch.data, *end = p + out->scratch.len;
    int negative = p < end && *p == '-';
    p += negative;
    size_t digits = 0;
    while (p + digits < end && is_digit(p[digits])) digits++;
    if (!digits || digits > 19 || p + digits != end) {
        put_int(column, 0, 0);
        return 1;
    }
    uint64_t v = 0;
    for (size_t k = 0; k < digits; k++) v = v * 10 + (uint64_t)(p[k] - '0');
    if (v > (uint64_t)INT32_MAX + negative) return 0;
    put_int(column, 1, negative ? (int32_t)(-(int64_t)v) : (int32_t)v);
    return 1;
}

/* -- one text ------------------------------------------------------------------------- */

/* Read one text into `out` (1), or leave it and its columns untouched (0). */
static int read_text(Cur *c, Out *out) {
    if (!valid_utf8(c->p, c->end)) return 0;
    while (TAKE(c, " ")) {
    }
    TAKE(c, "ROOT ");
    if (!TAKE(c, "%") || !take_name(c) || !TAKE(c, " = ")) return 0;
    const char *shape = c->p;
    if (!take_shape(c)) return 0;
    const char *shape_end = c->p;
    if (!TAKE(c, " ")) return 0;
    const char *opcode = c->p;
    if (at_end(c) || !is_lower(*opcode)) return 0;
    size_t opcode_n = take_while(c, opcode_char);
    if (!TAKE(c, "(")) return 0;
    int32_t parameter = 0;
    int is_parameter = KEY_IS(opcode, opcode_n, "parameter");
    if (is_parameter) {
        if (!take_parameter_number(c, &parameter)) return 0;
    } else if (KEY_IS(opcode, opcode_n, "constant")) {
        if (!skip_balanced(c, ')') || at_end(c)) return 0;
    } else if (!take_operands(c, &out->operands)) {
        return 0;
    }
    if (!TAKE(c, ")")) return 0;
    list_close(&out->operands);
    Span fields[FIELDS] = {{0}};
    if (!take_attributes(c, fields, &out->called)) return 0;
    list_close(&out->called);
    str_put(&out->opcode, opcode, opcode_n);
    str_put(&out->shape, shape, (size_t)(shape_end - shape));
    put_int(&out->parameter_number, is_parameter, parameter);
    return put_field_string(&fields[KIND], &out->fusion_kind, out) &&
           put_field_string(&fields[TARGET], &out->custom_call_target, out) &&
           put_field_string(&fields[OP_NAME], &out->op_name, out) &&
           put_field_string(&fields[OP_TYPE], &out->op_type, out) &&
           put_field_string(&fields[SOURCE_FILE], &out->source_file, out) &&
           put_field_int(&fields[SOURCE_LINE], &out->source_line, out) &&
           put_field_int(&fields[STACK_FRAME_ID], &out->stack_frame_id, out);
}

static void read_all(const Lines *lines, Out *out) {
    Mark mark;
    for (Py_ssize_t i = 0; i < lines->n; i++) {
        Cur c = line_at(lines, i);
        out_mark(out, &mark);
        if (read_text(&c, out))
            buf_i64(&out->rows, (int64_t)i);
        else
            out_rollback(out, &mark);
    }
}

/* -- the module ------------------------------------------------------------------------ */

static PyObject *instructions(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *offsets, *chars;
    if (!PyArg_ParseTuple(args, "OO", &offsets, &chars)) return NULL;
    Lines lines;
    if (!lines_get(offsets, chars, &lines)) return NULL;
    Out out;
    out_init(&out);
    Py_BEGIN_ALLOW_THREADS;
    read_all(&lines, &out);
    Py_END_ALLOW_THREADS;
    lines_release(&lines);
    Buf *const bufs[] = {
        &out.rows, &out.opcode.offsets, &out.opcode.chars, &out.shape.offsets,
        &out.shape.chars, &out.operands.offsets, &out.operands.items.offsets,
        &out.operands.items.chars, &out.parameter_number.value, &out.parameter_number.valid,
        &out.fusion_kind.text.offsets, &out.fusion_kind.text.chars, &out.fusion_kind.valid,
        &out.called.offsets, &out.called.items.offsets, &out.called.items.chars,
        &out.custom_call_target.text.offsets, &out.custom_call_target.text.chars,
        &out.custom_call_target.valid, &out.op_name.text.offsets, &out.op_name.text.chars,
        &out.op_name.valid, &out.op_type.text.offsets, &out.op_type.text.chars,
        &out.op_type.valid, &out.source_file.text.offsets, &out.source_file.text.chars,
        &out.source_file.valid, &out.source_line.value, &out.source_line.valid,
        &out.stack_frame_id.value, &out.stack_frame_id.valid,
    };
    PyObject *result = bytes_tuple(bufs, (Py_ssize_t)(sizeof bufs / sizeof *bufs));
    out_free(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"instructions", instructions, METH_VARARGS,
     "instructions(offsets, chars) -> (rows, then the buffers of each instructions.PARSED "
     "column in order: offsets and chars of strings, list offsets, int32 values, uint8 "
     "validity) over the texts read"},
    {NULL, NULL, 0, NULL},
};

NATIVE_MODULE(_instructions, "The instruction texts' kernel.")
