/* An OTLP trace export's spans read straight from its protobuf bytes (collector/intake/otlp.py,
 * "spans_of"): the same values the protobuf message's accessors give, built without a Python
 * object per AnyValue. Only ever given bytes that protobuf's own parser has accepted, so the
 * wire is known to be well formed (lengths, varints, UTF-8, nesting). A field the caller never
 * reads is skipped, as the message's reader ignores it. Anything it does not read the way the
 * message would (a singular message sent twice, which protobuf merges; a oneof sent twice; an
 * AnyValue's string_value_strindex; a number outside its type) makes it answer None, and the
 * caller reads the message instead: it is a fast path, never a second definition.
 *
 * spans(body: bytes, prefix: str | None) -> list | None
 *   [(resource_attributes, [(scope_name, [span, ...]), ...]), ...]
 *   span = (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, attributes,
 *           status_code, dropped_attributes_count, [(event_name, time_ns, attributes), ...])
 * Ids are bytes as sent; a span's and an event's attributes are only those whose key starts
 * with ``prefix`` (all of them when it is None); a resource's are all of them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define OK 0
#define BAIL (-1)  /* not read here: the caller reads the message; no exception set */
#define FAIL (-2)  /* a Python exception is set (out of memory) */
#define MAX_DEPTH 200  /* protobuf's parser stops at 100 levels; this only guards the stack */

enum { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 };

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Buf;

static int varint(Buf *b, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return BAIL;
        uint8_t byte = *b->p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = v;
            return OK;
        }
    }
    return BAIL;
}

static int tag(Buf *b, uint32_t *field, int *wire) {
    uint64_t t;
    if (varint(b, &t) != OK || (t >> 3) == 0 || (t >> 3) > 0x1fffffff) return BAIL;
    *field = (uint32_t)(t >> 3);
    *wire = (int)(t & 7);
    return OK;
}

static int sub(Buf *b, Buf *out) {
    uint64_t n;
    if (varint(b, &n) != OK || n > (uint64_t)(b->end - b->p)) return BAIL;
    out->p = b->p;
    out->end = b->p + n;
    b->p += n;
    return OK;
}

static int fixed64(Buf *b, uint64_t *out) {
    if (b->end - b->p < 8) return BAIL;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b->p[i];
    b->p += 8;
    *out = v;
    return OK;
}

static int skip(Buf *b, int wire) {
    uint64_t ignored;
    Buf ignored_sub;
    switch (wire) {
    case VARINT: return varint(b, &ignored);
    case I64: return fixed64(b, &ignored);
    case LEN: return sub(b, &ignored_sub);
    case I32:
        if (b->end - b->p < 4) return BAIL;
        b->p += 4;
        return OK;
    default: return BAIL;  /* groups: never in OTLP */
    }
}

/* An int32 (an enum) as protobuf reads it; a varint outside int32 is left to protobuf. */
static int int32_of(uint64_t v, long long *out) {
    if (v <= 0x7fffffffULL) *out = (long long)v;
    else if (v >= 0xffffffff80000000ULL) *out = (long long)(int64_t)v;
    else return BAIL;
    return OK;
}

static int text(Buf s, PyObject **out) {
    PyObject *o = PyUnicode_DecodeUTF8((const char *)s.p, s.end - s.p, NULL);
    if (o == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return BAIL;
        }
        return FAIL;
    }
    Py_XSETREF(*out, o);
    return OK;
}

static int bytes_of(Buf s, PyObject **out) {
    PyObject *o = PyBytes_FromStringAndSize((const char *)s.p, s.end - s.p);
    if (o == NULL) return FAIL;
    Py_XSETREF(*out, o);
    return OK;
}

static int append(PyObject *list, PyObject *item) {  /* steals item */
    if (item == NULL) return FAIL;
    int r = PyList_Append(list, item);
    Py_DECREF(item);
    return r < 0 ? FAIL : OK;
}

static int attributes(Buf b, const char *prefix, Py_ssize_t prefix_len, PyObject *into, int depth);

/* AnyValue: exactly one member set (none: None). */
static int any_value(Buf b, PyObject **out, int depth) {
    PyObject *value = NULL;
    int members = 0;
    if (depth > MAX_DEPTH) return BAIL;
    while (b.p < b.end) {
        uint32_t field;
        int wire, r = OK;
        if (tag(&b, &field, &wire) != OK) goto bail;
        if (field >= 1 && field <= 8 && ++members > 1) goto bail;  /* a oneof sent twice */
        switch (field) {
        case 1: case 7: {  /* string_value, bytes_value */
            Buf s;
            if (wire != LEN || sub(&b, &s) != OK) goto bail;
            r = field == 1 ? text(s, &value) : bytes_of(s, &value);
            break;
        }
        case 2: case 3: {  /* bool_value, int_value */
            uint64_t v;
            if (wire != VARINT || varint(&b, &v) != OK) goto bail;
            value = field == 2 ? PyBool_FromLong(v != 0) : PyLong_FromLongLong((int64_t)v);
            r = value == NULL ? FAIL : OK;
            break;
        }
        case 4: {  /* double_value */
            uint64_t v;
            double d;
            if (wire != I64 || fixed64(&b, &v) != OK) goto bail;
            memcpy(&d, &v, sizeof d);
            value = PyFloat_FromDouble(d);
            r = value == NULL ? FAIL : OK;
            break;
        }
        case 5: {  /* array_value: ArrayValue { repeated AnyValue values = 1; } */
            Buf array;
            if (wire != LEN || sub(&b, &array) != OK) goto bail;
            value = PyList_New(0);
            if (value == NULL) return FAIL;
            while (array.p < array.end && r == OK) {
                uint32_t f;
                int w;
                Buf element;
                PyObject *item = NULL;
                if (tag(&array, &f, &w) != OK) { r = BAIL; break; }
                if (f != 1) { r = skip(&array, w); continue; }
                if (w != LEN || sub(&array, &element) != OK) { r = BAIL; break; }
                r = any_value(element, &item, depth + 1);
                if (r == OK) r = append(value, item);
            }
            break;
        }
        case 6: {  /* kvlist_value: KeyValueList { repeated KeyValue values = 1; } */
            Buf kvlist;
            if (wire != LEN || sub(&b, &kvlist) != OK) goto bail;
            value = PyDict_New();
            if (value == NULL) return FAIL;
            r = attributes(kvlist, NULL, 0, value, depth + 1);
            break;
        }
        case 8:  /* string_value_strindex: the message's reader refuses it with its own words */
            goto bail;
        default:
            if (skip(&b, wire) != OK) goto bail;
        }
        if (r != OK) {
            Py_XDECREF(value);
            return r;
        }
    }
    if (value == NULL) value = Py_NewRef(Py_None);
    *out = value;
    return OK;
bail:
    Py_XDECREF(value);
    return BAIL;
}

/* One KeyValue into a dict: a key sent again keeps its last value, as a dict built from the
 * message does. Only a key starting with prefix (any key when it is NULL). */
static int key_value(Buf kv, const char *prefix, Py_ssize_t prefix_len, PyObject *into, int depth) {
    Buf key = {NULL, NULL}, value = {NULL, NULL};
    int keys = 0, values = 0;
    while (kv.p < kv.end) {
        uint32_t f;
        int w;
        if (tag(&kv, &f, &w) != OK) return BAIL;
        if (f == 1) {  /* a scalar sent twice: the last one counts */
            if (w != LEN || sub(&kv, &key) != OK) return BAIL;
            keys++;
        } else if (f == 2) {  /* a message sent twice is merged: left to protobuf */
            if (w != LEN || sub(&kv, &value) != OK || ++values > 1) return BAIL;
        } else if (skip(&kv, w) != OK) {
            return BAIL;
        }
    }
    Py_ssize_t key_len = keys ? key.end - key.p : 0;
    if (prefix != NULL && (key_len < prefix_len || memcmp(key.p, prefix, prefix_len) != 0))
        return OK;
    PyObject *k = keys ? PyUnicode_DecodeUTF8((const char *)key.p, key_len, NULL)
                       : PyUnicode_FromStringAndSize(NULL, 0);
    if (k == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return FAIL;
        PyErr_Clear();
        return BAIL;
    }
    PyObject *v = NULL;
    int r = values ? any_value(value, &v, depth + 1) : OK;
    if (r == OK && v == NULL) v = Py_NewRef(Py_None);
    if (r == OK && PyDict_SetItem(into, k, v) < 0) r = FAIL;
    Py_DECREF(k);
    Py_XDECREF(v);
    return r;
}

/* A message whose field 1 is a repeated KeyValue (Resource, KeyValueList) into a dict. */
static int attributes(Buf b, const char *prefix, Py_ssize_t prefix_len, PyObject *into, int depth) {
    if (depth > MAX_DEPTH) return BAIL;
    while (b.p < b.end) {
        uint32_t field;
        int wire, r;
        Buf kv;
        if (tag(&b, &field, &wire) != OK) return BAIL;
        if (field != 1)
            r = skip(&b, wire);
        else
            r = wire == LEN && sub(&b, &kv) == OK ? key_value(kv, prefix, prefix_len, into, depth) : BAIL;
        if (r != OK) return r;
    }
    return OK;
}

typedef struct {
    const char *prefix;
    Py_ssize_t prefix_len;
} Want;

/* Span.Event: (name, time_unix_nano, attributes) */
static int event(Buf b, const Want *want, PyObject *events) {
    PyObject *name = NULL, *attrs = PyDict_New();
    uint64_t time_ns = 0;
    int r = attrs == NULL ? FAIL : OK;
    while (r == OK && b.p < b.end) {
        uint32_t field;
        int wire;
        Buf s;
        if (tag(&b, &field, &wire) != OK) { r = BAIL; break; }
        switch (field) {
        case 1:
            r = wire == I64 ? fixed64(&b, &time_ns) : BAIL;
            break;
        case 2:
            r = wire == LEN && sub(&b, &s) == OK ? text(s, &name) : BAIL;
            break;
        case 3:
            r = wire == LEN && sub(&b, &s) == OK
                ? key_value(s, want->prefix, want->prefix_len, attrs, 0) : BAIL;
            break;
        default:
            r = skip(&b, wire);
        }
    }
    if (r == OK && name == NULL && (name = PyUnicode_FromStringAndSize(NULL, 0)) == NULL) r = FAIL;
    if (r == OK) {
        PyObject *t = PyLong_FromUnsignedLongLong(time_ns);
        r = t == NULL ? FAIL : append(events, PyTuple_Pack(3, name, t, attrs));
        Py_XDECREF(t);
    }
    Py_XDECREF(name);
    Py_XDECREF(attrs);
    return r;
}

static int span(Buf b, const Want *want, PyObject *spans) {
    PyObject *ids[3] = {NULL, NULL, NULL};  /* trace, span, parent */
    PyObject *name = NULL, *attrs = PyDict_New(), *events = PyList_New(0);
    uint64_t start = 0, end = 0, dropped = 0;
    long long kind = 0, status = 0;
    int statuses = 0;
    int r = attrs == NULL || events == NULL ? FAIL : OK;
    while (r == OK && b.p < b.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        Buf s;
        if (tag(&b, &field, &wire) != OK) { r = BAIL; break; }
        switch (field) {
        case 1: case 2: case 4:  /* trace_id, span_id, parent_span_id */
            r = wire == LEN && sub(&b, &s) == OK
                ? bytes_of(s, &ids[field == 1 ? 0 : field == 2 ? 1 : 2]) : BAIL;
            break;
        case 5:
            r = wire == LEN && sub(&b, &s) == OK ? text(s, &name) : BAIL;
            break;
        case 6:
            r = wire == VARINT && varint(&b, &v) == OK ? int32_of(v, &kind) : BAIL;
            break;
        case 7: case 8:
            r = wire == I64 ? fixed64(&b, field == 7 ? &start : &end) : BAIL;
            break;
        case 9:
            r = wire == LEN && sub(&b, &s) == OK
                ? key_value(s, want->prefix, want->prefix_len, attrs, 0) : BAIL;
            break;
        case 10:
            r = wire == VARINT && varint(&b, &dropped) == OK && dropped <= 0xffffffffULL ? OK : BAIL;
            break;
        case 11:
            r = wire == LEN && sub(&b, &s) == OK ? event(s, want, events) : BAIL;
            break;
        case 15: {  /* Status { string message = 2; StatusCode code = 3; } */
            if (wire != LEN || sub(&b, &s) != OK || ++statuses > 1) { r = BAIL; break; }
            while (r == OK && s.p < s.end) {
                uint32_t f;
                int w;
                if (tag(&s, &f, &w) != OK) { r = BAIL; break; }
                if (f == 3)
                    r = w == VARINT && varint(&s, &v) == OK ? int32_of(v, &status) : BAIL;
                else
                    r = skip(&s, w);
            }
            break;
        }
        default:  /* trace_state, flags, links, dropped counts: not read */
            r = skip(&b, wire);
        }
    }
    for (int i = 0; r == OK && i < 2; i++)
        if (ids[i] == NULL && (ids[i] = PyBytes_FromStringAndSize(NULL, 0)) == NULL) r = FAIL;
    if (r == OK && name == NULL && (name = PyUnicode_FromStringAndSize(NULL, 0)) == NULL) r = FAIL;
    if (r == OK) {
        PyObject *parent = ids[2] != NULL ? ids[2] : Py_None;
        r = append(spans, Py_BuildValue("(OOOOLKKOLKO)", ids[0], ids[1], parent, name, kind,
                                        (unsigned long long)start, (unsigned long long)end,
                                        attrs, status, (unsigned long long)dropped, events));
    }
    for (int i = 0; i < 3; i++) Py_XDECREF(ids[i]);
    Py_XDECREF(name);
    Py_XDECREF(attrs);
    Py_XDECREF(events);
    return r;
}

/* ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; } */
static int scope_spans(Buf b, const Want *want, PyObject *scopes) {
    PyObject *name = NULL, *spans = PyList_New(0);
    int seen_scope = 0;
    int r = spans == NULL ? FAIL : OK;
    while (r == OK && b.p < b.end) {
        uint32_t field;
        int wire;
        Buf s;
        if (tag(&b, &field, &wire) != OK) { r = BAIL; break; }
        if (field == 1) {  /* InstrumentationScope { string name = 1; ... } */
            if (wire != LEN || sub(&b, &s) != OK || ++seen_scope > 1) { r = BAIL; break; }
            while (r == OK && s.p < s.end) {
                uint32_t f;
                int w;
                Buf n;
                if (tag(&s, &f, &w) != OK) { r = BAIL; break; }
                r = f != 1 ? skip(&s, w) : w == LEN && sub(&s, &n) == OK ? text(n, &name) : BAIL;
            }
        } else if (field == 2) {
            r = wire == LEN && sub(&b, &s) == OK ? span(s, want, spans) : BAIL;
        } else {
            r = skip(&b, wire);
        }
    }
    if (r == OK) {
        /* ``scope.name or None`` */
        PyObject *shown = name != NULL && PyUnicode_GET_LENGTH(name) ? name : Py_None;
        r = append(scopes, PyTuple_Pack(2, shown, spans));
    }
    Py_XDECREF(name);
    Py_XDECREF(spans);
    return r;
}

/* ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; } */
static int resource_spans(Buf b, const Want *want, PyObject *resources) {
    PyObject *attrs = PyDict_New(), *scopes = PyList_New(0);
    int seen_resource = 0;
    int r = attrs == NULL || scopes == NULL ? FAIL : OK;
    while (r == OK && b.p < b.end) {
        uint32_t field;
        int wire;
        Buf s;
        if (tag(&b, &field, &wire) != OK) { r = BAIL; break; }
        if (field == 1) {  /* Resource { repeated KeyValue attributes = 1; ... } */
            if (wire != LEN || sub(&b, &s) != OK || ++seen_resource > 1) { r = BAIL; break; }
            r = attributes(s, NULL, 0, attrs, 0);
        } else if (field == 2) {
            r = wire == LEN && sub(&b, &s) == OK ? scope_spans(s, want, scopes) : BAIL;
        } else {
            r = skip(&b, wire);
        }
    }
    if (r == OK) r = append(resources, PyTuple_Pack(2, attrs, scopes));
    Py_XDECREF(attrs);
    Py_XDECREF(scopes);
    return r;
}

static PyObject *spans(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer body;
    PyObject *prefix_obj = Py_None;
    Want want = {NULL, 0};
    if (!PyArg_ParseTuple(args, "y*|O:spans", &body, &prefix_obj)) return NULL;
    if (prefix_obj != Py_None) {
        if (!PyUnicode_Check(prefix_obj)) {
            PyBuffer_Release(&body);
            PyErr_SetString(PyExc_TypeError, "prefix must be a str or None");
            return NULL;
        }
        want.prefix = PyUnicode_AsUTF8AndSize(prefix_obj, &want.prefix_len);
        if (want.prefix == NULL) {
            PyBuffer_Release(&body);
            return NULL;
        }
        if (want.prefix_len == 0) want.prefix = NULL;  /* every key starts with "" */
    }
    PyObject *resources = PyList_New(0);
    int r = resources == NULL ? FAIL : OK;
    Buf b = {(const uint8_t *)body.buf, (const uint8_t *)body.buf + body.len};
    while (r == OK && b.p < b.end) {  /* ExportTraceServiceRequest { repeated ResourceSpans = 1; } */
        uint32_t field;
        int wire;
        Buf s;
        if (tag(&b, &field, &wire) != OK) { r = BAIL; break; }
        r = field != 1 ? skip(&b, wire)
            : wire == LEN && sub(&b, &s) == OK ? resource_spans(s, &want, resources) : BAIL;
    }
    PyBuffer_Release(&body);
    if (r == OK) return resources;
    Py_XDECREF(resources);
    if (r == FAIL) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"spans", spans, METH_VARARGS,
     "spans(body, prefix=None): an OTLP trace export's spans read from its protobuf bytes, "
     "or None where the message must be read instead."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_otlp_wire",
    "An OTLP trace export's spans read straight from protobuf bytes (see otlp.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__otlp_wire(void) { return PyModule_Create(&module); }
