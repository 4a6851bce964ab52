/* msprobe's dump.json as columns, in one pass over the bytes (statistics triage at LLM scale).
 *
 * A 100k-call statistics dump.json is about 100 MB of small objects: json.loads / orjson build
 * some ten million Python objects from it (2 s a side) only for msprobe.recorded() to walk them
 * into columns. Here the walk is done on the text itself: the tensors' statistics, dtypes, shapes,
 * checksums and names come out as columns, and only those become Python objects.
 *
 * scan(data: bytes) -> tuple | None
 *
 * The walk is msprobe.py's (_entries and _walk), rule for rule: the calls of the top-level "data"
 * object in order; in each, the slots input_args, input_kwargs, parameters and input (inputs), output and
 * parameters_grad (outputs), or, for a parameters_grad call, the whole entry (outputs); in a slot, an object holding "dtype" and "shape" is a tensor, a list
 * is walked by position (".0"), an object without "type" by key (".key"), an object with one or a
 * null is a value's row, anything else is no row, except a damaged tensor entry (an object with "type" and "data_name", or a type ending
 * in "Tensor", without dtype and shape both): that one Python names (None). msprobe.py holds the Python version of the same walk, used when this module is absent and
 * whenever scan() returns None; the tests hold the two to the same columns.
 *
 * Where valid JSON leaves a choice, the rule is what json.loads (and orjson) then float() make of it,
 * which is what msprobe's own compare reads:
 *   a call named twice in "data"   one call, where the name first stands, with the last one's
 *                                  tensors (a dict keeps the last value of a key)
 *   an integer statistic           float(int): correctly rounded; past float's range (400 digits,
 *                                  or 5,000: past Python's int() limit too) -inf or inf; -0 is the
 *                                  integer 0, so 0.0 (-0.0 and -0e0 are floats: -0.0)
 *   a dimension                    an int64 >= 0 (as msprobe.py's _shape): one past 2^63 makes the
 *                                  shape "[]", like a negative one
 *
 * None means "not what this scanner interprets; let Python read it" and is never an error: text
 * that is not JSON (Python's json module decides what to say), a document without a "data" object,
 * a call that is not an object, a damaged tensor entry, a string with an escape where its value
 * matters (call names, keys walked, dtype, md5, a record's type), a duplicate key in an object walked, a statistic or md5 of an unexpected
 * type, nesting deeper than MAX_DEPTH. Python's json grammar is followed exactly otherwise,
 * including NaN, Infinity and -Infinity, strict UTF-8 and no control characters in strings.
 *
 * The scan runs without the GIL (the bytes object is immutable and held), so two sides scan in
 * parallel threads; the Python objects are made afterwards, with it.
 *
 * Returned tuple, one entry per tensor (row) unless said:
 *   calls      list[str]  every key of "data", in order (one entry per call)
 *   call_of    bytes      int64 per row: its call's position in calls
 *   slot       bytes      uint8 per row: 0 input_args, 1 input_kwargs, 2 parameters, 3 output,
 *                         4 parameters_grad, 5 input (a backward call's), 6 a parameters_grad call's
 *                         whole entry ({parameter: [tensor]}, named {call}.{parameter})
 *   index      bytes      int64 per row: its position among its call's inputs (slots 0-2, 5) or
 *                         outputs (3, 4, 6)
 *   names      list[str]  "{call}.{input|parameters|output|parameters_grad}{suffix}"
 *   dtypes     list[str]  as written ("torch.float32")
 *   shapes     list[str]  "[4096,4096]"; "[]" where the shape is not a list of int64 >= 0
 *   stats      bytes      float64 x4 per row: Max, Min, Mean, Norm; NaN where not recorded
 *   has        bytes      uint8 per row: any of the four recorded
 *   md5        list[str]  "" where not recorded
 *   data_name  bytes      uint8 per row: a non-empty data_name (a tensor file) is named
 *   values     list       None on a tensor's row; on a non-tensor value's row (a record with a "type"
 *                         and no dtype and shape, or a null: msprobe's compare lists it as a row with
 *                         no tensor) its JSON text as written ("null" for a null or a record without
 *                         "value"), its type in dtypes ("" for a null), shape "[]", nothing recorded;
 *                         a value takes its place in the call's inputs or outputs as a tensor does
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <locale.h>
static locale_t c_locale = (locale_t)0;  /* made once at import: numbers read as C writes them */
#endif

#define MAX_DEPTH 200   /* nesting of the document; deeper: Python's reader decides */
#define MAX_KEYS 1024    /* keys of one object walked for tensors */
#define MAX_SUFFIX 4096 /* bytes of a tensor's name after its slot */
#define MAX_INT_DIGITS 19  /* 10^19 - 1 < 2^64: an int64 or past it, told apart exactly */

typedef struct { const char *s; Py_ssize_t n; } Span;

typedef struct {
    Py_ssize_t call, index;
    uint8_t slot, has, data_name, is_value;
    Span dtype, md5, value;  /* a value's row: dtype is its type, value its JSON text as written */
    Py_ssize_t suffix_at, shape_at;  /* offsets in the arena: NUL-terminated texts */
    double stats[4];
} Row;

typedef struct {
    const char *p, *end;
    int bad;              /* set: return None */
    Row *rows; Py_ssize_t nrows, caprows;
    Span *calls; Py_ssize_t ncalls, capcalls;
    char *arena; Py_ssize_t narena, caparena;
    int oom;
    char suffix[MAX_SUFFIX + 1];
    struct Member *levels[MAX_DEPTH + 2];  /* the members of the object walked at each depth */
    /* call names seen: open addressing over the distinct ones (id + 1; 0 free) */
    Py_ssize_t *table; Py_ssize_t captable;
    Py_ssize_t *uid; Py_ssize_t capuid;           /* per call in "data": its distinct name's id */
    Py_ssize_t *first, *last; Py_ssize_t capfirst, caplast, ndistinct;  /* per distinct name: where it stands */
    int twice;                                    /* a name stands twice: dedupe() before results */
} Scan;

/* slot codes: msprobe.py's _SLOTS order; GRADS is the whole entry of a parameters_grad call */
static const char *SLOTS[] = {"input_args", "input_kwargs", "parameters", "output", "parameters_grad", "input"};
static const char *SLOT_NAMES[] = {".input", ".input", ".parameters", ".output", ".parameters_grad", ".input", ""};
#define NSLOTS 6
#define GRADS 6
#define IS_OUTPUT(slot) ((slot) == 3 || (slot) == 4 || (slot) == GRADS)
static const char *STATS[] = {"Max", "Min", "Mean", "Norm"};

static int fail(Scan *S) { S->bad = 1; return -1; }

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t size, Scan *S)
{
    if (need <= *cap) return 0;
    Py_ssize_t cap2 = *cap ? *cap * 2 : 1024;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*buf, (size_t)cap2 * size);
    if (!p) { S->oom = 1; return fail(S); }
    *buf = p; *cap = cap2;
    return 0;
}

static Py_ssize_t arena_put(Scan *S, const char *s, Py_ssize_t n)
{
    if (grow((void **)&S->arena, &S->caparena, S->narena + n + 1, 1, S) < 0) return -1;
    Py_ssize_t at = S->narena;
    memcpy(S->arena + at, s, (size_t)n);
    S->arena[at + n] = 0;
    S->narena += n + 1;
    return at;
}

static void ws(Scan *S)
{
    const char *p = S->p, *end = S->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    S->p = p;
}

static int eat(Scan *S, char c)
{
    ws(S);
    if (S->p < S->end && *S->p == c) { S->p++; return 1; }
    return 0;
}

/* One UTF-8 sequence starting at p (a byte >= 0x80) as Python's strict decoder accepts it;
 * its length, 0 when invalid. */
static int utf8_length(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    int n; unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 0;
    if (end - p < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++) if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

static int hex4(const char *p)
{
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return 0;
    }
    return 1;
}

/* A string at S->p (after whitespace): its raw bytes between the quotes; *escaped when it holds
 * a backslash (its raw bytes are then not its value). */
static int string(Scan *S, Span *out, int *escaped)
{
    ws(S);
    if (S->p >= S->end || *S->p != '"') return fail(S);
    const unsigned char *p = (const unsigned char *)S->p + 1, *end = (const unsigned char *)S->end;
    const unsigned char *start = p;
    int esc = 0;
    while (p < end) {
        unsigned c = *p;
        if (c == '"') {
            out->s = (const char *)start; out->n = (const char *)p - (const char *)start;
            if (escaped) *escaped = esc;
            S->p = (const char *)p + 1;
            return 0;
        }
        if (c == '\\') {
            esc = 1;
            if (end - p < 2) return fail(S);
            c = p[1];
            if (c == 'u') {
                if (end - p < 6 || !hex4((const char *)p + 2)) return fail(S);
                p += 6;
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
                p += 2;
            } else return fail(S);
        } else if (c < 0x20) {
            return fail(S);
        } else if (c < 0x80) {
            p++;
        } else {
            int n = utf8_length(p, end);
            if (!n) return fail(S);
            p += n;
        }
    }
    return fail(S);
}

/* A number as JSON (and Python's json) writes it, or NaN / Infinity / -Infinity. *value when
 * asked; *integer: digits only (no fraction or exponent) within int64 (|v| < 2^63), then *ivalue. */
static int number(Scan *S, double *value, int *integer, long long *ivalue)
{
    ws(S);
    const char *p = S->p, *end = S->end, *start = p;
    if (end - p >= 3 && memcmp(p, "NaN", 3) == 0) {
        S->p = p + 3; if (value) *value = NAN; if (integer) *integer = 0; return 0;
    }
    int neg = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (end - p >= 8 && memcmp(p, "Infinity", 8) == 0) {
        S->p = p + 8; if (value) *value = neg ? -INFINITY : INFINITY; if (integer) *integer = 0; return 0;
    }
    const char *digits = p;
    if (p < end && *p == '0') p++;
    else if (p < end && *p >= '1' && *p <= '9') { while (p < end && *p >= '0' && *p <= '9') p++; }
    else return fail(S);
    Py_ssize_t ndigits = p - digits;
    int is_int = 1;
    if (p < end && *p == '.') {
        p++; is_int = 0;
        if (!(p < end && *p >= '0' && *p <= '9')) return fail(S);
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++; is_int = 0;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!(p < end && *p >= '0' && *p <= '9')) return fail(S);
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    S->p = p;
    if (integer) {
        *integer = 0;
        unsigned long long v = 0;
        if (is_int && ndigits <= MAX_INT_DIGITS)
            for (const char *q = digits; q < digits + ndigits; q++) v = v * 10 + (unsigned long long)(*q - '0');
        if (is_int && ndigits <= MAX_INT_DIGITS && v < (1ULL << 63)) {
            *integer = 1; *ivalue = neg ? -(long long)v : (long long)v;
        }
    }
    if (value) {
        char tmp[64], *heap = NULL, *text = tmp;
        Py_ssize_t n = p - start;
        if (n >= (Py_ssize_t)sizeof tmp) {
            heap = malloc((size_t)n + 1);
            if (!heap) { S->oom = 1; return fail(S); }
            text = heap;
        }
        memcpy(text, start, (size_t)n); text[n] = 0;
#if defined(__GLIBC__)
        *value = c_locale ? strtod_l(text, NULL, c_locale) : strtod(text, NULL);
#else
        *value = strtod(text, NULL);  /* Python leaves LC_NUMERIC at "C" */
#endif
        free(heap);
        if (is_int && ndigits == 1 && *digits == '0') *value = 0.0;  /* the integer -0 is 0 */
    }
    return 0;
}

static int literal(Scan *S, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(S->end - S->p) >= n && memcmp(S->p, word, n) == 0) { S->p += n; return 0; }
    return fail(S);
}

static int skip(Scan *S, int depth)
{
    if (depth > MAX_DEPTH) return fail(S);
    ws(S);
    if (S->p >= S->end) return fail(S);
    Span s;
    switch (*S->p) {
    case '"': return string(S, &s, NULL);
    case '{':
        S->p++;
        if (eat(S, '}')) return 0;
        do {
            if (string(S, &s, NULL) < 0 || !eat(S, ':') || skip(S, depth + 1) < 0) return fail(S);
        } while (eat(S, ','));
        return eat(S, '}') ? 0 : fail(S);
    case '[':
        S->p++;
        if (eat(S, ']')) return 0;
        do {
            if (skip(S, depth + 1) < 0) return fail(S);
        } while (eat(S, ','));
        return eat(S, ']') ? 0 : fail(S);
    case 't': return literal(S, "true");
    case 'f': return literal(S, "false");
    case 'n': return literal(S, "null");
    default: return number(S, NULL, NULL, NULL);
    }
}

static int key_is(Span k, const char *word) { return (size_t)k.n == strlen(word) && memcmp(k.s, word, (size_t)k.n) == 0; }

typedef struct Member { Span key; const char *value; } Member;

static Member *level(Scan *S, int depth)
{
    if (depth > MAX_DEPTH) { fail(S); return NULL; }
    if (!S->levels[depth] && !(S->levels[depth] = malloc(sizeof(Member) * MAX_KEYS))) { S->oom = 1; fail(S); }
    return S->levels[depth];
}

/* The members of the object at S->p (keys unescaped, no key twice), values skipped; S->p after it. */
static Py_ssize_t members(Scan *S, Member *out, int depth)
{
    ws(S);
    if (S->p >= S->end || *S->p != '{') return fail(S);
    S->p++;
    Py_ssize_t n = 0;
    if (eat(S, '}')) return 0;
    do {
        int escaped;
        if (n == MAX_KEYS || string(S, &out[n].key, &escaped) < 0 || escaped || !eat(S, ':')) return fail(S);
        for (Py_ssize_t i = 0; i < n; i++)
            if (out[i].key.n == out[n].key.n && memcmp(out[i].key.s, out[n].key.s, (size_t)out[n].key.n) == 0)
                return fail(S);
        ws(S);
        out[n].value = S->p;
        if (skip(S, depth + 1) < 0) return -1;
        n++;
    } while (eat(S, ','));
    return eat(S, '}') ? n : fail(S);
}

/* The value at `at` read as a new cursor position (values were checked by skip already). */
static void seek(Scan *S, const char *at) { S->p = at; }

static int shape_text(Scan *S, Py_ssize_t *at)
{
    char text[MAX_SUFFIX + 32];
    Py_ssize_t n = 0;
    text[n++] = '[';
    int ok = 1;
    ws(S);
    if (S->p < S->end && *S->p == '[') {
        S->p++;
        if (!eat(S, ']')) {
            do {
                ws(S);
                int integer = 0; long long v = 0;
                if (S->p < S->end && (*S->p == '-' || (*S->p >= '0' && *S->p <= '9'))) {
                    if (number(S, NULL, &integer, &v) < 0) return -1;
                    if (!integer || v < 0) ok = 0;  /* a dimension is an int64 >= 0 (big: past it) */
                    else if (ok) {
                        if (n > MAX_SUFFIX) return fail(S);
                        n += snprintf(text + n, 24, n > 1 ? ",%lld" : "%lld", v);
                    }
                } else {
                    ok = 0;
                    if (skip(S, 1) < 0) return -1;
                }
            } while (eat(S, ','));
            if (!eat(S, ']')) return fail(S);
        }
    } else ok = 0;
    if (!ok) n = 1;
    text[n++] = ']';
    *at = arena_put(S, text, n);
    return *at < 0 ? -1 : 0;
}

static int tensor(Scan *S, Member *m, Py_ssize_t n, Py_ssize_t call, uint8_t slot, Py_ssize_t index, Py_ssize_t suffix_len)
{
    if (grow((void **)&S->rows, &S->caprows, S->nrows + 1, sizeof(Row), S) < 0) return -1;
    Row *r = &S->rows[S->nrows];
    memset(r, 0, sizeof *r);
    r->call = call; r->slot = slot; r->index = index;
    for (int j = 0; j < 4; j++) r->stats[j] = NAN;
    if ((r->suffix_at = arena_put(S, S->suffix, suffix_len)) < 0) return -1;
    r->shape_at = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Span k = m[i].key;
        seek(S, m[i].value);
        char c = *S->p;
        if (key_is(k, "dtype")) {
            int escaped;
            if (c != '"' || string(S, &r->dtype, &escaped) < 0 || escaped) return fail(S);
        } else if (key_is(k, "shape")) {
            if (shape_text(S, &r->shape_at) < 0) return -1;
        } else if (key_is(k, "md5")) {
            int escaped;
            if (c == '"') { if (string(S, &r->md5, &escaped) < 0 || escaped) return fail(S); }
            else if (c == 'n' || c == 'f') r->md5.n = 0;  /* null, false: not recorded */
            else return fail(S);
        } else if (key_is(k, "data_name")) {
            Span s;
            r->data_name = c == '"' && string(S, &s, NULL) == 0 && s.n > 0;
        } else {
            for (int j = 0; j < 4; j++) {
                if (!key_is(k, STATS[j])) continue;
                if (c == 't' || c == 'f') { r->stats[j] = c == 't'; r->has = 1; }
                else if (c == '-' || c == 'N' || c == 'I' || (c >= '0' && c <= '9')) {
                    if (number(S, &r->stats[j], NULL, NULL) < 0) return -1;
                    r->has = 1;
                } else if (c == '"') return fail(S);  /* a statistic as text: Python's float() decides */
                /* null, a list or an object: not recorded */
            }
        }
    }
    S->nrows++;
    return 0;
}

typedef struct { Py_ssize_t call; uint8_t slot; Py_ssize_t *counters; } Where;

/* A non-tensor value's row (msprobe.py's _walk): a record with a "type" and no dtype and shape, or a
 * null; `type` its type ("" for a null or a type that is no string), `value` its JSON text. */
static int value_row(Scan *S, Where *w, Py_ssize_t suffix_len, Span type, Span value)
{
    if (grow((void **)&S->rows, &S->caprows, S->nrows + 1, sizeof(Row), S) < 0) return -1;
    Row *r = &S->rows[S->nrows];
    memset(r, 0, sizeof *r);
    r->call = w->call; r->slot = w->slot; r->index = w->counters[IS_OUTPUT(w->slot)]++;
    r->is_value = 1; r->dtype = type; r->value = value;
    for (int j = 0; j < 4; j++) r->stats[j] = NAN;
    if ((r->suffix_at = arena_put(S, S->suffix, suffix_len)) < 0) return -1;
    r->shape_at = -1;
    S->nrows++;
    return 0;
}

/* The value at S->p in a slot: tensors found become rows; S->p after the value. */
static int walk(Scan *S, Where *w, Py_ssize_t suffix_len, int depth)
{
    if (depth > MAX_DEPTH) return fail(S);
    ws(S);
    if (S->p >= S->end) return fail(S);
    char c = *S->p;
    if (c == '[') {
        S->p++;
        if (eat(S, ']')) return 0;
        Py_ssize_t i = 0;
        do {
            if (suffix_len > MAX_SUFFIX - 24) return fail(S);
            /* a parameters_grad call's lists add no position to the name (msprobe's compare names them so) */
            int k = w->slot == GRADS ? (i++, 0) : snprintf(S->suffix + suffix_len, 24, ".%zd", i++);
            if (walk(S, w, suffix_len + k, depth + 1) < 0) return -1;
        } while (eat(S, ','));
        return eat(S, ']') ? 0 : fail(S);
    }
    if (c == 'n') {  /* a None argument or output */
        Span null = {S->p, 4};
        if (literal(S, "null") < 0) return -1;
        return value_row(S, w, suffix_len, (Span){NULL, 0}, null);
    }
    if (c != '{') return skip(S, depth);
    Member *m = level(S, depth);
    if (!m) return -1;
    Py_ssize_t n = members(S, m, depth);
    if (n < 0) return -1;
    const char *after = S->p;
    int dtype = 0, shape = 0, data_name = 0;
    Py_ssize_t type = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        dtype |= key_is(m[i].key, "dtype"); shape |= key_is(m[i].key, "shape");
        data_name |= key_is(m[i].key, "data_name");
        if (key_is(m[i].key, "type")) type = i;
    }
    if (dtype && shape) {
        Py_ssize_t *counter = &w->counters[IS_OUTPUT(w->slot)];
        if (tensor(S, m, n, w->call, w->slot, (*counter)++, suffix_len) < 0) return -1;
    } else if (type >= 0) {
        /* a record: a tensor's without its dtype or shape (a data_name, a type ending in "Tensor")
         * is a damaged entry Python names (msprobe._damaged); an escaped type: Python decides */
        if (data_name) return fail(S);
        seek(S, m[type].value);
        Span t = {NULL, 0}, value = {"null", 4};
        if (*S->p == '"') {
            int escaped;
            if (string(S, &t, &escaped) < 0) return -1;
            if (escaped || (t.n >= 6 && memcmp(t.s + t.n - 6, "Tensor", 6) == 0)) return fail(S);
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!key_is(m[i].key, "value")) continue;
            seek(S, m[i].value);
            const char *start = S->p;
            if (skip(S, depth + 1) < 0) return -1;
            value.s = start; value.n = S->p - start;
        }
        if (value_row(S, w, suffix_len, t, value) < 0) return -1;
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            if (suffix_len + 1 + m[i].key.n > MAX_SUFFIX - 24) return fail(S);
            S->suffix[suffix_len] = '.';
            memcpy(S->suffix + suffix_len + 1, m[i].key.s, (size_t)m[i].key.n);
            seek(S, m[i].value);
            if (walk(S, w, suffix_len + 1 + m[i].key.n, depth + 1) < 0) return -1;
        }
    }
    S->p = after;
    return 0;
}

/* `Module.fc1.Linear.parameters_grad.0` (older msprobe: no counter): msprobe.is_grads */
static int is_grads(Span name)
{
    static const char word[] = "parameters_grad";
    const Py_ssize_t w = (Py_ssize_t)sizeof word - 1;
    Py_ssize_t end = name.n, k = end;
    while (k > 0 && name.s[k - 1] >= '0' && name.s[k - 1] <= '9') k--;
    if (k < end && k > 0 && name.s[k - 1] == '.') end = k - 1;  /* a counter after it */
    Py_ssize_t at = end - w;
    return at >= 1 && name.s[at - 1] == '.' && memcmp(name.s + at, word, (size_t)w) == 0;
}

static int call_entry(Scan *S, Py_ssize_t call)
{
    Member *m = level(S, 2);
    if (!m) return -1;
    ws(S);
    if (S->p >= S->end || *S->p != '{') return fail(S);  /* a call that is not an object: Python says so */
    const char *start = S->p;
    Py_ssize_t n = members(S, m, 2);
    if (n < 0) return -1;
    const char *after = S->p;
    Py_ssize_t counters[2] = {0, 0};
    if (is_grads(S->calls[call])) {  /* {parameter: [tensor]}: the entry is the slot */
        Where w = {call, GRADS, counters};
        S->p = start;
        if (walk(S, &w, 0, 3) < 0) return -1;
        S->p = after;
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        for (uint8_t s = 0; s < NSLOTS; s++) {
            if (!key_is(m[i].key, SLOTS[s])) continue;
            Where w = {call, s, counters};
            seek(S, m[i].value);
            if (walk(S, &w, 0, 3) < 0) return -1;
        }
    }
    S->p = after;
    return 0;
}

static size_t hash_span(Span k)
{
    size_t h = 1469598103934665603ULL;  /* FNV-1a */
    for (Py_ssize_t i = 0; i < k.n; i++) { h ^= (unsigned char)k.s[i]; h *= 1099511628211ULL; }
    return h;
}

static int same_span(Span a, Span b) { return a.n == b.n && memcmp(a.s, b.s, (size_t)a.n) == 0; }

/* Call S->ncalls (just read) among the names seen: its distinct id in S->uid, S->twice when seen before. */
static int note_call(Scan *S)
{
    Py_ssize_t k = S->ncalls;
    if (grow((void **)&S->uid, &S->capuid, k + 1, sizeof(Py_ssize_t), S) < 0) return -1;
    if (2 * (S->ndistinct + 1) > S->captable) {  /* rehash into a table twice the size */
        Py_ssize_t cap = S->captable ? S->captable * 2 : 1024;
        Py_ssize_t *table = calloc((size_t)cap, sizeof(Py_ssize_t));
        if (!table) { S->oom = 1; return fail(S); }
        for (Py_ssize_t u = 0; u < S->ndistinct; u++) {
            size_t i = hash_span(S->calls[S->first[u]]) & (size_t)(cap - 1);
            while (table[i]) i = (i + 1) & (size_t)(cap - 1);
            table[i] = u + 1;
        }
        free(S->table);
        S->table = table; S->captable = cap;
    }
    Span name = S->calls[k];
    size_t i = hash_span(name) & (size_t)(S->captable - 1);
    while (S->table[i]) {
        Py_ssize_t u = S->table[i] - 1;
        if (same_span(S->calls[S->first[u]], name)) {
            S->uid[k] = u; S->last[u] = k; S->twice = 1;
            return 0;
        }
        i = (i + 1) & (size_t)(S->captable - 1);
    }
    Py_ssize_t u = S->ndistinct;
    if (grow((void **)&S->first, &S->capfirst, u + 1, sizeof(Py_ssize_t), S) < 0 ||
        grow((void **)&S->last, &S->caplast, u + 1, sizeof(Py_ssize_t), S) < 0) return -1;
    S->first[u] = S->last[u] = k; S->uid[k] = u; S->ndistinct++;
    S->table[i] = u + 1;
    return 0;
}

/* A name standing twice: one call per name where it first stands, with the rows of its last
 * occurrence (as a dict built from the pairs in order holds it). */
static int dedupe(Scan *S)
{
    Py_ssize_t nd = S->ndistinct, kept = 0;
    Py_ssize_t *start = calloc((size_t)nd + 1, sizeof(Py_ssize_t));
    Span *calls = malloc(sizeof(Span) * (size_t)(nd ? nd : 1));
    if (!start || !calls) { free(start); free(calls); S->oom = 1; return fail(S); }
    for (Py_ssize_t r = 0; r < S->nrows; r++) {
        Py_ssize_t u = S->uid[S->rows[r].call];
        if (S->last[u] == S->rows[r].call) { start[u + 1]++; kept++; }
    }
    for (Py_ssize_t u = 0; u < nd; u++) { start[u + 1] += start[u]; calls[u] = S->calls[S->first[u]]; }
    Row *rows = malloc(sizeof(Row) * (size_t)(kept ? kept : 1));
    if (!rows) { free(start); free(calls); S->oom = 1; return fail(S); }
    for (Py_ssize_t r = 0; r < S->nrows; r++) {  /* an occurrence's rows are in order: they stay so */
        Py_ssize_t u = S->uid[S->rows[r].call];
        if (S->last[u] != S->rows[r].call) continue;
        rows[start[u]] = S->rows[r];
        rows[start[u]++].call = u;
    }
    free(start);
    free(S->rows); S->rows = rows; S->nrows = S->caprows = kept;
    free(S->calls); S->calls = calls; S->ncalls = S->capcalls = nd;
    return 0;
}

static int document(Scan *S)
{
    Member *top = level(S, 0);
    if (!top) return -1;
    Py_ssize_t n = members(S, top, 0);
    const char *data = NULL;
    for (Py_ssize_t i = 0; i < n; i++) if (key_is(top[i].key, "data")) data = top[i].value;
    if (n < 0 || !data) return fail(S);
    ws(S);
    if (S->p != S->end) return fail(S);  /* text after the document */
    seek(S, data);
    if (*S->p != '{') return fail(S);
    S->p++;
    if (eat(S, '}')) return 0;
    do {
        Span name;
        int escaped;
        if (string(S, &name, &escaped) < 0 || escaped || !eat(S, ':')) return fail(S);
        if (grow((void **)&S->calls, &S->capcalls, S->ncalls + 1, sizeof(Span), S) < 0) return -1;
        S->calls[S->ncalls] = name;
        if (note_call(S) < 0 || call_entry(S, S->ncalls++) < 0) return -1;
    } while (eat(S, ','));
    if (!eat(S, '}')) return fail(S);
    return S->twice ? dedupe(S) : 0;
}

/* ---- Python objects, with the GIL ------------------------------------------------------------ */
static PyObject *text(const char *s, Py_ssize_t n) { return PyUnicode_DecodeUTF8(s, n, "strict"); }

/* The same Python string for the same bytes as the previous row (dtypes and shapes repeat). */
static PyObject *repeated(PyObject **last, Span *last_span, const char *s, Py_ssize_t n)
{
    if (*last && last_span->n == n && memcmp(last_span->s, s, (size_t)n) == 0) { Py_INCREF(*last); return *last; }
    PyObject *o = text(s, n);
    if (!o) return NULL;
    Py_XDECREF(*last);
    Py_INCREF(o);
    *last = o; last_span->s = s; last_span->n = n;
    return o;
}

static PyObject *results(Scan *S)
{
    Py_ssize_t n = S->nrows;
    PyObject *calls = PyList_New(S->ncalls), *names = PyList_New(n), *dtypes = PyList_New(n),
             *shapes = PyList_New(n), *md5 = PyList_New(n), *values = PyList_New(n), *empty = PyUnicode_FromString("");
    PyObject *call_of = PyBytes_FromStringAndSize(NULL, n * 8), *slot = PyBytes_FromStringAndSize(NULL, n),
             *index = PyBytes_FromStringAndSize(NULL, n * 8), *stats = PyBytes_FromStringAndSize(NULL, n * 32),
             *has = PyBytes_FromStringAndSize(NULL, n), *data_name = PyBytes_FromStringAndSize(NULL, n);
    PyObject *out = NULL, *last_dtype = NULL, *last_shape = NULL;
    Span dtype_span = {0}, shape_span = {0};
    char *name = NULL;
    if (!calls || !names || !dtypes || !shapes || !md5 || !values || !empty || !call_of || !slot || !index || !stats || !has || !data_name)
        goto done;
    for (Py_ssize_t i = 0; i < S->ncalls; i++) {
        PyObject *o = text(S->calls[i].s, S->calls[i].n);
        if (!o) goto done;
        PyList_SET_ITEM(calls, i, o);
    }
    int64_t *co = (int64_t *)PyBytes_AS_STRING(call_of), *ix = (int64_t *)PyBytes_AS_STRING(index);
    uint8_t *sl = (uint8_t *)PyBytes_AS_STRING(slot), *hs = (uint8_t *)PyBytes_AS_STRING(has),
            *dn = (uint8_t *)PyBytes_AS_STRING(data_name);
    double *st = (double *)PyBytes_AS_STRING(stats);
    name = malloc(MAX_SUFFIX * 2 + 64);
    Py_ssize_t capname = MAX_SUFFIX * 2 + 64;
    if (!name) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        Row *r = &S->rows[i];
        co[i] = r->call; ix[i] = r->index; sl[i] = r->slot; hs[i] = r->has; dn[i] = r->data_name;
        memcpy(st + 4 * i, r->stats, sizeof r->stats);
        Span call = S->calls[r->call];
        const char *slot_name = SLOT_NAMES[r->slot], *suffix = S->arena + r->suffix_at;
        size_t ls = strlen(slot_name), lx = strlen(suffix);
        Py_ssize_t need = call.n + (Py_ssize_t)(ls + lx);
        if (need > capname) {
            char *bigger = realloc(name, (size_t)need);
            if (!bigger) { PyErr_NoMemory(); goto done; }
            name = bigger; capname = need;
        }
        memcpy(name, call.s, (size_t)call.n);
        memcpy(name + call.n, slot_name, ls);
        memcpy(name + call.n + ls, suffix, lx);
        PyObject *o = text(name, need);
        if (!o) goto done;
        PyList_SET_ITEM(names, i, o);
        if (!(o = repeated(&last_dtype, &dtype_span, r->dtype.s ? r->dtype.s : "", r->dtype.n))) goto done;
        PyList_SET_ITEM(dtypes, i, o);
        const char *shape = r->shape_at >= 0 ? S->arena + r->shape_at : "[]";
        if (!(o = repeated(&last_shape, &shape_span, shape, (Py_ssize_t)strlen(shape)))) goto done;
        PyList_SET_ITEM(shapes, i, o);
        if (r->md5.n) { if (!(o = text(r->md5.s, r->md5.n))) goto done; }
        else { o = empty; Py_INCREF(o); }
        PyList_SET_ITEM(md5, i, o);
        if (r->is_value) { if (!(o = text(r->value.s, r->value.n))) goto done; }
        else { o = Py_None; Py_INCREF(o); }
        PyList_SET_ITEM(values, i, o);
    }
    out = PyTuple_Pack(12, calls, call_of, slot, index, names, dtypes, shapes, stats, has, md5, data_name, values);
done:
    free(name);
    Py_XDECREF(last_dtype); Py_XDECREF(last_shape); Py_XDECREF(empty);
    Py_XDECREF(calls); Py_XDECREF(names); Py_XDECREF(dtypes); Py_XDECREF(shapes); Py_XDECREF(md5); Py_XDECREF(values);
    Py_XDECREF(call_of); Py_XDECREF(slot); Py_XDECREF(index); Py_XDECREF(stats); Py_XDECREF(has); Py_XDECREF(data_name);
    return out;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    PyObject *data;
    if (!PyArg_ParseTuple(args, "O!:scan", &PyBytes_Type, &data)) return NULL;
    Scan *S = calloc(1, sizeof(Scan));
    if (!S) return PyErr_NoMemory();
    S->p = PyBytes_AS_STRING(data);
    S->end = S->p + PyBytes_GET_SIZE(data);
    Py_INCREF(data);
    Py_BEGIN_ALLOW_THREADS
    document(S);
    Py_END_ALLOW_THREADS
    PyObject *out;
    if (S->oom) out = PyErr_NoMemory();
    else if (S->bad) { Py_INCREF(Py_None); out = Py_None; }
    else out = results(S);
    Py_DECREF(data);
    for (int d = 0; d < MAX_DEPTH + 2; d++) free(S->levels[d]);
    free(S->rows); free(S->calls); free(S->arena);
    free(S->table); free(S->uid); free(S->first); free(S->last); free(S);
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "msprobe dump.json text -> its tensors as columns, or None (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_dumpscan", "msprobe dump.json as columns.", -1, methods};

PyMODINIT_FUNC PyInit__dumpscan(void)
{
#if defined(__GLIBC__)
    if (!c_locale) c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
#endif
    return PyModule_Create(&module);
}
