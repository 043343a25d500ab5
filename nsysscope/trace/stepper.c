/* The columns of one SQLite query, stepped in C into int64 buffers with the GIL released.

Why: Python's sqlite3 module makes a Python object of every value (~0.35 us each), and
DuckDB's SQLite scanner converts every row of a table before its filter runs (~0.5 us a
row). Stepping the statement here costs what SQLite itself costs (bench/README.md): the
connection is opened without SQLite's per-call mutex (it is used by one thread), and each
value is copied straight into its column's buffer.

read(uri, sql, kinds, params, prelude, cancel) -> list, or None if cancelled

  uri      an SQLite URI (the loader opens exports read-only and immutable)
  sql      one statement; its result has one column per letter of ``kinds``
  params   values bound to the statement's ? placeholders (int, float or str)
  kinds    per result column: 'i' an integer, 'c' text (a categorical: codes and values);
           or, for a read grouped by runs, each column one of 'k' (a key), 'n' (the
           smallest value), 'x' (the largest) or 's' (the sum): consecutive rows whose keys
           are all equal come back as one row. Exports keep a graph replay's GPU rows
           together, so a million node rows become one row per replay without SQL's GROUP
           BY, which sorts; a group that a read splits (the replay's rows are not adjacent,
           or a part ends inside it) is merged by the caller.
  prelude  SQL run first on the same connection, or None (a TEMP VIEW over a range of
           rowids lets a table be read in parts, one per thread, by the same ``sql``)
  cancel   a writable buffer: a non-zero first byte stops the read (another thread's
           Ctrl-C), checked every few thousand rows

Integers come back as objects owning a buffer of native int64 (numpy.frombuffer reads it,
writable, without a copy); a 'c'
column as (codes, values): int64 codes into a list of distinct texts in order of first
appearance (a NULL is code -1; text that is not UTF-8 is decoded with replacement
characters, as the loader's sqlite3 connection does). A value that is not an integer where
one is expected raises TypeError, and anything SQLite refuses raises ReadError: the caller
then reads the query through Python's sqlite3 module, which reports the damage in its own
words.

SQLite's API is declared here (the few functions used, stable since SQLite 3.7) so that the
module builds without SQLite's headers; it links against the library Python's own sqlite3
module uses.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
extern int sqlite3_open_v2(const char *, sqlite3 **, int, const char *);
extern int sqlite3_close(sqlite3 *);
extern int sqlite3_exec(sqlite3 *, const char *, void *, void *, char **);
extern int sqlite3_prepare_v2(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
extern int sqlite3_bind_int64(sqlite3_stmt *, int, long long);
extern int sqlite3_bind_text(sqlite3_stmt *, int, const char *, int, void (*)(void *));
extern int sqlite3_bind_double(sqlite3_stmt *, int, double);
extern int sqlite3_step(sqlite3_stmt *);
extern int sqlite3_finalize(sqlite3_stmt *);
extern int sqlite3_column_count(sqlite3_stmt *);
extern int sqlite3_column_type(sqlite3_stmt *, int);
extern long long sqlite3_column_int64(sqlite3_stmt *, int);
extern const unsigned char *sqlite3_column_text(sqlite3_stmt *, int);
extern int sqlite3_column_bytes(sqlite3_stmt *, int);
extern const char *sqlite3_errmsg(sqlite3 *);
typedef struct sqlite3_value sqlite3_value;
extern sqlite3_value *sqlite3_column_value(sqlite3_stmt *, int);
extern int sqlite3_value_type(sqlite3_value *);
extern long long sqlite3_value_int64(sqlite3_value *);
extern const unsigned char *sqlite3_value_text(sqlite3_value *);
extern int sqlite3_value_bytes(sqlite3_value *);

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_INTEGER 1
#define SQLITE_NULL 5
#define SQLITE_OPEN_READONLY 0x00000001
#define SQLITE_OPEN_URI 0x00000040
#define SQLITE_OPEN_NOMUTEX 0x00008000
#define SQLITE_TRANSIENT ((void (*)(void *)) - 1)

/* rows between two looks at the cancel flag */
#define CHECK_EVERY 4096

static PyObject *ReadError;

/* One column's int64 values (allocated without the GIL); every column of a read has as many
   values, and grows with the others (reserve_row). */
typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} Column;

/* The distinct texts of a 'c' column: an open-addressing hash table over an arena. */
typedef struct {
    char *arena;
    size_t used, size;
    Py_ssize_t *offset, *length; /* of each distinct text, by code */
    Py_ssize_t count, room;
    int64_t *slot; /* code + 1 per hash slot, 0 empty */
    uint64_t *hash;
    size_t slots;
} Texts;

static uint64_t fnv1a(const unsigned char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

static int texts_grow_slots(Texts *t) {
    size_t slots = t->slots ? 2 * t->slots : 1024;
    int64_t *slot = PyMem_RawCalloc(slots, sizeof(int64_t));
    uint64_t *hash = PyMem_RawMalloc(slots * sizeof(uint64_t));
    if (!slot || !hash) {
        PyMem_RawFree(slot);
        PyMem_RawFree(hash);
        return -1;
    }
    for (size_t i = 0; i < t->slots; i++) {
        if (!t->slot[i]) continue;
        size_t j = t->hash[i] & (slots - 1);
        while (slot[j]) j = (j + 1) & (slots - 1);
        slot[j] = t->slot[i];
        hash[j] = t->hash[i];
    }
    PyMem_RawFree(t->slot);
    PyMem_RawFree(t->hash);
    t->slot = slot;
    t->hash = hash;
    t->slots = slots;
    return 0;
}

/* The code of text ``s`` (``n`` bytes), added if new; -1 on no memory. */
static int64_t texts_code(Texts *t, const unsigned char *s, Py_ssize_t n) {
    if (2 * (size_t)(t->count + 1) > t->slots && texts_grow_slots(t) < 0) return -1;
    uint64_t h = fnv1a(s, n);
    size_t j = h & (t->slots - 1);
    for (; t->slot[j]; j = (j + 1) & (t->slots - 1)) {
        Py_ssize_t code = (Py_ssize_t)t->slot[j] - 1;
        if (t->hash[j] == h && t->length[code] == n &&
            memcmp(t->arena + t->offset[code], s, (size_t)n) == 0)
            return code;
    }
    if (t->used + (size_t)n > t->size) {
        size_t size = t->size ? t->size : 1 << 16;
        while (t->used + (size_t)n > size) size *= 2;
        char *arena = PyMem_RawRealloc(t->arena, size);
        if (!arena) return -1;
        t->arena = arena;
        t->size = size;
    }
    if (t->count == t->room) {
        Py_ssize_t room = t->room ? 2 * t->room : 256;
        Py_ssize_t *offset = PyMem_RawRealloc(t->offset, (size_t)room * sizeof(Py_ssize_t));
        if (!offset) return -1;
        t->offset = offset;
        Py_ssize_t *length = PyMem_RawRealloc(t->length, (size_t)room * sizeof(Py_ssize_t));
        if (!length) return -1;
        t->length = length;
        t->room = room;
    }
    memcpy(t->arena + t->used, s, (size_t)n);
    t->offset[t->count] = (Py_ssize_t)t->used;
    t->length[t->count] = n;
    t->used += (size_t)n;
    t->slot[j] = t->count + 1;
    t->hash[j] = h;
    return t->count++;
}

static void texts_free(Texts *t) {
    PyMem_RawFree(t->arena);
    PyMem_RawFree(t->offset);
    PyMem_RawFree(t->length);
    PyMem_RawFree(t->slot);
    PyMem_RawFree(t->hash);
}

/* What went wrong while the GIL was released, raised once it is held again. */
typedef enum { OK, CANCELLED, NO_MEMORY, SQLITE_FAILED, NOT_AN_INTEGER } Outcome;

typedef struct {
    const char *kinds;
    int ncols, grouped;
    Column *cols;
    Py_ssize_t out, cap; /* rows written to every column, and their room */
    Texts texts;
    int64_t *acc; /* the group being read (grouped reads) */
    int in_group; /* whether ``acc`` holds a group */
    int bad_column; /* NOT_AN_INTEGER: which, and its SQLite type */
    int bad_type;
} Read;

/* Room for one more row in every column. */
static int reserve_row(Read *r) {
    if (r->out < r->cap) return 0;
    Py_ssize_t cap = r->cap ? 2 * r->cap : 1 << 14;
    for (int j = 0; j < r->ncols; j++) {
        int64_t *v = PyMem_RawRealloc(r->cols[j].v, (size_t)cap * sizeof(int64_t));
        if (!v) return -1;
        r->cols[j].v = v;
        r->cols[j].cap = cap;
    }
    r->cap = cap;
    return 0;
}

static Outcome write_row(Read *r, const int64_t *row) {
    if (reserve_row(r) < 0) return NO_MEMORY;
    for (int j = 0; j < r->ncols; j++) r->cols[j].v[r->out] = row[j];
    r->out++;
    return OK;
}

/* One row of ``st`` into the read's columns (or into its current group). */
static Outcome take_row(Read *r, sqlite3_stmt *st) {
    int64_t row[64];
    for (int j = 0; j < r->ncols; j++) {
        sqlite3_value *v = sqlite3_column_value(st, j);
        int type = sqlite3_value_type(v);
        if (type == SQLITE_INTEGER) {
            row[j] = sqlite3_value_int64(v);
            if (r->kinds[j] != 'c') continue;
        } else if (r->kinds[j] != 'c') {
            r->bad_column = j;
            r->bad_type = type;
            return NOT_AN_INTEGER;
        }
        int64_t code = -1; /* a text column: the code of its value, -1 for NULL */
        if (type != SQLITE_NULL) {
            const unsigned char *s = sqlite3_value_text(v);
            Py_ssize_t n = sqlite3_value_bytes(v);
            if (!s) return NO_MEMORY;
            code = texts_code(&r->texts, s, n);
            if (code < 0) return NO_MEMORY;
        }
        row[j] = code;
    }
    if (!r->grouped) return write_row(r, row);
    int same = r->in_group;
    for (int j = 0; same && j < r->ncols; j++)
        if (r->kinds[j] == 'k' && r->acc[j] != row[j]) same = 0;
    if (!same) {
        if (r->in_group && write_row(r, r->acc) != OK) return NO_MEMORY;
        memcpy(r->acc, row, (size_t)r->ncols * sizeof(int64_t));
        r->in_group = 1;
        return OK;
    }
    for (int j = 0; j < r->ncols; j++) {
        int64_t x = row[j];
        switch (r->kinds[j]) {
        case 'n': if (x < r->acc[j]) r->acc[j] = x; break;
        case 'x': if (x > r->acc[j]) r->acc[j] = x; break;
        case 's': r->acc[j] += x; break;
        }
    }
    return OK;
}

/* Step ``st`` to its end (no Python calls: the GIL is released around this). */
static Outcome step_all(Read *r, sqlite3_stmt *st, const volatile char *cancel) {
    Py_ssize_t seen = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        Outcome o = take_row(r, st);
        if (o != OK) return o;
        if (++seen % CHECK_EVERY == 0 && cancel[0]) return CANCELLED;
    }
    if (rc != SQLITE_DONE) return SQLITE_FAILED;
    if (r->grouped && r->in_group) return write_row(r, r->acc);
    return OK;
}

static int bind_params(sqlite3_stmt *st, PyObject *params) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(params);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(params, i);
        int rc;
        if (PyLong_Check(p)) {
            long long v = PyLong_AsLongLong(p);
            if (v == -1 && PyErr_Occurred()) return -1;
            rc = sqlite3_bind_int64(st, (int)i + 1, v);
        } else if (PyFloat_Check(p)) {
            rc = sqlite3_bind_double(st, (int)i + 1, PyFloat_AS_DOUBLE(p));
        } else if (PyUnicode_Check(p)) {
            Py_ssize_t len;
            const char *s = PyUnicode_AsUTF8AndSize(p, &len);
            if (!s) return -1;
            rc = sqlite3_bind_text(st, (int)i + 1, s, (int)len, SQLITE_TRANSIENT);
        } else {
            PyErr_Format(PyExc_TypeError, "parameter %zd: an int, float or str, not %s", i + 1,
                         Py_TYPE(p)->tp_name);
            return -1;
        }
        if (rc != SQLITE_OK) {
            PyErr_Format(ReadError, "parameter %zd: SQLite error %d", i + 1, rc);
            return -1;
        }
    }
    return 0;
}

/* A column's values, handed to Python without a copy: an object that owns the buffer and
exposes it (writable) through the buffer protocol, for numpy.frombuffer. */
typedef struct {
    PyObject_HEAD
    int64_t *v;
    Py_ssize_t n;
} Int64s;

static int int64s_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Int64s *c = (Int64s *)self;
    return PyBuffer_FillInfo(view, self, c->v, c->n * (Py_ssize_t)sizeof(int64_t), 0, flags);
}

static void int64s_dealloc(PyObject *self) {
    PyMem_RawFree(((Int64s *)self)->v);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs int64s_as_buffer = {int64s_getbuffer, NULL};

static PyTypeObject Int64sType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nsysscope.trace.stepper.Int64s",
    .tp_basicsize = sizeof(Int64s),
    .tp_dealloc = int64s_dealloc,
    .tp_as_buffer = &int64s_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "int64 values of one column (numpy.frombuffer(x, numpy.int64) reads them)",
};

/* ``c``'s values as an Int64s, which takes its buffer over (``c`` is left empty). */
static PyObject *take_column(Column *c) {
    Int64s *o = PyObject_New(Int64s, &Int64sType);
    if (!o) return NULL;
    o->v = c->v;
    o->n = c->n;
    if (c->n < c->cap) { /* give back what the doubling left over */
        int64_t *v = PyMem_RawRealloc(c->v, (size_t)(c->n ? c->n : 1) * sizeof(int64_t));
        if (v) o->v = v;
    }
    c->v = NULL;
    c->n = c->cap = 0;
    return (PyObject *)o;
}

/* The Python result of a finished read: an Int64s per column, (codes, values) for text. */
static PyObject *result(Read *r) {
    PyObject *out = PyList_New(r->ncols);
    if (!out) return NULL;
    for (int j = 0; j < r->ncols; j++) {
        r->cols[j].n = r->out;
        PyObject *item = take_column(&r->cols[j]);
        if (item && r->kinds[j] == 'c') {
            PyObject *values = PyList_New(r->texts.count);
            for (Py_ssize_t i = 0; values && i < r->texts.count; i++) {
                PyObject *s = PyUnicode_DecodeUTF8(r->texts.arena + r->texts.offset[i],
                                                   r->texts.length[i], "replace");
                if (!s) {
                    Py_CLEAR(values);
                    break;
                }
                PyList_SET_ITEM(values, i, s);
            }
            PyObject *pair = values ? PyTuple_Pack(2, item, values) : NULL;
            Py_XDECREF(values);
            Py_DECREF(item);
            item = pair;
        }
        if (!item) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, item);
    }
    return out;
}

static int check_kinds(const char *kinds, int ncols) {
    int texts = 0, groups = 0, plain = 0;
    if (ncols < 1 || ncols > 64) {
        PyErr_SetString(PyExc_ValueError, "kinds: 1 to 64 columns");
        return -1;
    }
    for (int j = 0; j < ncols; j++) {
        switch (kinds[j]) {
        case 'c': texts++; plain++; break;
        case 'i': plain++; break;
        case 'k': case 'n': case 'x': case 's': groups++; break;
        default:
            PyErr_Format(PyExc_ValueError, "kinds: unknown kind %c", kinds[j]);
            return -1;
        }
    }
    if (texts > 1 || (groups && plain)) {
        PyErr_SetString(PyExc_ValueError,
                        "kinds: at most one text column, and grouped kinds only with each other");
        return -1;
    }
    return groups > 0;
}

static PyObject *read_query(PyObject *self, PyObject *args) {
    const char *uri, *sql, *kinds, *prelude;
    PyObject *params;
    Py_buffer cancel;
    if (!PyArg_ParseTuple(args, "sssOzw*", &uri, &sql, &kinds, &params, &prelude, &cancel))
        return NULL;
    PyObject *result_obj = NULL;
    PyObject *seq = NULL;
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    Read r;
    memset(&r, 0, sizeof r);
    r.kinds = kinds;
    r.ncols = (int)strlen(kinds);
    if (cancel.len < 1) {
        PyErr_SetString(PyExc_ValueError, "cancel: a buffer of at least one byte");
        goto done;
    }
    r.grouped = check_kinds(kinds, r.ncols);
    if (r.grouped < 0) goto done;
    seq = PySequence_Fast(params, "params: a sequence");
    if (!seq) goto done;
    r.cols = PyMem_RawCalloc((size_t)r.ncols, sizeof(Column));
    r.acc = PyMem_RawCalloc((size_t)r.ncols, sizeof(int64_t));
    if (!r.cols || !r.acc) {
        PyErr_NoMemory();
        goto done;
    }

    Outcome o = OK;
    const char *stage = "open";
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                         NULL);
    if (rc == SQLITE_OK && prelude) {
        stage = "prelude";
        rc = sqlite3_exec(db, prelude, NULL, NULL, NULL);
    }
    if (rc == SQLITE_OK) {
        stage = "prepare";
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    }
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK || !st) {
        PyErr_Format(ReadError, "%s: %s", stage, db ? sqlite3_errmsg(db) : "out of memory");
        goto done;
    }
    if (sqlite3_column_count(st) != r.ncols) {
        PyErr_Format(PyExc_ValueError, "kinds: %d columns, the query has %d", r.ncols,
                     sqlite3_column_count(st));
        goto done;
    }
    if (bind_params(st, seq) < 0) goto done;

    Py_BEGIN_ALLOW_THREADS
    o = step_all(&r, st, (const volatile char *)cancel.buf);
    Py_END_ALLOW_THREADS
    switch (o) {
    case OK: result_obj = result(&r); break;
    case CANCELLED: result_obj = Py_NewRef(Py_None); break;
    case NO_MEMORY: PyErr_NoMemory(); break;
    case SQLITE_FAILED: PyErr_Format(ReadError, "step: %s", sqlite3_errmsg(db)); break;
    case NOT_AN_INTEGER:
        PyErr_Format(PyExc_TypeError, "column %d: %s where an integer is expected",
                     r.bad_column, r.bad_type == SQLITE_NULL ? "NULL" : "a value of another type");
        break;
    }

done:
    Py_BEGIN_ALLOW_THREADS
    if (st) sqlite3_finalize(st);
    if (db) sqlite3_close(db);
    Py_END_ALLOW_THREADS
    if (r.cols)
        for (int j = 0; j < r.ncols; j++) PyMem_RawFree(r.cols[j].v);
    PyMem_RawFree(r.cols);
    PyMem_RawFree(r.acc);
    texts_free(&r.texts);
    Py_XDECREF(seq);
    PyBuffer_Release(&cancel);
    return result_obj;
}

static PyMethodDef methods[] = {
    {"read", read_query, METH_VARARGS,
     "read(uri, sql, kinds, params, prelude, cancel): the columns of sql's result, or None if "
     "cancelled (the module's doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "stepper",
    "The columns of an SQLite query, stepped in C (nsysscope/trace/stepper.c).", -1,
    methods,
};

PyMODINIT_FUNC PyInit_stepper(void) {
    if (PyType_Ready(&Int64sType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    ReadError = PyErr_NewException("nsysscope.trace.stepper.ReadError", NULL, NULL);
    if (!ReadError || PyModule_AddObjectRef(m, "ReadError", ReadError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
