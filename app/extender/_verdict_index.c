/*
 * VerdictIndex: node name -> (extender score, filter reason), answering whole
 * filter and prioritize requests in one pass over the request's node names.
 *
 * Why native code: these two verbs sit on kube-scheduler's serial scheduling cycle
 * and their cost is per node name. With Python dicts each name costs a SipHash of
 * the freshly parsed string, a probe that compares it with a key object elsewhere
 * in memory, and a read of a pre-encoded answer item elsewhere again. Here each
 * name costs one short hash over its bytes and a probe into two compact arrays,
 * and the answer is written straight into one buffer.
 *
 * The index holds no policy and computes nothing: verdicts and scores come from
 * app.load.model through NodeTable, which keeps this index in step. Its answers
 * are app.load.wire's rule (wire_scores, preferred_position), which the Python
 * fallback in app/extender/index.py calls as it is; tests/extender/test_index.py
 * holds this body to that rule on random inputs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NO_REASON (-1)
#define EMPTY_SLOT (-1)
#define MIN_SLOTS 64
#define MAX_SCORE 10 /* kube-scheduler's MaxExtenderPriority */

typedef struct {
    uint64_t hash;
    double cpu_room;    /* cores the node can still take before a limit rejects it */
    double memory_room; /* bytes, likewise (app/load/wire.py, limit_room) */
    uint32_t name_offset; /* into the arena */
    uint32_t name_length;
    int32_t reason; /* index into reasons, or NO_REASON when the node passes */
    uint8_t score;
    uint8_t live;  /* removed entries stay, as tombstones, until the next rebuild */
    uint8_t plain; /* the name needs no JSON escaping */
    uint8_t preferable; /* its score rests on fresh data: it may be lifted (app/load/wire.py) */
    uint32_t filtered_in; /* the filter call that last rejected it: a repeat is skipped */
} Entry;

typedef struct {
    PyObject_HEAD
    Entry *entries;
    Py_ssize_t entry_count;
    Py_ssize_t entry_capacity;
    Py_ssize_t live_count;
    int32_t *slots; /* open addressing, linear probing: entry index or EMPTY_SLOT */
    size_t slot_mask;
    char *arena; /* every entry's name, UTF-8, back to back */
    size_t arena_length;
    size_t arena_capacity;
    PyObject *reasons;         /* list of str: the distinct filter reasons */
    PyObject *reason_literals; /* list of bytes: each reason as a JSON string literal */
    PyObject *reason_ids;      /* dict: reason -> its index in both lists */
    uint64_t seed;
    uint32_t filter_calls; /* numbers each filter call, for Entry.filtered_in */
    uint8_t unknown_score; /* the score of a name the index does not hold */
} VerdictIndex;

/* ------------------------------------------------------------------ hashing */

static inline uint64_t
fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Names are short (a node name is at most 253 bytes, usually 10 to 60), so they are
   read in 8-byte words, the last one overlapping the one before, instead of calling
   memcmp and memcpy for each: the calls cost more than the bytes. */
static inline uint64_t
load_word(const char *data)
{
    uint64_t word;
    memcpy(&word, data, 8);
    return word;
}

static inline void
store_word(char *to, uint64_t word)
{
    memcpy(to, &word, 8);
}

/* 0..7 bytes as one word; for a given length, different bytes give different words. */
static inline uint64_t
load_short(const char *data, size_t length)
{
    if (length >= 4) {
        uint32_t low, high;
        memcpy(&low, data, 4);
        memcpy(&high, data + length - 4, 4);
        return ((uint64_t)high << 32) | low;
    }
    if (length > 0) {
        return ((uint64_t)(unsigned char)data[0] << 16) |
               ((uint64_t)(unsigned char)data[length / 2] << 8) | (unsigned char)data[length - 1];
    }
    return 0;
}

static inline uint64_t
mix_word(uint64_t h, uint64_t word)
{
    h = (h ^ word) * 0x9e3779b97f4a7c15ULL;
    return (h << 31) | (h >> 33);
}

static inline uint64_t
hash_bytes(const char *data, size_t length, uint64_t seed)
{
    uint64_t h = seed ^ (length * 0x9e3779b97f4a7c15ULL);
    if (length < 8) {
        return fmix64(mix_word(h, load_short(data, length)));
    }
    for (size_t i = 0; i + 8 < length; i += 8) {
        h = mix_word(h, load_word(data + i));
    }
    return fmix64(mix_word(h, load_word(data + length - 8)));
}

static inline int
equal_bytes(const char *a, const char *b, size_t length)
{
    if (length < 8) {
        return load_short(a, length) == load_short(b, length);
    }
    for (size_t i = 0; i + 8 < length; i += 8) {
        if (load_word(a + i) != load_word(b + i)) {
            return 0;
        }
    }
    return load_word(a + length - 8) == load_word(b + length - 8);
}

static inline void
copy_bytes(char *to, const char *from, size_t length)
{
    if (length >= 8) {
        for (size_t i = 0; i + 8 < length; i += 8) {
            store_word(to + i, load_word(from + i));
        }
        store_word(to + length - 8, load_word(from + length - 8));
    }
    else if (length >= 4) {
        uint32_t low, high;
        memcpy(&low, from, 4);
        memcpy(&high, from + length - 4, 4);
        memcpy(to, &low, 4);
        memcpy(to + length - 4, &high, 4);
    }
    else {
        for (size_t i = 0; i < length; i++) {
            to[i] = from[i];
        }
    }
}

/* Whether a word holds a byte JSON must escape: '"', '\\' or one below 0x20. */
static inline int
word_needs_escape(uint64_t word)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    uint64_t found = ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) |
                     ((word - ones * 0x20) & ~word);
    return (found & highs) != 0;
}

static inline int
needs_escape(const char *text, size_t length)
{
    if (length < 8) {
        for (size_t i = 0; i < length; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c < 0x20 || c == '"' || c == '\\') {
                return 1;
            }
        }
        return 0;
    }
    for (size_t i = 0; i + 8 < length; i += 8) {
        if (word_needs_escape(load_word(text + i))) {
            return 1;
        }
    }
    return word_needs_escape(load_word(text + length - 8));
}

/* UTF-8 of a str without a copy for the common case: ASCII names. */
static inline const char *
utf8_of(PyObject *text, Py_ssize_t *length)
{
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *length = PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    return PyUnicode_AsUTF8AndSize(text, length);
}

/* ------------------------------------------------------------------ the table */

static Py_ssize_t
find(const VerdictIndex *self, uint64_t hash, const char *name, size_t length)
{
    if (self->slots == NULL) {
        return -1;
    }
    size_t slot = (size_t)hash & self->slot_mask;
    for (;;) {
        int32_t at = self->slots[slot];
        if (at == EMPTY_SLOT) {
            return -1;
        }
        const Entry *entry = &self->entries[at];
        if (entry->hash == hash && entry->name_length == length &&
            equal_bytes(self->arena + entry->name_offset, name, length)) {
            return at;
        }
        slot = (slot + 1) & self->slot_mask;
    }
}

static inline const Entry *
find_live(const VerdictIndex *self, const char *name, size_t length)
{
    Py_ssize_t at = find(self, hash_bytes(name, length, self->seed), name, length);
    if (at < 0 || !self->entries[at].live) {
        return NULL;
    }
    return &self->entries[at];
}

/* Rebuild the slots (dropping tombstones, and dead names from the arena when
   compact is set) with room for at least `wanted` entries at half load. */
static int
rebuild(VerdictIndex *self, Py_ssize_t wanted, int compact)
{
    size_t slot_count = MIN_SLOTS;
    while (slot_count < (size_t)wanted * 2) {
        slot_count *= 2;
    }
    int32_t *slots = PyMem_Malloc(slot_count * sizeof(int32_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(slots, 0xff, slot_count * sizeof(int32_t)); /* every slot EMPTY_SLOT */
    if (compact) {
        Py_ssize_t kept = 0;
        size_t arena_length = 0;
        for (Py_ssize_t i = 0; i < self->entry_count; i++) {
            Entry entry = self->entries[i];
            if (!entry.live) {
                continue;
            }
            /* Live names only move towards the arena's start, so memmove is safe. */
            if (entry.name_length > 0) {
                memmove(self->arena + arena_length, self->arena + entry.name_offset,
                        entry.name_length);
            }
            entry.name_offset = (uint32_t)arena_length;
            arena_length += entry.name_length;
            self->entries[kept++] = entry;
        }
        self->entry_count = kept;
        self->arena_length = arena_length;
    }
    size_t mask = slot_count - 1;
    for (Py_ssize_t i = 0; i < self->entry_count; i++) {
        size_t slot = (size_t)self->entries[i].hash & mask;
        while (slots[slot] != EMPTY_SLOT) {
            slot = (slot + 1) & mask;
        }
        slots[slot] = (int32_t)i;
    }
    PyMem_Free(self->slots);
    self->slots = slots;
    self->slot_mask = mask;
    return 0;
}

static int
append_entry(VerdictIndex *self, uint64_t hash, const char *name, size_t length)
{
    if (self->arena_length + length > UINT32_MAX || self->entry_count >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_OverflowError, "VerdictIndex is full");
        return -1;
    }
    Py_ssize_t dead = self->entry_count - self->live_count;
    if (self->slots == NULL || (size_t)(self->entry_count + 1) * 2 > self->slot_mask + 1) {
        /* Out of room: drop the dead if they are many, else grow. */
        if (rebuild(self, self->live_count * 2 + 1, dead > self->live_count) < 0) {
            return -1;
        }
    }
    if (self->entry_count == self->entry_capacity) {
        Py_ssize_t capacity = self->entry_capacity ? self->entry_capacity * 2 : 64;
        Entry *entries = PyMem_Realloc(self->entries, (size_t)capacity * sizeof(Entry));
        if (entries == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->entries = entries;
        self->entry_capacity = capacity;
    }
    if (self->arena_length + length > self->arena_capacity) {
        size_t capacity = self->arena_capacity ? self->arena_capacity : 4096;
        while (capacity < self->arena_length + length) {
            capacity *= 2;
        }
        char *arena = PyMem_Realloc(self->arena, capacity);
        if (arena == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->arena = arena;
        self->arena_capacity = capacity;
    }
    if (length > 0) { /* an empty name may come before any arena exists */
        memcpy(self->arena + self->arena_length, name, length);
    }
    Entry *entry = &self->entries[self->entry_count];
    entry->hash = hash;
    entry->name_offset = (uint32_t)self->arena_length;
    entry->name_length = (uint32_t)length;
    entry->reason = NO_REASON;
    entry->score = 0;
    entry->preferable = 0;
    entry->cpu_room = INFINITY;
    entry->memory_room = INFINITY;
    entry->live = 0;
    entry->plain = !needs_escape(name, length);
    entry->filtered_in = 0;
    self->arena_length += length;
    size_t slot = (size_t)hash & self->slot_mask;
    while (self->slots[slot] != EMPTY_SLOT) {
        slot = (slot + 1) & self->slot_mask;
    }
    self->slots[slot] = (int32_t)self->entry_count;
    self->entry_count++;
    return 0;
}

/* ------------------------------------------------------------------ JSON output */

typedef struct {
    char *data;
    size_t length;
    size_t capacity;
} Buffer;

static int
buffer_reserve(Buffer *buffer, size_t extra)
{
    if (buffer->length + extra <= buffer->capacity) {
        return 0;
    }
    size_t capacity = buffer->capacity ? buffer->capacity : 1024;
    while (capacity < buffer->length + extra) {
        capacity *= 2;
    }
    char *data = PyMem_Realloc(buffer->data, capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

/* The write position, with room for `extra` more bytes after it; NULL on no memory.
   Callers reserve once per node name and then write through the returned cursor. */
static inline char *
buffer_room(Buffer *buffer, size_t extra)
{
    if (buffer_reserve(buffer, extra) < 0) {
        return NULL;
    }
    return buffer->data + buffer->length;
}

static inline void
buffer_advance(Buffer *buffer, const char *cursor)
{
    buffer->length = (size_t)(cursor - buffer->data);
}

#define PUT_LITERAL(cursor, literal) \
    (memcpy((cursor), (literal), sizeof(literal) - 1), (cursor) += sizeof(literal) - 1)

/* The most bytes put_name writes for `length` bytes of text: all escaped, quoted. */
#define STRING_ROOM(length) ((length) * 6 + 2)

/* A JSON string literal. UTF-8 passes through; quote, backslash and control
   characters are escaped, which is all JSON requires. */
static char *
put_escaped_string(char *cursor, const char *text, size_t length)
{
    static const char hex[] = "0123456789abcdef";
    *cursor++ = '"';
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"' || c == '\\') {
            *cursor++ = '\\';
            *cursor++ = (char)c;
        }
        else if (c < 0x20) {
            PUT_LITERAL(cursor, "\\u00");
            *cursor++ = hex[c >> 4];
            *cursor++ = hex[c & 0xf];
        }
        else {
            *cursor++ = (char)c;
        }
    }
    *cursor++ = '"';
    return cursor;
}

/* A name as a JSON string. `plain` says it needs no escaping, as for every node
   name the index holds (node names are DNS subdomains); it saves the scan. */
static inline char *
put_name(char *cursor, const char *name, size_t length, int plain)
{
    if (!plain && needs_escape(name, length)) {
        return put_escaped_string(cursor, name, length);
    }
    *cursor++ = '"';
    copy_bytes(cursor, name, length);
    cursor += length;
    *cursor++ = '"';
    return cursor;
}

/* Scores are 0..255: at most three digits. */
static inline char *
put_score(char *cursor, unsigned score)
{
    if (score >= 100) {
        *cursor++ = (char)('0' + score / 100);
    }
    if (score >= 10) {
        *cursor++ = (char)('0' + score / 10 % 10);
    }
    *cursor++ = (char)('0' + score % 10);
    return cursor;
}

/* The name at `index` of a request's NodeNames, as UTF-8; NULL with an error set
   when it is not a string. */
static const char *
request_name(PyObject *names, Py_ssize_t index, Py_ssize_t *length)
{
    PyObject *name = PyList_GET_ITEM(names, index);
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "NodeNames[%zd] is %s, not a string", index,
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    return utf8_of(name, length);
}

/* ------------------------------------------------------------------ batched lookups */

/* Names looked up together. The table is larger than the fastest caches, and one
   lookup waits on memory three times in a row (the slot, the entry, the stored name),
   so each verb looks names up a batch at a time: every slot of the batch is fetched,
   then every entry, then every stored name, and the waits overlap. With the caches
   cold, as the rest of a request leaves them, 500 names took 27-32 µs one at a time
   and 20 µs in batches. */
#define BATCH 16

typedef struct {
    const char *name[BATCH];
    Py_ssize_t length[BATCH];
    const Entry *entry[BATCH]; /* NULL: the index does not hold the name */
    Py_ssize_t count; /* names looked up: fewer than asked where one is not a str */
} Batch;

/* Look up names[start, start + wanted). Stops before a name that is not a str or has
   no UTF-8 form, without an error set: request_name then reports it. With `skip` no
   name is looked up (every entry NULL): the names are only read. */
static void
lookup_batch(const VerdictIndex *self, PyObject *names, Py_ssize_t start, Py_ssize_t wanted,
             int skip, Batch *batch)
{
    uint64_t hashes[BATCH];
    int32_t found[BATCH];
    Py_ssize_t count = 0;
    for (; count < wanted; count++) {
        PyObject *name = PyList_GET_ITEM(names, start + count);
        if (!PyUnicode_Check(name)) {
            break;
        }
        const char *text = utf8_of(name, &batch->length[count]);
        if (text == NULL) {
            PyErr_Clear();
            break;
        }
        batch->name[count] = text;
        batch->entry[count] = NULL;
        if (!skip && self->slots != NULL) {
            hashes[count] = hash_bytes(text, (size_t)batch->length[count], self->seed);
            __builtin_prefetch(&self->slots[hashes[count] & self->slot_mask]);
        }
    }
    batch->count = count;
    if (skip || self->slots == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        found[i] = self->slots[hashes[i] & self->slot_mask];
        if (found[i] != EMPTY_SLOT) {
            __builtin_prefetch(&self->entries[found[i]]);
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (found[i] != EMPTY_SLOT) {
            __builtin_prefetch(self->arena + self->entries[found[i]].name_offset);
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (found[i] == EMPTY_SLOT) {
            continue; /* the first slot probed is empty: the name is not held */
        }
        Py_ssize_t at = find(self, hashes[i], batch->name[i], (size_t)batch->length[i]);
        if (at >= 0 && self->entries[at].live) {
            batch->entry[i] = &self->entries[at];
        }
    }
}

/* ------------------------------------------------------------------ methods */

/* A name argument as UTF-8. NULL with an exception set when it is not a str, and
   NULL without one when it has no UTF-8 form (lone surrogates): no request can carry
   such a name, since JSON parsers refuse it, so there is nothing to store, forget
   or find. */
static const char *
name_argument(PyObject *name, Py_ssize_t *length)
{
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "name must be a str");
        return NULL;
    }
    const char *text = utf8_of(name, length);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();
    }
    return text;
}

#define RETURN_NONE_UNLESS_ERROR() \
    do {                           \
        if (PyErr_Occurred()) {    \
            return NULL;           \
        }                          \
        Py_RETURN_NONE;            \
    } while (0)

/* The index of a reason in reasons, added with its JSON literal when new; few
   distinct reasons exist (one per metric and limit), shared by every node. */
static int32_t
reason_id_of(VerdictIndex *self, PyObject *reason)
{
    PyObject *known = PyDict_GetItemWithError(self->reason_ids, reason);
    if (known != NULL) {
        return (int32_t)PyLong_AsLong(known);
    }
    if (PyErr_Occurred()) {
        return NO_REASON;
    }
    Py_ssize_t length;
    const char *text = utf8_of(reason, &length);
    if (text == NULL) {
        return NO_REASON;
    }
    PyObject *literal = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)STRING_ROOM((size_t)length));
    if (literal == NULL) {
        return NO_REASON;
    }
    char *end = put_name(PyBytes_AS_STRING(literal), text, (size_t)length, 0);
    if (_PyBytes_Resize(&literal, end - PyBytes_AS_STRING(literal)) < 0) {
        return NO_REASON;
    }
    Py_ssize_t id = PyList_GET_SIZE(self->reasons);
    PyObject *boxed_id = PyLong_FromSsize_t(id);
    int failed = boxed_id == NULL || PyList_Append(self->reason_literals, literal) < 0 ||
                 PyList_Append(self->reasons, reason) < 0 ||
                 PyDict_SetItem(self->reason_ids, reason, boxed_id) < 0;
    Py_XDECREF(boxed_id);
    Py_DECREF(literal);
    return failed ? NO_REASON : (int32_t)id;
}

static PyObject *
VerdictIndex_set(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError, "set(name, score, reason, preferable=True, "
                                         "cpu_room=inf, memory_room=inf) takes 3 to 6 arguments");
        return NULL;
    }
    int preferable = 1;
    if (nargs >= 4 && (preferable = PyObject_IsTrue(args[3])) < 0) {
        return NULL;
    }
    double rooms[2] = {INFINITY, INFINITY};
    for (Py_ssize_t i = 4; i < nargs; i++) {
        rooms[i - 4] = PyFloat_AsDouble(args[i]);
        if (rooms[i - 4] == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        if (isnan(rooms[i - 4])) {
            PyErr_SetString(PyExc_ValueError, "a room must be a number, not NaN");
            return NULL;
        }
    }
    PyObject *name = args[0], *reason = args[2];
    Py_ssize_t length;
    const char *text = name_argument(name, &length);
    if (text == NULL) {
        RETURN_NONE_UNLESS_ERROR();
    }
    long score = PyLong_AsLong(args[1]);
    if (score == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (score < 0 || score > 255) {
        PyErr_Format(PyExc_ValueError, "score %ld is outside 0..255", score);
        return NULL;
    }
    int32_t reason_id = NO_REASON;
    if (reason != Py_None) {
        if (!PyUnicode_Check(reason)) {
            PyErr_SetString(PyExc_TypeError, "reason must be a str or None");
            return NULL;
        }
        reason_id = reason_id_of(self, reason);
        if (reason_id == NO_REASON) {
            return NULL;
        }
    }
    uint64_t hash = hash_bytes(text, (size_t)length, self->seed);
    Py_ssize_t at = find(self, hash, text, (size_t)length);
    if (at < 0) {
        if (append_entry(self, hash, text, (size_t)length) < 0) {
            return NULL;
        }
        at = self->entry_count - 1;
    }
    Entry *entry = &self->entries[at];
    if (!entry->live) {
        entry->live = 1;
        self->live_count++;
    }
    entry->score = (uint8_t)score;
    entry->reason = reason_id;
    entry->preferable = (uint8_t)preferable;
    entry->cpu_room = rooms[0];
    entry->memory_room = rooms[1];
    Py_RETURN_NONE;
}

static PyObject *
VerdictIndex_discard(VerdictIndex *self, PyObject *name)
{
    Py_ssize_t length;
    const char *text = name_argument(name, &length);
    if (text == NULL) {
        RETURN_NONE_UNLESS_ERROR();
    }
    Py_ssize_t at = find(self, hash_bytes(text, (size_t)length, self->seed), text, (size_t)length);
    if (at >= 0 && self->entries[at].live) {
        self->entries[at].live = 0;
        self->live_count--;
    }
    Py_RETURN_NONE;
}

static PyObject *
VerdictIndex_clear(VerdictIndex *self, PyObject *Py_UNUSED(ignored))
{
    self->entry_count = 0;
    self->live_count = 0;
    self->arena_length = 0;
    if (self->slots != NULL) {
        memset(self->slots, 0xff, (self->slot_mask + 1) * sizeof(int32_t));
    }
    PyDict_Clear(self->reason_ids);
    if (PyList_SetSlice(self->reasons, 0, PyList_GET_SIZE(self->reasons), NULL) < 0 ||
        PyList_SetSlice(self->reason_literals, 0, PyList_GET_SIZE(self->reason_literals), NULL) <
            0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
VerdictIndex_get(VerdictIndex *self, PyObject *name)
{
    Py_ssize_t length;
    const char *text = name_argument(name, &length);
    if (text == NULL) {
        RETURN_NONE_UNLESS_ERROR();
    }
    const Entry *entry = find_live(self, text, (size_t)length);
    if (entry == NULL) {
        Py_RETURN_NONE;
    }
    PyObject *reason = Py_None;
    if (entry->reason != NO_REASON) {
        reason = PyList_GET_ITEM(self->reasons, entry->reason);
    }
    return Py_BuildValue("(iO)", (int)entry->score, reason);
}

/* filter(names, exempt) -> (ExtenderFilterResult JSON, {reason: nodes it rejected}).
   Names the index does not hold pass: missing data never rejects a node. */
static PyObject *
VerdictIndex_filter(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "filter(names: list[str], exempt: bool)");
        return NULL;
    }
    PyObject *names = args[0];
    int exempt = PyObject_IsTrue(args[1]);
    if (exempt < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(names);
    Buffer passed = {NULL, 0, 0}, failed = {NULL, 0, 0};
    PyObject *body = NULL, *rejected = NULL;
    /* How many nodes each reason rejected, for the extender's metrics. */
    Py_ssize_t reason_count = PyList_GET_SIZE(self->reasons);
    Py_ssize_t *rejected_by_reason = PyMem_Calloc((size_t)reason_count + 1, sizeof(Py_ssize_t));
    Py_ssize_t passed_count = 0;
    static const char head[] = "{\"NodeNames\":[";
    static const char middle[] = "],\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{";
    static const char tail[] = "},\"Error\":\"\"}";
    char *cursor;
    if (rejected_by_reason == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((cursor = buffer_room(&passed, (size_t)count * 24 + 128)) == NULL) {
        goto done;
    }
    PUT_LITERAL(cursor, head);
    buffer_advance(&passed, cursor);
    /* A name repeated in one request is rejected once: FailedAndUnresolvableNodes is a
       JSON object, whose keys must be unique. Call numbers start again at 1 after
       2^32 - 1 calls, with every entry's mark cleared. */
    if (++self->filter_calls == 0) {
        for (Py_ssize_t at = 0; at < self->entry_count; at++) {
            self->entries[at].filtered_in = 0;
        }
        self->filter_calls = 1;
    }
    Batch batch;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t in_batch = i % BATCH;
        if (in_batch == 0) {
            Py_ssize_t wanted = count - i < BATCH ? count - i : BATCH;
            lookup_batch(self, names, i, wanted, exempt, &batch);
        }
        if (in_batch >= batch.count) {
            Py_ssize_t unused;
            request_name(names, i, &unused); /* not a str, or no UTF-8 form: raises */
            goto done;
        }
        Py_ssize_t length = batch.length[in_batch];
        const char *name = batch.name[in_batch];
        const Entry *entry = batch.entry[in_batch];
        if (entry == NULL || entry->reason == NO_REASON) {
            if ((cursor = buffer_room(&passed, STRING_ROOM((size_t)length) + 1)) == NULL) {
                goto done;
            }
            if (passed_count++ > 0) {
                *cursor++ = ',';
            }
            buffer_advance(&passed, put_name(cursor, name, (size_t)length, entry && entry->plain));
            continue;
        }
        if (entry->filtered_in == self->filter_calls) {
            continue; /* rejected already, earlier in this request */
        }
        ((Entry *)entry)->filtered_in = self->filter_calls;
        PyObject *reason = PyList_GET_ITEM(self->reason_literals, entry->reason);
        size_t reason_length = (size_t)PyBytes_GET_SIZE(reason);
        if ((cursor = buffer_room(&failed, STRING_ROOM((size_t)length) + reason_length + 2)) ==
            NULL) {
            goto done;
        }
        rejected_by_reason[entry->reason]++;
        if (failed.length > 0) {
            *cursor++ = ',';
        }
        cursor = put_name(cursor, name, (size_t)length, entry->plain);
        *cursor++ = ':';
        memcpy(cursor, PyBytes_AS_STRING(reason), reason_length);
        buffer_advance(&failed, cursor + reason_length);
    }
    /* Load rejections are unresolvable: preemption cannot lower measured load. */
    cursor = buffer_room(&passed, sizeof(middle) + failed.length + sizeof(tail));
    if (cursor == NULL) {
        goto done;
    }
    PUT_LITERAL(cursor, middle);
    if (failed.length > 0) {
        memcpy(cursor, failed.data, failed.length);
        cursor += failed.length;
    }
    PUT_LITERAL(cursor, tail);
    buffer_advance(&passed, cursor);
    if ((rejected = PyDict_New()) == NULL) {
        goto done;
    }
    for (Py_ssize_t id = 0; failed.length > 0 && id < reason_count; id++) {
        if (rejected_by_reason[id] == 0) {
            continue;
        }
        PyObject *nodes = PyLong_FromSsize_t(rejected_by_reason[id]);
        int error = nodes == NULL ||
                    PyDict_SetItem(rejected, PyList_GET_ITEM(self->reasons, id), nodes) < 0;
        Py_XDECREF(nodes);
        if (error) {
            goto done;
        }
    }
    body = PyBytes_FromStringAndSize(passed.data, (Py_ssize_t)passed.length);
done:
    PyMem_Free(passed.data);
    PyMem_Free(failed.data);
    PyMem_Free(rejected_by_reason);
    if (body == NULL) {
        Py_XDECREF(rejected);
        return NULL;
    }
    return Py_BuildValue("(NN)", body, rejected);
}

/* prioritize(names, cpu=0.0, memory=0.0)
       -> (HostPriorityList JSON, unknown count, preferred position).

   The rules are app/load/wire.py's. A name may be preferred when it was set as
   preferable (its score rests on fresh data) and passes; unknown names pass and score
   unknown_score but are never preferred (nothing is known of them). The preferred name
   is the first with the highest score among those that also have room for the pod's
   estimate (cpu cores, memory bytes) in both of their rooms, or, where none has, among
   all that may be preferred. It is answered min(top + 1, MAX_SCORE) and every other name
   min(score, MAX_SCORE - 1, top), so it is the unique top of the answer and kube-scheduler,
   whose own plugins rarely differ by the extender's weight, binds there: the
   reservation made for it after the answer is then a fact, not a guess, even where
   nodes tie (app.load.wire's preferred_position, the reference). The position is -1 when no name
   may be preferred, and then nothing is lifted. */
/* Lower every score written above cap to cap. Each is one digit after ',"Score":',
   a text no name can hold unescaped (its quotes would be escaped). */
static void
cap_scores(Buffer *out, char cap)
{
    static const char key[] = ",\"Score\":";
    const size_t key_length = sizeof(key) - 1;
    char *end = out->data + out->length;
    for (char *at = out->data; at + key_length < end; at++) {
        if (*at == ',' && memcmp(at, key, key_length) == 0) {
            at += key_length;
            if (*at > cap) {
                *at = cap;
            }
        }
    }
}

static PyObject *
VerdictIndex_prioritize(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "prioritize(names, cpu=0.0, memory=0.0)");
        return NULL;
    }
    PyObject *names = args[0];
    if (!PyList_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "prioritize(names: list[str])");
        return NULL;
    }
    double pod_cpu = 0.0, pod_memory = 0.0;
    if (nargs == 3) {
        pod_cpu = PyFloat_AsDouble(args[1]);
        if (pod_cpu == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        pod_memory = PyFloat_AsDouble(args[2]);
        if (pod_memory == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
    }
    Py_ssize_t count = PyList_GET_SIZE(names);
    Buffer out = {NULL, 0, 0};
    PyObject *body = NULL;
    Py_ssize_t unknown = 0, best = -1;
    /* The best name with room for the pod, and the best of all that may be preferred:
       position, score and where its score was written. */
    Py_ssize_t roomy = -1;
    int roomy_top = -1, any_top = -1;
    size_t roomy_at = 0, any_at = 0;
    int max_plain = -1; /* the highest score written before the preferred one is chosen */
    static const char host[] = "{\"Host\":";
    static const char score_key[] = ",\"Score\":";
    char *cursor = buffer_room(&out, (size_t)count * 40 + 2);
    if (cursor == NULL) {
        goto done;
    }
    *cursor++ = '[';
    buffer_advance(&out, cursor);
    Batch batch;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t in_batch = i % BATCH;
        if (in_batch == 0) {
            Py_ssize_t wanted = count - i < BATCH ? count - i : BATCH;
            lookup_batch(self, names, i, wanted, 0, &batch);
        }
        if (in_batch >= batch.count) {
            Py_ssize_t unused;
            request_name(names, i, &unused); /* not a str, or no UTF-8 form: raises */
            goto done;
        }
        Py_ssize_t length = batch.length[in_batch];
        const char *name = batch.name[in_batch];
        const Entry *entry = batch.entry[in_batch];
        unknown += entry == NULL;
        int score = entry ? entry->score : self->unknown_score;
        int candidate = 0; /* 1: best of all so far; 2: also best with room so far */
        if (entry != NULL && entry->preferable && entry->reason == NO_REASON) {
            if (score > any_top) {
                any_top = score;
                best = i;
                candidate = 1;
            }
            if (score > roomy_top && pod_cpu <= entry->cpu_room &&
                pod_memory <= entry->memory_room) {
                roomy_top = score;
                roomy = i;
                candidate |= 2;
            }
        }
        cursor =
            buffer_room(&out, STRING_ROOM((size_t)length) + sizeof(host) + sizeof(score_key) + 6);
        if (cursor == NULL) {
            goto done;
        }
        if (i > 0) {
            *cursor++ = ',';
        }
        PUT_LITERAL(cursor, host);
        cursor = put_name(cursor, name, (size_t)length, entry && entry->plain);
        PUT_LITERAL(cursor, score_key);
        if (candidate & 1) {
            any_at = (size_t)(cursor - out.data);
        }
        if (candidate & 2) {
            roomy_at = (size_t)(cursor - out.data);
        }
        int plain = score < MAX_SCORE ? score : MAX_SCORE - 1;
        max_plain = plain > max_plain ? plain : max_plain;
        cursor = put_score(cursor, (unsigned)plain);
        *cursor++ = '}';
        buffer_advance(&out, cursor);
    }
    if ((cursor = buffer_room(&out, 2)) == NULL) {
        goto done;
    }
    *cursor++ = ']';
    buffer_advance(&out, cursor);
    if (roomy >= 0) {
        best = roomy;
    }
    if (best >= 0) {
        int top = roomy >= 0 ? roomy_top : any_top;
        size_t best_at = roomy >= 0 ? roomy_at : any_at;
        int cap = top < MAX_SCORE ? top : MAX_SCORE - 1;
        if (max_plain > cap) {
            cap_scores(&out, (char)('0' + cap));
        }
        /* The preferred score was written as one digit (every score below MAX_SCORE is);
           its answer may need two: move the rest one byte on (room was made above). */
        int answer = top < MAX_SCORE ? top + 1 : MAX_SCORE;
        if (answer >= 10) {
            memmove(out.data + best_at + 2, out.data + best_at + 1, out.length - best_at - 1);
            out.length += 1;
        }
        put_score(out.data + best_at, (unsigned)answer);
    }
    body = PyBytes_FromStringAndSize(out.data, (Py_ssize_t)out.length);
done:
    PyMem_Free(out.data);
    if (body == NULL) {
        return NULL;
    }
    return Py_BuildValue("(Nnn)", body, unknown, best);
}

/* ------------------------------------------------------------------ the type */

static PyObject *
VerdictIndex_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"seed", NULL};
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|K:VerdictIndex", keywords, &seed)) {
        return NULL;
    }
    VerdictIndex *self = (VerdictIndex *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->seed = (uint64_t)seed;
    self->reasons = PyList_New(0);
    self->reason_literals = PyList_New(0);
    self->reason_ids = PyDict_New();
    if (self->reasons == NULL || self->reason_literals == NULL || self->reason_ids == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void
VerdictIndex_dealloc(VerdictIndex *self)
{
    PyMem_Free(self->entries);
    PyMem_Free(self->slots);
    PyMem_Free(self->arena);
    Py_XDECREF(self->reasons);
    Py_XDECREF(self->reason_literals);
    Py_XDECREF(self->reason_ids);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
VerdictIndex_len(VerdictIndex *self)
{
    return self->live_count;
}

static PyObject *
VerdictIndex_get_unknown_score(VerdictIndex *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(self->unknown_score);
}

static int
VerdictIndex_set_unknown_score(VerdictIndex *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "unknown_score cannot be deleted");
        return -1;
    }
    long score = PyLong_AsLong(value);
    if (score == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (score < 0 || score > 255) {
        PyErr_Format(PyExc_ValueError, "score %ld is outside 0..255", score);
        return -1;
    }
    self->unknown_score = (uint8_t)score;
    return 0;
}

static PyMethodDef VerdictIndex_methods[] = {
    {"set", (PyCFunction)(void (*)(void))VerdictIndex_set, METH_FASTCALL,
     "set(name, score, reason, preferable=True): record a node's score, filter reason (None: it "
     "passes) and whether it may be the preferred node."},
    {"discard", (PyCFunction)VerdictIndex_discard, METH_O, "discard(name): forget a node."},
    {"clear", (PyCFunction)VerdictIndex_clear, METH_NOARGS, "clear(): forget every node."},
    {"get", (PyCFunction)VerdictIndex_get, METH_O,
     "get(name) -> (score, reason) or None."},
    {"filter", (PyCFunction)(void (*)(void))VerdictIndex_filter, METH_FASTCALL,
     "filter(names, exempt) -> (body, {reason: nodes rejected})."},
    {"prioritize", (PyCFunction)(void (*)(void))VerdictIndex_prioritize, METH_FASTCALL,
     "prioritize(names, cpu=0.0, memory=0.0) -> (body, unknown count, preferred position or "
     "-1)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef VerdictIndex_getset[] = {
    {"unknown_score", (getter)VerdictIndex_get_unknown_score,
     (setter)VerdictIndex_set_unknown_score, "The score of a name the index does not hold.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods VerdictIndex_as_sequence = {
    .sq_length = (lenfunc)VerdictIndex_len,
};

static PyTypeObject VerdictIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "app.extender._verdict_index.VerdictIndex",
    .tp_doc = "Node name -> (score, filter reason); answers filter and prioritize.",
    .tp_basicsize = sizeof(VerdictIndex),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = VerdictIndex_new,
    .tp_dealloc = (destructor)VerdictIndex_dealloc,
    .tp_methods = VerdictIndex_methods,
    .tp_getset = VerdictIndex_getset,
    .tp_as_sequence = &VerdictIndex_as_sequence,
};

static struct PyModuleDef verdict_index_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "app.extender._verdict_index",
    .m_doc = "The extender's native verdict index (see app/extender/index.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__verdict_index(void)
{
    if (PyType_Ready(&VerdictIndexType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&verdict_index_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&VerdictIndexType);
    if (PyModule_AddObject(module, "VerdictIndex", (PyObject *)&VerdictIndexType) < 0) {
        Py_DECREF(&VerdictIndexType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
