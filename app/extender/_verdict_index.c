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
 * are app.load.prioritize's rule (host_priorities, preferred_position), which the Python
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

/* What every lookup reads of a node: 32 bytes, the entries aligned to a cache line, so
   that one lookup reads one line of them. */
typedef struct {
    uint64_t hash;
    uint32_t name_offset; /* into the arena */
    uint32_t name_length;
    int32_t reason; /* index into reasons, or NO_REASON when the node passes */
    uint32_t filtered_in; /* the filter call that last rejected it: a repeat is skipped */
    uint8_t score;
    uint8_t live;  /* removed entries stay, as tombstones, until the next rebuild */
    uint8_t plain; /* the name needs no JSON escaping */
    uint8_t preferable; /* its score rests on fresh data: it may be lifted (app/load/prioritize.py) */
} Entry;

_Static_assert(sizeof(Entry) == 32, "an entry is half a cache line");
#define ENTRY_ALIGNMENT 64

/* What prioritize reads of a node only when it may be the preferred one, apart from
   the entries, at the same index. */
typedef struct {
    double cpu;    /* cores the node can still take before a limit rejects it */
    double memory; /* bytes, likewise (app/load/prioritize.py, limit_room) */
} Room;

typedef struct {
    PyObject_HEAD
    Entry *entries;      /* in entries_block, aligned to ENTRY_ALIGNMENT */
    void *entries_block; /* what was allocated for them */
    Room *rooms;         /* each entry's, at its index */
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

static inline Entry *
find_live(const VerdictIndex *self, const char *name, size_t length)
{
    Py_ssize_t at = find(self, hash_bytes(name, length, self->seed), name, length);
    if (at < 0 || !self->entries[at].live) {
        return NULL;
    }
    return &self->entries[at];
}

/* Entry `index`, of hash `hash`, into the first free slot from its own (linear probing). */
static inline void
place(int32_t *slots, size_t mask, uint64_t hash, int32_t index)
{
    size_t slot = (size_t)hash & mask;
    while (slots[slot] != EMPTY_SLOT) {
        slot = (slot + 1) & mask;
    }
    slots[slot] = index;
}

/* `capacity` (or `initial` where it is 0) doubled until it holds `needed`. */
static inline size_t
doubled(size_t capacity, size_t needed, size_t initial)
{
    size_t grown = capacity ? capacity : initial;
    while (grown < needed) {
        grown *= 2;
    }
    return grown;
}

/* *data, of *capacity bytes, grown to hold at least `needed`: its size (or `initial`)
   doubled until it does. 0, or -1 with MemoryError set (*data then unchanged). Rarely
   called: kept out of line, out of the loops that check for room. */
static __attribute__((noinline)) int
grow_bytes(char **data, size_t *capacity, size_t needed, size_t initial)
{
    if (needed <= *capacity) {
        return 0;
    }
    size_t grown = doubled(*capacity, needed, initial);
    char *moved = PyMem_Realloc(*data, grown);
    if (moved == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *data = moved;
    *capacity = grown;
    return 0;
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
            self->rooms[kept] = self->rooms[i];
            self->entries[kept++] = entry;
        }
        self->entry_count = kept;
        self->arena_length = arena_length;
    }
    size_t mask = slot_count - 1;
    for (Py_ssize_t i = 0; i < self->entry_count; i++) {
        place(slots, mask, self->entries[i].hash, (int32_t)i);
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
        void *block = PyMem_Malloc((size_t)capacity * sizeof(Entry) + ENTRY_ALIGNMENT - 1);
        Room *rooms = block ? PyMem_Realloc(self->rooms, (size_t)capacity * sizeof(Room)) : NULL;
        if (rooms == NULL) {
            PyMem_Free(block);
            PyErr_NoMemory();
            return -1;
        }
        Entry *entries = (Entry *)(((uintptr_t)block + ENTRY_ALIGNMENT - 1) &
                                   ~(uintptr_t)(ENTRY_ALIGNMENT - 1));
        if (self->entry_count > 0) {
            memcpy(entries, self->entries, (size_t)self->entry_count * sizeof(Entry));
        }
        PyMem_Free(self->entries_block);
        self->entries_block = block;
        self->entries = entries;
        self->rooms = rooms;
        self->entry_capacity = capacity;
    }
    if (grow_bytes(&self->arena, &self->arena_capacity, self->arena_length + length, 4096) < 0) {
        return -1;
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
    self->rooms[self->entry_count] = (Room){INFINITY, INFINITY};
    entry->live = 0;
    entry->plain = !needs_escape(name, length);
    entry->filtered_in = 0;
    self->arena_length += length;
    place(self->slots, self->slot_mask, hash, (int32_t)self->entry_count);
    self->entry_count++;
    return 0;
}

/* ------------------------------------------------------------------ JSON output */

/* An answer being written, in the bytes object it is returned as: no copy at the end
   (a 10 to 16 KiB copy at 500 names, a tenth of the verb). */
typedef struct {
    PyObject *bytes; /* NULL until the first byte is reserved */
    char *data;      /* its bytes */
    size_t length;   /* written so far */
    size_t capacity; /* its size */
} Buffer;

/* Grown to `needed` bytes; out of line, as the rare case. 0, or -1 with an error set
   (the buffer is then empty: buffer_answer gives NULL, buffer_free does nothing). */
static __attribute__((noinline)) int
buffer_grow(Buffer *buffer, size_t needed)
{
    size_t grown = doubled(buffer->capacity, needed, 1024);
    if (buffer->bytes == NULL) {
        buffer->bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)grown);
    }
    else if (_PyBytes_Resize(&buffer->bytes, (Py_ssize_t)grown) < 0) {
        buffer->bytes = NULL; /* _PyBytes_Resize freed it */
    }
    if (buffer->bytes == NULL) {
        *buffer = (Buffer){NULL, NULL, 0, 0};
        return -1;
    }
    buffer->data = PyBytes_AS_STRING(buffer->bytes);
    buffer->capacity = grown;
    return 0;
}

static inline int
buffer_reserve(Buffer *buffer, size_t extra)
{
    if (buffer->length + extra <= buffer->capacity) { /* the common case, kept inline */
        return 0;
    }
    return buffer_grow(buffer, buffer->length + extra);
}

/* What was written, as a bytes object (the buffer's own, cut to its length: the
   buffer is left empty); NULL with an error set. */
static PyObject *
buffer_answer(Buffer *buffer)
{
    if (buffer->bytes == NULL) {
        return PyBytes_FromStringAndSize("", 0);
    }
    PyObject *answer = buffer->bytes;
    Py_ssize_t length = (Py_ssize_t)buffer->length;
    *buffer = (Buffer){NULL, NULL, 0, 0};
    if (_PyBytes_Resize(&answer, length) < 0) {
        return NULL; /* _PyBytes_Resize freed it */
    }
    return answer;
}

static inline void
buffer_free(Buffer *buffer)
{
    Py_CLEAR(buffer->bytes);
    *buffer = (Buffer){NULL, NULL, 0, 0};
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

/* ------------------------------------------------------------------ a request's names */

/* Where a verb reads the request's node names: a list of str (NodeNames as orjson
   parsed it), or the NodeNames array's own JSON text in the request body. Reading the
   text skips what the parse would cost most, a str for every name (9 of the 12 µs
   orjson takes for a body of 500 names), and the names are looked up straight from
   the body's bytes.

   The text is read only in the plain form kube-scheduler writes: names of printable
   ASCII with no escape (node names are DNS subdomains), JSON whitespace between tokens.
   A name in such a form reads as the same bytes orjson would make of it, and anything
   else (an escape, a non-ASCII byte, a control character, a token that is not a
   string, a missing or extra comma) stops the read with `plain` cleared: the caller
   then answers from the body as orjson parses it, so this reader never accepts what
   orjson refuses nor reads a name otherwise. */
typedef struct {
    PyObject *list;  /* NULL when reading text */
    Py_ssize_t next; /* the position of the next name */
    const char *at;  /* text: where the next token starts */
    const char *end; /* text: one past the array's closing bracket */
    int done;        /* no more names: the end, or (text) a token out of the plain form */
    int plain;       /* text: the array was read to its end in the plain form */
} Names;

static inline const char *
skip_space(const char *at, const char *end)
{
    while (at < end && (*at == ' ' || *at == '\n' || *at == '\r' || *at == '\t')) {
        at++;
    }
    return at;
}

/* The high bit of each byte of `word` that cannot stand in a plain name unescaped: '"'
   (which ends it), '\\', a control character, or one of a multi-byte UTF-8 character.
   Borrows can flag a byte above a flagged one, never below: the lowest flag is exact. */
static inline uint64_t
not_plain_bytes(uint64_t word)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    return (((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) |
            ((word - ones * 0x20) & ~word) | word) &
           highs;
}

/* Where the plain name starting at `at` ends (its closing quote), or NULL where a byte
   is not plain or the text ends first. Names are read 8 bytes at a time. */
static inline const char *
plain_name_end(const char *at, const char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - at >= 8) {
        uint64_t flags = not_plain_bytes(load_word(at));
        if (flags != 0) {
            at += __builtin_ctzll(flags) / 8;
            return *at == '"' ? at : NULL;
        }
        at += 8;
    }
#endif
    for (; at < end; at++) {
        unsigned char c = (unsigned char)*at;
        if (c == '"') {
            return at;
        }
        if (c < 0x20 || c >= 0x80 || c == '\\') {
            return NULL;
        }
    }
    return NULL;
}

/* The next name of a text array; 0 at the closing bracket or out of the plain form. */
static int
next_text_name(Names *names, const char **text, Py_ssize_t *length)
{
    const char *end = names->end;
    const char *at = names->at;
    names->done = 1;
    if (names->next > 0 && end - at >= 2 && at[0] == ',' && at[1] == '"') {
        at += 1; /* the usual case: ,"name" */
    }
    else {
        at = skip_space(at, end);
        if (at < end && *at == ']') {
            names->plain = at + 1 == end;
            return 0;
        }
        if (names->next > 0) { /* a comma is due between two names */
            if (at >= end || *at != ',') {
                return 0;
            }
            at = skip_space(at + 1, end);
        }
        if (at >= end || *at != '"') {
            return 0;
        }
    }
    const char *start = at + 1;
    const char *quote = plain_name_end(start, end);
    if (quote == NULL) {
        return 0;
    }
    *text = start;
    *length = quote - start;
    names->at = quote + 1;
    names->next++;
    names->done = 0;
    return 1;
}

/* The next name, as UTF-8; 0 at the end, and before a list item that is not a str or
   has no UTF-8 form (without an error set: request_name then reports it). */
static inline int
next_name(Names *names, const char **text, Py_ssize_t *length)
{
    if (names->list == NULL) {
        return next_text_name(names, text, length);
    }
    if (names->next >= PyList_GET_SIZE(names->list)) {
        names->done = 1;
        return 0;
    }
    PyObject *name = PyList_GET_ITEM(names->list, names->next);
    if (!PyUnicode_Check(name)) {
        return 0;
    }
    if ((*text = utf8_of(name, length)) == NULL) {
        PyErr_Clear();
        return 0;
    }
    names->next++;
    return 1;
}

/* After next_name returned 0: 1 when the names were read to their end; else 0, with
   the list item's error set, or (text) none: the caller answers None. */
static int
names_read_whole(Names *names)
{
    if (names->list == NULL) {
        return names->plain;
    }
    if (!names->done) {
        Py_ssize_t unused;
        request_name(names->list, names->next, &unused); /* not a str, or no UTF-8 form */
        return 0;
    }
    return 1;
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
    Py_ssize_t count; /* names looked up: fewer than BATCH at the end or before a bad one */
} Batch;

/* Look up the next BATCH names (fewer at their end, or before one next_name refuses).
   With `skip` no name is looked up (every entry NULL): the names are only read. */
static void
lookup_batch(const VerdictIndex *self, Names *names, int skip, Batch *batch)
{
    uint64_t hashes[BATCH];
    int32_t found[BATCH];
    Py_ssize_t count = 0;
    for (; count < BATCH; count++) {
        const char *text;
        if (!next_name(names, &text, &batch->length[count])) {
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

/* Whether the request has an `i`-th name (i counted from 0, one after another), looked
   up in `batch` at i % BATCH: 1 when it has; 0 after the last name; -1 when the names
   stop before their end (a list item that is not a str, with the error set, or text out
   of the plain form, without one). */
static inline int
looked_up(const VerdictIndex *self, Names *names, int skip, Batch *batch, Py_ssize_t i)
{
    Py_ssize_t in_batch = i % BATCH;
    if (in_batch == 0) {
        lookup_batch(self, names, skip, batch);
    }
    if (in_batch < batch->count) {
        return 1;
    }
    return names_read_whole(names) ? 0 : -1;
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
    self->rooms[at] = (Room){rooms[0], rooms[1]};
    Py_RETURN_NONE;
}

/* The live entry a name argument names; NULL when none does, with an error set when
   the name is not a str. */
static Entry *
entry_of_argument(VerdictIndex *self, PyObject *name)
{
    Py_ssize_t length;
    const char *text = name_argument(name, &length);
    return text == NULL ? NULL : find_live(self, text, (size_t)length);
}

static PyObject *
VerdictIndex_discard(VerdictIndex *self, PyObject *name)
{
    Entry *entry = entry_of_argument(self, name);
    if (entry == NULL) {
        RETURN_NONE_UNLESS_ERROR();
    }
    entry->live = 0;
    self->live_count--;
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
    const Entry *entry = entry_of_argument(self, name);
    if (entry == NULL) {
        RETURN_NONE_UNLESS_ERROR();
    }
    PyObject *reason = Py_None;
    if (entry->reason != NO_REASON) {
        reason = PyList_GET_ITEM(self->reasons, entry->reason);
    }
    return Py_BuildValue("(iO)", (int)entry->score, reason);
}

/* Passing names copied as the request's text wrote them, `"a","b"`, after a comma if
   names came before; 0, or -1 with an error set. */
static int
write_run(Buffer *passed, Py_ssize_t *passed_count, const char *run, const char *run_end)
{
    size_t length = (size_t)(run_end - run);
    char *cursor = buffer_room(passed, length + 1);
    if (cursor == NULL) {
        return -1;
    }
    if ((*passed_count)++ > 0) {
        *cursor++ = ',';
    }
    memcpy(cursor, run, length);
    buffer_advance(passed, cursor + length);
    return 0;
}

/* The ExtenderFilterResult JSON for `names` into *body, and {reason: nodes it rejected}
   into *rejected. Names the index does not hold pass: missing data never rejects a node.
   Returns 0; or -1 with an error set; or 1 (text names out of the plain form) with
   nothing made. `room` is the answer's first allocation. */
static int
answer_filter(VerdictIndex *self, Names *names, int exempt, size_t room, PyObject **body,
              PyObject **rejected)
{
    int status = -1;
    int plain_names = names->list == NULL; /* text names need no escaping */
    /* Passing text names not yet written: the request's own text from the first one's
       opening quote to one past the last one's closing quote. */
    const char *run = NULL, *run_end = NULL;
    *body = *rejected = NULL;
    Buffer passed = {NULL, NULL, 0, 0}, failed = {NULL, NULL, 0, 0};
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
    if ((cursor = buffer_room(&passed, room)) == NULL) {
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
    int read;
    for (Py_ssize_t i = 0; (read = looked_up(self, names, exempt, &batch, i)) > 0; i++) {
        Py_ssize_t in_batch = i % BATCH;
        Py_ssize_t length = batch.length[in_batch];
        const char *name = batch.name[in_batch];
        const Entry *entry = batch.entry[in_batch];
        if (entry == NULL || entry->reason == NO_REASON) {
            if (plain_names) {
                /* A text name passes as the request wrote it: a name right after the
                   run's last one (one comma between) joins the run. */
                if (run != NULL && name - 1 == run_end + 1) {
                    run_end = name + length + 1;
                    continue;
                }
                if (run != NULL && write_run(&passed, &passed_count, run, run_end) < 0) {
                    goto done;
                }
                run = name - 1;
                run_end = name + length + 1;
                continue;
            }
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
    if (read < 0) {
        status = PyErr_Occurred() ? -1 : 1;
        goto done;
    }
    if (run != NULL && write_run(&passed, &passed_count, run, run_end) < 0) {
        goto done;
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
    if ((*rejected = PyDict_New()) == NULL) {
        goto done;
    }
    for (Py_ssize_t id = 0; failed.length > 0 && id < reason_count; id++) {
        if (rejected_by_reason[id] == 0) {
            continue;
        }
        PyObject *nodes = PyLong_FromSsize_t(rejected_by_reason[id]);
        int error = nodes == NULL ||
                    PyDict_SetItem(*rejected, PyList_GET_ITEM(self->reasons, id), nodes) < 0;
        Py_XDECREF(nodes);
        if (error) {
            goto done;
        }
    }
    *body = buffer_answer(&passed);
    status = *body == NULL ? -1 : 0;
done:
    buffer_free(&passed);
    buffer_free(&failed);
    PyMem_Free(rejected_by_reason);
    if (status != 0) {
        Py_CLEAR(*body);
        Py_CLEAR(*rejected);
    }
    return status;
}

/* filter(names, exempt) -> (ExtenderFilterResult JSON, {reason: nodes it rejected}). */
static PyObject *
VerdictIndex_filter(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "filter(names: list[str], exempt: bool)");
        return NULL;
    }
    int exempt = PyObject_IsTrue(args[1]);
    if (exempt < 0) {
        return NULL;
    }
    Names names = {.list = args[0]};
    PyObject *body, *rejected;
    size_t room = (size_t)PyList_GET_SIZE(args[0]) * 24 + 128;
    if (answer_filter(self, &names, exempt, room, &body, &rejected) != 0) {
        return NULL;
    }
    return Py_BuildValue("(NN)", body, rejected);
}

/* The text names argument of filter_text and prioritize_text: body (bytes) and the
   offsets of the NodeNames array in it, its opening and one past its closing bracket
   (split_args). 0, or -1 with an error set. */
static int
text_names(PyObject *const *args, Names *names)
{
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "the body must be bytes");
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return -1;
    }
    const char *text = PyBytes_AS_STRING(args[0]);
    if (start < 0 || end > size || end - start < 2 || text[start] != '[') {
        PyErr_SetString(PyExc_ValueError, "the offsets do not hold a JSON array in the body");
        return -1;
    }
    *names = (Names){.at = text + start + 1, .end = text + end};
    return 0;
}

/* filter_text(body, start, end, exempt)
       -> (ExtenderFilterResult JSON, {reason: nodes it rejected}, name count) or None.
   As filter, the names read from the body's JSON text; None when that text is not in
   the plain form (see Names): the caller then parses it. */
static PyObject *
VerdictIndex_filter_text(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "filter_text(body, start, end, exempt)");
        return NULL;
    }
    Names names;
    int exempt = PyObject_IsTrue(args[3]);
    if (exempt < 0 || text_names(args, &names) < 0) {
        return NULL;
    }
    PyObject *body, *rejected;
    /* Room for the passing names and as many bytes of reasons, without growing. */
    size_t room = (size_t)(names.end - names.at) * 2 + 1024;
    int status = answer_filter(self, &names, exempt, room, &body, &rejected);
    if (status < 0) {
        return NULL;
    }
    if (status > 0) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NNn)", body, rejected, names.next);
}

/* prioritize(names, cpu=0.0, memory=0.0)
       -> (HostPriorityList JSON, unknown count, preferred position).

   The rules are app/load/prioritize.py's. A name may be preferred when it was set as
   preferable (its score rests on fresh data) and passes; unknown names pass and score
   unknown_score but are never preferred (nothing is known of them). The preferred name
   is the first with the highest score among those that also have room for the pod's
   estimate (cpu cores, memory bytes) in both of their rooms, or, where none has, among
   all that may be preferred. It is answered min(top + 1, MAX_SCORE) and every other name
   min(score, MAX_SCORE - 1, top), so it is the unique top of the answer and kube-scheduler,
   whose own plugins rarely differ by the extender's weight, binds there: the
   reservation made for it after the answer is then a fact, not a guess, even where
   nodes tie (app.load.prioritize's preferred_position, the reference). The position is -1 when no name
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

typedef struct {
    PyObject *body;         /* the HostPriorityList JSON */
    Py_ssize_t unknown;     /* names the index does not hold */
    Py_ssize_t best;        /* the preferred name's position, or -1 */
    const char *best_name;  /* and its UTF-8, where best >= 0 */
    Py_ssize_t best_length;
} Prioritized;

/* The answer for `names` (and the pod's estimate, cpu cores and memory bytes) into
   *answer. Returns 0; or -1 with an error set; or 1 (text names out of the plain
   form) with nothing made. `room` is the answer's first allocation. */
static int
answer_prioritize(VerdictIndex *self, Names *names, double pod_cpu, double pod_memory,
                  size_t room, Prioritized *answer)
{
    int status = -1;
    int plain_names = names->list == NULL; /* text names need no escaping */
    Buffer out = {NULL, NULL, 0, 0};
    PyObject *body = NULL;
    Py_ssize_t unknown = 0, best = -1;
    /* The best name with room for the pod, and the best of all that may be preferred:
       position, score, name and where its score was written. */
    Py_ssize_t roomy = -1;
    const char *roomy_name = NULL, *any_name = NULL;
    Py_ssize_t roomy_length = 0, any_length = 0;
    int roomy_top = -1, any_top = -1;
    size_t roomy_at = 0, any_at = 0;
    int max_plain = -1; /* the highest score written before the preferred one is chosen */
    static const char host[] = "{\"Host\":";
    static const char score_key[] = ",\"Score\":";
    char *cursor = buffer_room(&out, room);
    if (cursor == NULL) {
        goto done;
    }
    *cursor++ = '[';
    buffer_advance(&out, cursor);
    Batch batch;
    int read;
    for (Py_ssize_t i = 0; (read = looked_up(self, names, 0, &batch, i)) > 0; i++) {
        Py_ssize_t in_batch = i % BATCH;
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
                any_name = name;
                any_length = length;
                candidate = 1;
            }
            const Room *room = &self->rooms[entry - self->entries];
            if (score > roomy_top && pod_cpu <= room->cpu && pod_memory <= room->memory) {
                roomy_top = score;
                roomy = i;
                roomy_name = name;
                roomy_length = length;
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
        cursor = put_name(cursor, name, (size_t)length, plain_names || (entry && entry->plain));
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
    if (read < 0) {
        status = PyErr_Occurred() ? -1 : 1;
        goto done;
    }
    if ((cursor = buffer_room(&out, 2)) == NULL) {
        goto done;
    }
    *cursor++ = ']';
    buffer_advance(&out, cursor);
    if (roomy >= 0) {
        best = roomy;
        any_name = roomy_name;
        any_length = roomy_length;
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
    body = buffer_answer(&out);
    if (body != NULL) {
        *answer = (Prioritized){body, unknown, best, any_name, any_length};
        status = 0;
    }
done:
    buffer_free(&out);
    return status;
}

/* The pod's estimate from args[first] and args[first + 1]; 0, or -1 with an error set. */
static int
pod_estimate(PyObject *const *args, Py_ssize_t first, double *cpu, double *memory)
{
    *cpu = PyFloat_AsDouble(args[first]);
    if (*cpu == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    *memory = PyFloat_AsDouble(args[first + 1]);
    if (*memory == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    return 0;
}

static PyObject *
VerdictIndex_prioritize(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "prioritize(names, cpu=0.0, memory=0.0)");
        return NULL;
    }
    if (!PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "prioritize(names: list[str])");
        return NULL;
    }
    double pod_cpu = 0.0, pod_memory = 0.0;
    if (nargs == 3 && pod_estimate(args, 1, &pod_cpu, &pod_memory) < 0) {
        return NULL;
    }
    Names names = {.list = args[0]};
    Prioritized answer;
    size_t room = (size_t)PyList_GET_SIZE(args[0]) * 40 + 2;
    if (answer_prioritize(self, &names, pod_cpu, pod_memory, room, &answer) != 0) {
        return NULL;
    }
    return Py_BuildValue("(Nnn)", answer.body, answer.unknown, answer.best);
}

/* prioritize_text(body, start, end, cpu, memory)
       -> (HostPriorityList JSON, unknown count, preferred name or None, name count) or None.
   As prioritize, the names read from the body's JSON text; None when that text is not
   in the plain form (see Names): the caller then parses it. */
static PyObject *
VerdictIndex_prioritize_text(VerdictIndex *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "prioritize_text(body, start, end, cpu, memory)");
        return NULL;
    }
    Names names;
    double pod_cpu, pod_memory;
    if (text_names(args, &names) < 0 || pod_estimate(args, 3, &pod_cpu, &pod_memory) < 0) {
        return NULL;
    }
    Prioritized answer;
    size_t room = (size_t)(names.end - names.at) * 3 + 64;
    int status = answer_prioritize(self, &names, pod_cpu, pod_memory, room, &answer);
    if (status < 0) {
        return NULL;
    }
    if (status > 0) {
        Py_RETURN_NONE;
    }
    PyObject *best = Py_None;
    Py_INCREF(best);
    if (answer.best >= 0) {
        Py_DECREF(best);
        /* plain names are ASCII */
        best = PyUnicode_DecodeASCII(answer.best_name, answer.best_length, NULL);
        if (best == NULL) {
            Py_DECREF(answer.body);
            return NULL;
        }
    }
    return Py_BuildValue("(NnNn)", answer.body, answer.unknown, best, names.next);
}


/* ------------------------------------------------------------------ the request's fields */

/* Deeper than this, a Pod is left to the full parse: orjson refuses a document nested
   past its own limit (1024), and a Pod parsed apart sits one level less deep. */
#define MAX_POD_DEPTH 256

/* One past the object or array that starts at `at`, or NULL when the text ends first
   or nests past MAX_POD_DEPTH. It only finds the end, by brackets and strings: orjson
   then reads what lies between and refuses whatever is not JSON. */
static const char *
skip_nested(const char *at, const char *end)
{
    int depth = 0;
    while (at < end) {
        char c = *at++;
        if (c == '"') {
            for (;;) {
                const char *quote = memchr(at, '"', (size_t)(end - at));
                if (quote == NULL) {
                    return NULL;
                }
                /* The quote ends the string unless an odd number of backslashes precede it. */
                const char *before = quote;
                while (before > at && before[-1] == '\\') {
                    before--;
                }
                at = quote + 1;
                if ((quote - before) % 2 == 0) {
                    break;
                }
            }
        }
        else if (c == '{' || c == '[') {
            if (++depth > MAX_POD_DEPTH) {
                return NULL;
            }
        }
        else if (c == '}' || c == ']') {
            if (--depth == 0) {
                return at;
            }
        }
    }
    return NULL;
}

/* Whether the text at `at` starts with `literal`, then moves past it. */
static int
take(const char **at, const char *end, const char *literal, size_t length)
{
    if ((size_t)(end - *at) < length || memcmp(*at, literal, length) != 0) {
        return 0;
    }
    *at += length;
    return 1;
}

#define TAKE(at, end, literal) take(&(at), (end), (literal), sizeof(literal) - 1)

/* split_args(body) -> (pod_start, pod_end, names_start, names_end) or None.

   Where the Pod object and the NodeNames array lie in an ExtenderArgs body written as
   kube-scheduler writes it in node-cache mode: one object of the keys "Pod", "Nodes"
   (null) and "NodeNames", each at most once, NodeNames last, JSON whitespace between
   tokens. Anything else is None, and the caller parses the body whole. This reads only
   the object's frame: orjson parses the Pod, and filter_text or prioritize_text read
   the names, each refusing what is not in its form. */
static PyObject *
split_args(PyObject *Py_UNUSED(module), PyObject *body)
{
    if (!PyBytes_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "split_args(body: bytes)");
        return NULL;
    }
    const char *start = PyBytes_AS_STRING(body);
    const char *end = start + PyBytes_GET_SIZE(body);
    const char *at = skip_space(start, end), *pod_start = NULL, *pod_end = NULL;
    int seen_nodes = 0;
    if (!TAKE(at, end, "{")) {
        Py_RETURN_NONE;
    }
    for (;;) {
        at = skip_space(at, end);
        if (TAKE(at, end, "\"Pod\"")) {
            at = skip_space(at, end);
            if (pod_start != NULL || !TAKE(at, end, ":")) {
                Py_RETURN_NONE;
            }
            pod_start = skip_space(at, end);
            if (pod_start == end || *pod_start != '{' ||
                (pod_end = skip_nested(pod_start, end)) == NULL) {
                Py_RETURN_NONE;
            }
            at = pod_end;
        }
        else if (TAKE(at, end, "\"Nodes\"")) {
            at = skip_space(at, end);
            if (seen_nodes || !TAKE(at, end, ":")) {
                Py_RETURN_NONE;
            }
            at = skip_space(at, end);
            if (!TAKE(at, end, "null")) {
                Py_RETURN_NONE;
            }
            seen_nodes = 1;
        }
        else if (TAKE(at, end, "\"NodeNames\"")) {
            at = skip_space(at, end);
            if (pod_start == NULL || !TAKE(at, end, ":")) {
                Py_RETURN_NONE;
            }
            at = skip_space(at, end);
            /* The last key: its array runs to the last ']', before the closing brace. */
            const char *names_end = end;
            while (names_end > at && (names_end[-1] == ' ' || names_end[-1] == '\n' ||
                                      names_end[-1] == '\r' || names_end[-1] == '\t')) {
                names_end--;
            }
            if (names_end == at || *--names_end != '}') {
                Py_RETURN_NONE;
            }
            while (names_end > at && (names_end[-1] == ' ' || names_end[-1] == '\n' ||
                                      names_end[-1] == '\r' || names_end[-1] == '\t')) {
                names_end--;
            }
            if (names_end - at < 2 || *at != '[' || names_end[-1] != ']') {
                Py_RETURN_NONE;
            }
            return Py_BuildValue("(nnnn)", pod_start - start, pod_end - start, at - start,
                                 names_end - start);
        }
        else {
            Py_RETURN_NONE;
        }
        at = skip_space(at, end);
        if (!TAKE(at, end, ",")) {
            Py_RETURN_NONE;
        }
    }
}

/* ------------------------------------------------------------------ the Pod's fields */

/* What the filter reads of a request's Pod is three fields (app/load/model.py,
   is_exempt_from_filter): metadata.ownerReferences, spec.priority and
   spec.priorityClassName. Making Python objects of the whole Pod (about 1.4 KiB as
   kube-scheduler sends it) took half as long as the floor's parse of the whole body
   under load, so pod_fields reads the Pod's text, checks that it is JSON, and says
   where those three values lie: the caller parses only them.

   It is sure of a subset of JSON only, and answers None for anything outside it, so
   the caller then parses the Pod with orjson, which decides: strings of printable
   ASCII and the two-character escapes (no \u, no byte above 0x7f), numbers without an
   exponent and with at most 18 digits before and after the point, true, false, null,
   nesting to MAX_POD_DEPTH, and each field it reports written once in its object (a
   key written twice reads as its last in orjson). Everything it accepts orjson
   accepts, as the same values. */

typedef struct {
    const char *at;
    const char *end;
} Text;

/* A key whose value is wanted: its JSON text with the quotes, then where its value
   lies, and the keys wanted inside it when that value must be an object. */
typedef struct Wanted {
    const char *key;
    size_t key_length;
    struct Wanted *inside; /* NULL: any value; else it must be an object */
    int inside_count;
    const char *start; /* NULL until seen */
    const char *end;
} Wanted;

static int sure_value(Text *text, int depth);

/* A string at text->at (its opening quote), in the subset; moves past it. */
static int
sure_string(Text *text)
{
    const char *at = text->at + 1, *end = text->end;
    for (;;) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        while (end - at >= 8) {
            uint64_t flags = not_plain_bytes(load_word(at));
            if (flags != 0) {
                at += __builtin_ctzll(flags) / 8;
                break;
            }
            at += 8;
        }
#endif
        if (at >= end) {
            return 0;
        }
        unsigned char c = (unsigned char)*at;
        if (c == '"') {
            text->at = at + 1;
            return 1;
        }
        if (c == '\\') {
            char escaped = end - at >= 2 ? at[1] : 0;
            if (escaped == '"' || escaped == '\\' || escaped == '/' || escaped == 'b' ||
                escaped == 'f' || escaped == 'n' || escaped == 'r' || escaped == 't') {
                at += 2;
                continue;
            }
            return 0; /* \u (a surrogate may be lone), or not an escape */
        }
        if (c < 0x20 || c >= 0x80) {
            return 0;
        }
        at++;
    }
}

static int
sure_digits(const char **at, const char *end)
{
    const char *first = *at;
    while (*at < end && **at >= '0' && **at <= '9') {
        (*at)++;
    }
    return *at > first && *at - first <= 18;
}

/* A number without an exponent; moves past it. */
static int
sure_number(Text *text)
{
    const char *at = text->at, *end = text->end;
    if (at < end && *at == '-') {
        at++;
    }
    if (at < end && *at == '0') {
        at++; /* a leading zero stands alone: "01" fails at the next token */
    }
    else if (!sure_digits(&at, end)) {
        return 0;
    }
    if (at < end && *at == '.') {
        at++;
        if (!sure_digits(&at, end)) {
            return 0;
        }
    }
    if (at < end && (*at == 'e' || *at == 'E')) {
        return 0; /* 1e400 is infinity, which orjson refuses */
    }
    text->at = at;
    return 1;
}

/* The object at text->at, noting where the `count` wanted keys' values lie. */
static int
sure_object(Text *text, int depth, Wanted *wanted, int count)
{
    if (depth > MAX_POD_DEPTH) {
        return 0;
    }
    text->at = skip_space(text->at + 1, text->end);
    if (text->at < text->end && *text->at == '}') {
        text->at++;
        return 1;
    }
    for (;;) {
        text->at = skip_space(text->at, text->end);
        const char *key = text->at;
        if (key >= text->end || *key != '"' || !sure_string(text)) {
            return 0;
        }
        size_t key_length = (size_t)(text->at - key);
        text->at = skip_space(text->at, text->end);
        if (!TAKE(text->at, text->end, ":")) {
            return 0;
        }
        text->at = skip_space(text->at, text->end);
        Wanted *field = NULL;
        for (int i = 0; i < count; i++) {
            if (wanted[i].key_length == key_length && memcmp(wanted[i].key, key, key_length) == 0) {
                field = &wanted[i];
            }
        }
        if (field != NULL) {
            if (field->start != NULL) {
                return 0; /* written twice */
            }
            field->start = text->at;
            if (field->inside != NULL) {
                if (text->at >= text->end || *text->at != '{' ||
                    !sure_object(text, depth + 1, field->inside, field->inside_count)) {
                    return 0;
                }
            }
            else if (!sure_value(text, depth)) {
                return 0;
            }
            field->end = text->at;
        }
        else if (!sure_value(text, depth)) {
            return 0;
        }
        text->at = skip_space(text->at, text->end);
        if (text->at < text->end && *text->at == ',') {
            text->at++;
            continue;
        }
        if (text->at < text->end && *text->at == '}') {
            text->at++;
            return 1;
        }
        return 0;
    }
}

static int
sure_array(Text *text, int depth)
{
    if (depth > MAX_POD_DEPTH) {
        return 0;
    }
    text->at = skip_space(text->at + 1, text->end);
    if (text->at < text->end && *text->at == ']') {
        text->at++;
        return 1;
    }
    for (;;) {
        if (!sure_value(text, depth)) {
            return 0;
        }
        text->at = skip_space(text->at, text->end);
        if (text->at < text->end && *text->at == ',') {
            text->at++;
            continue;
        }
        if (text->at < text->end && *text->at == ']') {
            text->at++;
            return 1;
        }
        return 0;
    }
}

/* Any value at text->at (after JSON whitespace) in the subset; moves past it. `depth`:
   the nesting of the object or array holding it. */
static int
sure_value(Text *text, int depth)
{
    text->at = skip_space(text->at, text->end);
    if (text->at >= text->end) {
        return 0;
    }
    switch (*text->at) {
    case '"':
        return sure_string(text);
    case '{':
        return sure_object(text, depth + 1, NULL, 0);
    case '[':
        return sure_array(text, depth + 1);
    case 't':
        return TAKE(text->at, text->end, "true");
    case 'f':
        return TAKE(text->at, text->end, "false");
    case 'n':
        return TAKE(text->at, text->end, "null");
    default:
        return sure_number(text);
    }
}

#define WANTED(literal, inside, count) {(literal), sizeof(literal) - 1, (inside), (count), NULL, NULL}

/* pod_fields(body, start, end)
       -> (owners_start, owners_end, priority_start, priority_end, class_start, class_end)
          or None.
   Where metadata.ownerReferences, spec.priority and spec.priorityClassName lie in the
   Pod object that fills body[start:end] (-1, -1 for one not there), when the Pod's text
   is JSON of the subset above and metadata and spec, where present, are objects; None
   otherwise (the caller parses the Pod whole, with orjson). */
static PyObject *
pod_fields(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "pod_fields(body: bytes, start: int, end: int)");
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), stop = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0 || stop > size || stop - start < 2) {
        PyErr_SetString(PyExc_ValueError, "the offsets do not hold a JSON object in the body");
        return NULL;
    }
    const char *body = PyBytes_AS_STRING(args[0]);
    Wanted metadata[] = {WANTED("\"ownerReferences\"", NULL, 0)};
    Wanted spec[] = {WANTED("\"priority\"", NULL, 0), WANTED("\"priorityClassName\"", NULL, 0)};
    Wanted pod[] = {WANTED("\"metadata\"", metadata, 1), WANTED("\"spec\"", spec, 2)};
    Text text = {body + start, body + stop};
    /* The Pod sits inside the body's object: depth 1 is the body's, 2 the Pod's. */
    if (*text.at != '{' || !sure_object(&text, 2, pod, 2) || text.at != text.end) {
        Py_RETURN_NONE;
    }
    const Wanted *found[] = {&metadata[0], &spec[0], &spec[1]};
    Py_ssize_t spans[6];
    for (int i = 0; i < 3; i++) {
        spans[2 * i] = found[i]->start ? found[i]->start - body : -1;
        spans[2 * i + 1] = found[i]->start ? found[i]->end - body : -1;
    }
    return Py_BuildValue("(nnnnnn)", spans[0], spans[1], spans[2], spans[3], spans[4], spans[5]);
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
    PyMem_Free(self->entries_block);
    PyMem_Free(self->rooms);
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
    {"filter_text", (PyCFunction)(void (*)(void))VerdictIndex_filter_text, METH_FASTCALL,
     "filter_text(body, start, end, exempt) -> (body, {reason: nodes rejected}, name count), "
     "or None when the NodeNames text is not in the plain form."},
    {"prioritize_text", (PyCFunction)(void (*)(void))VerdictIndex_prioritize_text, METH_FASTCALL,
     "prioritize_text(body, start, end, cpu, memory) -> (body, unknown count, preferred name "
     "or None, name count), or None when the NodeNames text is not in the plain form."},
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

static PyMethodDef module_methods[] = {
    {"pod_fields", (PyCFunction)(void (*)(void))pod_fields, METH_FASTCALL,
     "pod_fields(body, start, end) -> the spans of metadata.ownerReferences, spec.priority "
     "and spec.priorityClassName in the Pod at body[start:end], or None when unsure."},
    {"split_args", (PyCFunction)split_args, METH_O,
     "split_args(body) -> (pod_start, pod_end, names_start, names_end), or None when the "
     "body is not in the form kube-scheduler writes in node-cache mode."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef verdict_index_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "app.extender._verdict_index",
    .m_doc = "The extender's native verdict index (see app/extender/index.py).",
    .m_size = -1,
    .m_methods = module_methods,
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
