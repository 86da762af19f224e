/* The incremental grammar state: pushdown stacks advanced by code points, the token mask
 * (a depth-first walk of the vocabulary trie together with the stacks) and its cache.
 *
 * While working, stacks are persistent linked lists (a node = an element position and the
 * node below it), so advancing a stack by one character allocates one or two nodes and
 * shares the rest; the nodes live in a scratch arena released as the trie walk returns.
 * Between calls a sample keeps its stacks as flat position arrays (grammar.h).
 *
 * UTF-8 follows llama.cpp's decoder where the text is valid UTF-8, so that masks are the
 * reference's there (tests/llm/test_grammar_oracle.py compares them): a stray continuation
 * byte rejects the token, a token may end inside a sequence and is kept when the code
 * points that sequence could still become can match. Unlike llama.cpp's decoder it is
 * strict: a byte sequence the detokenizer would turn into U+FFFD (leads C0, C1, F5..FF,
 * overlong forms, surrogates, beyond U+10FFFF) never passes the grammar, and the grammar
 * cannot end inside a sequence. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/grammar/grammar.h"

/* ---- nodes and sets --------------------------------------------------------------------- */

typedef struct gnode {
    const struct gnode *parent;
    uint64_t hash; /* of the whole stack from the bottom */
    uint32_t pos;
    uint32_t depth;
} gnode;

#define EMPTY_HASH 0x9E3779B97F4A7C15ull

static uint64_t stack_hash(const gnode *n) { return n ? n->hash : EMPTY_HASH; }

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    unsigned char data[];
} chunk;

typedef struct arena {
    chunk *head; /* current chunk (a chain of older ones behind) */
} arena;

typedef struct mark {
    chunk *c;
    size_t used;
} mark;

static void *arena_alloc(arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (!a->head || a->head->used + size > a->head->cap) {
        size_t min = a->head ? (1u << 18) : (1u << 14); /* small states stay small */
        size_t cap = size > min ? size : min;
        chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head, c->used = 0, c->cap = cap;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += size;
    return p;
}

static void arena_release(arena *a, mark m) {
    while (a->head != m.c) {
        chunk *c = a->head;
        a->head = c->next;
        free(c);
    }
    if (a->head) a->head->used = m.used;
}

static void arena_free(arena *a) { arena_release(a, (mark){NULL, 0}); }

/* A set of stacks (NULL = the empty stack), without duplicates by content. Past
 * SET_INDEXED stacks, `slots` indexes them by hash (open addressing over 2·cap slots
 * holding index + 1, 0 = free), so adding to a set of thousands of stacks (an ambiguous
 * grammar) is not a scan of all of them for every one of up to 2^18 expansions. */
typedef struct gset {
    const gnode **v;
    uint32_t n, cap;
    uint32_t *slots;
} gset;

#define SET_INDEXED 32

typedef struct ctx {
    const ak_llm_grammar *gr;
    const ak__gelem *elems;
    arena a;
    uint32_t expansions; /* expand() calls for the current character */
    ak_status st;        /* the first failure (limits, memory) */
} ctx;

static int same_stack(const gnode *x, const gnode *y) {
    while (x != y) {
        if (!x || !y || x->pos != y->pos || x->hash != y->hash) return 0;
        x = x->parent, y = y->parent;
    }
    return 1;
}

static uint32_t slot_of(uint64_t h, uint32_t mask) { return (uint32_t)(h ^ h >> 32) & mask; }

/* Records s->v[i] in the index. */
static void set_index(gset *s, uint32_t i) {
    uint32_t mask = 2 * s->cap - 1, k = slot_of(stack_hash(s->v[i]), mask);
    while (s->slots[k]) k = (k + 1) & mask;
    s->slots[k] = i + 1;
}

static int set_has(const gset *s, const gnode *n, uint64_t h) {
    if (!s->slots) {
        for (uint32_t i = 0; i < s->n; ++i)
            if (stack_hash(s->v[i]) == h && same_stack(s->v[i], n)) return 1;
        return 0;
    }
    uint32_t mask = 2 * s->cap - 1;
    for (uint32_t k = slot_of(h, mask); s->slots[k]; k = (k + 1) & mask) {
        const gnode *o = s->v[s->slots[k] - 1];
        if (stack_hash(o) == h && same_stack(o, n)) return 1;
    }
    return 0;
}

static void set_add(ctx *c, gset *s, const gnode *n) {
    uint64_t h = stack_hash(n);
    if (set_has(s, n, h)) return;
    if (s->n == s->cap) {
        if (s->cap >= AK__GRAMMAR_MAX_STACKS) {
            if (c->st == AK_OK)
                c->st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: more than %d stacks alive (the grammar is "
                                "too ambiguous)", AK__GRAMMAR_MAX_STACKS);
            return;
        }
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        const gnode **v = arena_alloc(&c->a, cap * sizeof *v);
        if (!v) {
            if (c->st == AK_OK) c->st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
            return;
        }
        if (s->n) memcpy(v, s->v, s->n * sizeof *v);
        s->v = v, s->cap = cap, s->slots = NULL;
        if (cap >= SET_INDEXED) {
            s->slots = arena_alloc(&c->a, 2 * (size_t)cap * sizeof *s->slots);
            if (!s->slots) {
                if (c->st == AK_OK) c->st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
                return;
            }
            memset(s->slots, 0, 2 * (size_t)cap * sizeof *s->slots);
            for (uint32_t i = 0; i < s->n; ++i) set_index(s, i);
        }
    }
    s->v[s->n++] = n;
    if (s->slots) set_index(s, s->n - 1);
}

static const gnode *new_node(ctx *c, const gnode *parent, uint32_t pos) {
    uint32_t depth = parent ? parent->depth + 1 : 1;
    if (depth > AK__GRAMMAR_MAX_DEPTH) {
        if (c->st == AK_OK)
            c->st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: stack deeper than %d (nesting too deep)",
                            AK__GRAMMAR_MAX_DEPTH);
        return NULL;
    }
    gnode *n = arena_alloc(&c->a, sizeof *n);
    if (!n) {
        if (c->st == AK_OK) c->st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        return NULL;
    }
    n->parent = parent, n->pos = pos, n->depth = depth;
    n->hash = (stack_hash(parent) ^ (pos + 0x632BE59BD9B4E019ull)) * 0xFF51AFD7ED558CCDull;
    n->hash ^= n->hash >> 29;
    return n;
}

static int is_end(const ak__gelem *e) { return e->type == AK__GE_END || e->type == AK__GE_ALT; }

/* Adds to `out` every stack `n` expands to with a character class on top (rule references
 * replaced by each of their alternatives). n = NULL: the empty stack. Terminates because
 * the parser refuses left recursion. */
static void expand(ctx *c, const gnode *n, gset *out) {
    if (c->st != AK_OK) return;
    if (++c->expansions > AK__GRAMMAR_MAX_EXPANSIONS) {
        c->st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: more than %u rule expansions for one "
                        "character (the grammar is too ambiguous)", AK__GRAMMAR_MAX_EXPANSIONS);
        return;
    }
    if (!n) {
        set_add(c, out, NULL);
        return;
    }
    const ak__gelem *e = c->elems + n->pos;
    if (e->type != AK__GE_REF) {
        set_add(c, out, n);
        return;
    }
    /* the continuation after the reference; none when the reference ends its alternative */
    const gnode *cont = is_end(e + 1) ? n->parent : new_node(c, n->parent, n->pos + 1);
    if (c->st != AK_OK) return;
    uint32_t p = c->gr->g.rule_start[e->value];
    for (;;) {
        if (is_end(c->elems + p)) expand(c, cont, out); /* an empty alternative */
        else expand(c, new_node(c, cont, p), out);
        if (c->st != AK_OK) return;
        while (!is_end(c->elems + p)) ++p;
        if (c->elems[p].type == AK__GE_END) break;
        ++p;
    }
}

/* Does the class at `e` match code point cp? */
static int match_char(const ak__gelem *e, uint32_t cp) {
    if (e->type == AK__GE_ANY) return 1;
    int positive = e->type == AK__GE_CHAR, found = 0;
    do {
        if (e[1].type == AK__GE_RNG_UPPER) {
            found |= e->value <= cp && cp <= e[1].value;
            e += 2;
        } else {
            found |= e->value == cp;
            e += 1;
        }
    } while (e->type == AK__GE_CHAR_ALT);
    return found == positive;
}

/* The element after the class at `pos`. */
static uint32_t after_class(const ak__gelem *elems, uint32_t pos) {
    const ak__gelem *e = elems + pos;
    if (e->type == AK__GE_ANY) return pos + 1;
    do e += e[1].type == AK__GE_RNG_UPPER ? 2 : 1;
    while (e->type == AK__GE_CHAR_ALT);
    return (uint32_t)(e - elems);
}

/* The code points a partial sequence can still become: [low, high]; 0 when it is invalid. */
static int partial_range(uint32_t value, int32_t remain, uint32_t *low, uint32_t *high) {
    if (remain < 0 || (remain == 1 && value < 2)) return 0; /* 7-bit char split in 2 bytes */
    *low = value << (remain * 6);
    *high = *low | ((1u << (remain * 6)) - 1);
    if (*low == 0) *low = remain == 2 ? 1u << 11 : remain == 3 ? 1u << 16 : *low;
    if (*low > 0x10FFFF) return 0; /* F4 90.. : beyond Unicode */
    if (*high > 0x10FFFF) *high = 0x10FFFF;
    return 1;
}

/* llama.cpp's test for a token ending inside a sequence: a positive class must intersect
 * the range; a negated class must not (it is not asked whether the range lies inside). */
static int match_partial(const ak__gelem *e, uint32_t value, int32_t remain) {
    uint32_t low, high;
    if (!partial_range(value, remain, &low, &high)) return 0;
    if (e->type == AK__GE_ANY) return 1;
    int positive = e->type == AK__GE_CHAR;
    do {
        if (e[1].type == AK__GE_RNG_UPPER) {
            if (e->value <= high && low <= e[1].value) return positive;
            e += 2;
        } else {
            if (low <= e->value && e->value <= high) return positive;
            e += 1;
        }
    } while (e->type == AK__GE_CHAR_ALT);
    return !positive;
}

/* Could some code point of [low, high] match the class? (exact for positive classes, a
 * superset for negated ones: used only to prune the trie walk) */
static int may_match_range(const ak__gelem *e, uint32_t low, uint32_t high) {
    if (e->type == AK__GE_ANY) return 1;
    int positive = e->type == AK__GE_CHAR;
    do {
        uint32_t lo = e->value, hi = e[1].type == AK__GE_RNG_UPPER ? e[1].value : e->value;
        if (positive && lo <= high && low <= hi) return 1;
        if (!positive && lo <= low && high <= hi) return 0; /* all excluded */
        e += e[1].type == AK__GE_RNG_UPPER ? 2 : 1;
    } while (e->type == AK__GE_CHAR_ALT);
    return !positive;
}

/* The stacks after code point cp; `out` starts empty. */
static void advance(ctx *c, const gset *in, uint32_t cp, gset *out) {
    c->expansions = 0;
    for (uint32_t i = 0; i < in->n && c->st == AK_OK; ++i) {
        const gnode *n = in->v[i];
        if (!n || !match_char(c->elems + n->pos, cp)) continue;
        uint32_t next = after_class(c->elems, n->pos);
        const gnode *rest = is_end(c->elems + next) ? n->parent : new_node(c, n->parent, next);
        if (c->st == AK_OK) expand(c, rest, out);
    }
}

/* ---- the flat form kept between calls ---------------------------------------------------- */

static void load_stacks(ctx *c, const ak__grammar_state *s, gset *out) {
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_stacks && c->st == AK_OK; ++i) {
        const gnode *n = NULL;
        for (uint32_t k = 0; k < s->stack_len[i] && c->st == AK_OK; ++k)
            n = new_node(c, n, s->stacks[off + k]);
        off += s->stack_len[i];
        set_add(c, out, n);
    }
}

static ak_status store_stacks(ak__grammar_state *s, const gset *set) {
    uint32_t total = 0;
    for (uint32_t i = 0; i < set->n; ++i) total += set->v[i] ? set->v[i]->depth : 0;
    if (total > s->stacks_cap) {
        uint32_t *v = realloc(s->stacks, (total + 64) * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        s->stacks = v, s->stacks_cap = total + 64;
    }
    if (set->n > s->lens_cap) {
        uint32_t *v = realloc(s->stack_len, (set->n + 8) * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        s->stack_len = v, s->lens_cap = set->n + 8;
    }
    uint32_t off = 0;
    for (uint32_t i = 0; i < set->n; ++i) {
        uint32_t d = set->v[i] ? set->v[i]->depth : 0;
        const gnode *n = set->v[i];
        for (uint32_t k = d; k-- > 0; n = n->parent) s->stacks[off + k] = n->pos;
        s->stack_len[i] = d;
        off += d;
    }
    s->n_stacks = set->n;
    s->total = off;
    return AK_OK;
}

ak_status ak__grammar_state_init(ak__grammar_state *s, const ak_llm_grammar *gr) {
    AK_ARG_CHECK(s != NULL && gr != NULL, "grammar state: NULL argument");
    memset(s, 0, sizeof *s);
    s->gr = gr;
    ctx c = {.gr = gr, .elems = gr->g.elems};
    gset set = {0};
    /* a stack whose top is a reference to root, expanded */
    uint32_t p = gr->g.rule_start[gr->g.root];
    for (;;) {
        if (is_end(c.elems + p)) expand(&c, NULL, &set);
        else expand(&c, new_node(&c, NULL, p), &set);
        while (!is_end(c.elems + p)) ++p;
        if (c.elems[p].type == AK__GE_END) break;
        ++p;
    }
    ak_status st = c.st == AK_OK ? store_stacks(s, &set) : c.st;
    arena_free(&c.a);
    if (st != AK_OK) ak__grammar_state_free(s);
    return st;
}

void ak__grammar_state_free(ak__grammar_state *s) {
    if (!s) return;
    free(s->stacks), free(s->stack_len);
    memset(s, 0, sizeof *s);
}

ak_status ak__grammar_state_copy(ak__grammar_state *dst, const ak__grammar_state *src) {
    memset(dst, 0, sizeof *dst);
    dst->gr = src->gr;
    dst->stacks = malloc((src->total + 1) * sizeof *dst->stacks);
    dst->stack_len = malloc((src->n_stacks + 1) * sizeof *dst->stack_len);
    if (!dst->stacks || !dst->stack_len) {
        ak__grammar_state_free(dst);
        return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    }
    memcpy(dst->stacks, src->stacks, src->total * sizeof *dst->stacks);
    memcpy(dst->stack_len, src->stack_len, src->n_stacks * sizeof *dst->stack_len);
    dst->n_stacks = src->n_stacks, dst->total = src->total;
    dst->stacks_cap = src->total + 1, dst->lens_cap = src->n_stacks + 1;
    dst->partial_value = src->partial_value, dst->partial_remain = src->partial_remain;
    return AK_OK;
}

int ak__grammar_state_can_end(const ak__grammar_state *s) {
    if (s->partial_remain > 0) return 0; /* ending here would leave a broken character */
    for (uint32_t i = 0; i < s->n_stacks; ++i)
        if (s->stack_len[i] == 0) return 1;
    return 0;
}

int ak__grammar_state_must_end(const ak__grammar_state *s) {
    return s->n_stacks == 1 && s->stack_len[0] == 0 && s->partial_remain == 0;
}

/* ---- accepting bytes -------------------------------------------------------------------- */

static const int utf8_len_of_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};

/* Strict UTF-8, as the detokenizer decodes it: a byte it would turn into U+FFFD must not
 * pass the grammar as a character. Leads C0/C1 (overlong) and F5..FF (beyond U+10FFFF or
 * no UTF-8 at all) are invalid; a completed value must be a scalar value. */
static int utf8_lead_ok(uint8_t b) { return b < 0x80 || (b >= 0xC2 && b <= 0xF4); }
static int utf8_scalar_ok(uint32_t v) { return v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF); }

/* Adds byte b to the code point being decoded (*value, with *remain bytes to come);
 * 0 when b makes the sequence invalid. The first continuation byte after E0, ED, F0 and
 * F4 is range-checked, which rules out overlong forms, surrogates and code points beyond
 * U+10FFFF before they complete (so no partial token can lead only to them). */
static int utf8_add_byte(uint8_t b, uint32_t *value, int32_t *remain) {
    if (*remain == 0) {
        int n = utf8_lead_ok(b) ? utf8_len_of_nibble[b >> 4] : 0;
        if (n == 0) return 0;
        *remain = n - 1;
        *value = b & ((1u << (7 - *remain)) - 1);
        return 1;
    }
    if ((b >> 6) != 2) return 0;
    if (*remain == 2 && *value < 16) { /* first continuation of a 3-byte sequence */
        if ((*value == 0 && b < 0xA0) || (*value == 0xD && b >= 0xA0)) return 0;
    } else if (*remain == 3) { /* first continuation of a 4-byte sequence */
        if ((*value == 0 && b < 0x90) || (*value == 4 && b >= 0x90)) return 0;
    }
    *value = (*value << 6) | (b & 0x3Fu);
    (*remain)--;
    return 1;
}

ak_status ak__grammar_state_accept_bytes(ak__grammar_state *s, const char *bytes, size_t len) {
    ctx c = {.gr = s->gr, .elems = s->gr->g.elems};
    gset cur = {0};
    load_stacks(&c, s, &cur);
    uint32_t value = s->partial_value;
    int32_t remain = s->partial_remain;
    ak_status st = AK_OK;
    for (size_t i = 0; i < len && st == AK_OK && c.st == AK_OK; ++i) {
        uint8_t b = (uint8_t)bytes[i];
        if (b == 0) {
            st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: a NUL byte is never accepted");
            break;
        }
        if (!utf8_add_byte(b, &value, &remain)) {
            st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: invalid UTF-8 (byte 0x%02x)", b);
            break;
        }
        if (remain > 0) continue;
        if (!utf8_scalar_ok(value)) {
            st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: invalid UTF-8 (U+%04X is no scalar value)", value);
            break;
        }
        gset next = {0};
        advance(&c, &cur, value, &next);
        if (c.st == AK_OK && next.n == 0)
            st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: the text does not match the grammar at U+%04X",
                         value);
        cur = next;
    }
    if (st == AK_OK && c.st != AK_OK) st = c.st;
    if (st == AK_OK && remain > 0) {
        int ok = 0;
        for (uint32_t i = 0; i < cur.n && !ok; ++i)
            ok = cur.v[i] && match_partial(c.elems + cur.v[i]->pos, value, remain);
        if (!ok) st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: partial UTF-8 sequence cannot match");
    }
    if (st == AK_OK) {
        st = store_stacks(s, &cur);
        s->partial_value = remain > 0 ? value : 0;
        s->partial_remain = remain > 0 ? remain : 0;
    }
    arena_free(&c.a);
    return st;
}

ak_status ak__grammar_state_accept_token(ak__grammar_state *s, int32_t token) {
    const ak_llm_grammar *gr = s->gr;
    AK_ARG_CHECK(token >= 0 && token < gr->n_vocab, "grammar: token %d out of the vocabulary", token);
    if (gr->is_eog[token]) {
        AK_ARG_CHECK(ak__grammar_state_can_end(s), "grammar: end of generation before the grammar "
                     "is complete");
        return AK_OK;
    }
    AK_ARG_CHECK(gr->pieces[token] != NULL, "grammar: token %d has no text", token);
    return ak__grammar_state_accept_bytes(s, gr->pieces[token], gr->piece_len[token]);
}

/* ---- the mask ---------------------------------------------------------------------------- */

/* During one mask walk, stack sets are interned (one object per distinct content) and
 * the transition (set, code point) → set is memoized: most trie nodes then cost one table
 * look-up, since generation keeps returning to the same few sets (inside a string, every
 * ordinary character leads back to the set it came from). */
typedef struct iset {
    const gnode **v;
    uint32_t n;
    uint64_t hash;
    struct iset *next_same_hash;
} iset;

typedef struct memo_slot {
    const iset *from;
    uint32_t cp;
    const iset *to; /* NULL: no stack survives */
} memo_slot;

typedef struct walk {
    ctx c;
    const ak__trie *t;
    uint32_t *allowed;
    iset **interned; /* hash table of sets, chained */
    uint32_t interned_mask;
    memo_slot *memo;
    uint32_t memo_mask, memo_used;
} walk;

static void allow_tokens(walk *w, uint32_t node) {
    for (int32_t t = w->t->first_tok[node]; t >= 0; t = w->t->next_tok[t])
        w->allowed[t >> 5] |= 1u << (t & 31);
}

/* The interned copy of `s` (its stacks sorted by hash: the content decides). */
static const iset *intern(walk *w, gset *s) {
    for (uint32_t i = 1; i < s->n; ++i) { /* insertion sort: sets are small */
        const gnode *x = s->v[i];
        uint32_t k = i;
        for (; k > 0 && stack_hash(s->v[k - 1]) > stack_hash(x); --k) s->v[k] = s->v[k - 1];
        s->v[k] = x;
    }
    uint64_t h = 0x51ED27ull + s->n;
    for (uint32_t i = 0; i < s->n; ++i) h = (h ^ stack_hash(s->v[i])) * 0x9E3779B97F4A7C15ull;
    for (iset *e = w->interned[h & w->interned_mask]; e; e = e->next_same_hash) {
        if (e->hash != h || e->n != s->n) continue;
        uint32_t i = 0;
        while (i < s->n && same_stack(e->v[i], s->v[i])) ++i;
        if (i == s->n) return e;
    }
    iset *e = arena_alloc(&w->c.a, sizeof *e);
    if (!e) {
        if (w->c.st == AK_OK) w->c.st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        return NULL;
    }
    e->v = s->v, e->n = s->n, e->hash = h;
    e->next_same_hash = w->interned[h & w->interned_mask];
    w->interned[h & w->interned_mask] = e;
    return e;
}

static int memo_grow(walk *w) {
    uint32_t cap = (w->memo_mask + 1) * 2;
    memo_slot *m = calloc(cap, sizeof *m);
    if (!m) return 0;
    for (uint32_t i = 0; i <= w->memo_mask; ++i) {
        memo_slot *o = &w->memo[i];
        if (!o->from) continue;
        uint32_t k = (uint32_t)(((uintptr_t)o->from >> 4) * 31 + o->cp * 0x9E3779B1u) & (cap - 1);
        while (m[k].from) k = (k + 1) & (cap - 1);
        m[k] = *o;
    }
    free(w->memo);
    w->memo = m, w->memo_mask = cap - 1;
    return 1;
}

/* advance, memoized on interned sets */
static const iset *step(walk *w, const iset *from, uint32_t cp) {
    uint32_t k = (uint32_t)(((uintptr_t)from >> 4) * 31 + cp * 0x9E3779B1u) & w->memo_mask;
    while (w->memo[k].from) {
        if (w->memo[k].from == from && w->memo[k].cp == cp) return w->memo[k].to;
        k = (k + 1) & w->memo_mask;
    }
    gset in = {(const gnode **)from->v, from->n, from->n, NULL}, out = {0};
    advance(&w->c, &in, cp, &out);
    const iset *to = out.n && w->c.st == AK_OK ? intern(w, &out) : NULL;
    w->memo[k] = (memo_slot){from, cp, to};
    if (++w->memo_used * 2 > w->memo_mask && !memo_grow(w) && w->c.st == AK_OK)
        w->c.st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    return to;
}

static void walk_node(walk *w, uint32_t node, const iset *set, uint32_t value, int32_t remain);

static void walk_child(walk *w, uint32_t child, const iset *set, uint32_t value, int32_t remain) {
    uint8_t b = w->t->byte[child];
    if (b == 0 || !utf8_add_byte(b, &value, &remain)) return;
    if (remain == 0) {
        if (!utf8_scalar_ok(value)) return;
        const iset *next = step(w, set, value);
        if (next && w->c.st == AK_OK) {
            allow_tokens(w, child);
            walk_node(w, child, next, 0, 0);
        }
        return;
    }
    uint32_t low, high;
    int keep = 0, end_ok = 0;
    if (partial_range(value, remain, &low, &high))
        for (uint32_t i = 0; i < set->n; ++i) {
            if (!set->v[i]) continue;
            const ak__gelem *e = w->c.elems + set->v[i]->pos;
            keep |= may_match_range(e, low, high);
            end_ok |= match_partial(e, value, remain);
        }
    if (end_ok) allow_tokens(w, child);
    if (keep) walk_node(w, child, set, value, remain);
}

static void walk_node(walk *w, uint32_t node, const iset *set, uint32_t value, int32_t remain) {
    for (uint32_t ch = w->t->child[node]; ch != 0 && w->c.st == AK_OK; ch = w->t->sibling[ch])
        walk_child(w, ch, set, value, remain);
}

/* The cache key of a state: partial code point and the stacks, flat. */
static size_t state_key(const ak__grammar_state *s, uint32_t *key) {
    size_t n = 0;
    if (key) key[0] = s->partial_value, key[1] = (uint32_t)s->partial_remain, key[2] = s->n_stacks;
    n = 3;
    uint32_t off = 0;
    for (uint32_t i = 0; i < s->n_stacks; ++i) {
        if (key) key[n] = s->stack_len[i];
        n++;
        if (key) memcpy(key + n, s->stacks + off, s->stack_len[i] * sizeof *key);
        n += s->stack_len[i];
        off += s->stack_len[i];
    }
    return n;
}

/* ---- mask cache (per grammar, shared by its samples) ------------------------------------- */

typedef struct cache_entry {
    uint64_t hash;
    uint32_t *key;
    size_t key_len;
    uint32_t *mask;
} cache_entry;

struct ak__mask_cache {
    cache_entry *slots;
    uint32_t n_slots; /* power of two */
    size_t mask_words;
};

static uint64_t hash_words(const uint32_t *k, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ k[i]) * 0x100000001B3ull;
    return h ^ (h >> 31);
}

static ak__mask_cache *cache_get(ak_llm_grammar *gr) {
    if (gr->cache) return gr->cache;
    size_t words = ((size_t)gr->n_vocab + 31) / 32;
    uint32_t slots = 1024;
    while (slots > 64 && (size_t)slots * words * 4 > (32u << 20)) slots /= 2;
    ak__mask_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slots = calloc(slots, sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    c->n_slots = slots, c->mask_words = words;
    gr->cache = c;
    return c;
}

void ak__mask_cache_free(ak__mask_cache *c);
void ak__mask_cache_free(ak__mask_cache *c) {
    if (!c) return;
    for (uint32_t i = 0; i < c->n_slots; ++i) free(c->slots[i].key), free(c->slots[i].mask);
    free(c->slots), free(c);
}

static int cache_lookup(ak_llm_grammar *gr, uint64_t h, const uint32_t *key, size_t n, uint32_t *out) {
    int hit = 0;
    pthread_mutex_lock(&gr->cache_lock);
    ak__mask_cache *c = cache_get(gr);
    if (c) {
        cache_entry *e = &c->slots[h & (c->n_slots - 1)];
        if (e->key && e->hash == h && e->key_len == n && memcmp(e->key, key, n * sizeof *key) == 0) {
            memcpy(out, e->mask, c->mask_words * sizeof *out);
            hit = 1;
        }
    }
    pthread_mutex_unlock(&gr->cache_lock);
    return hit;
}

static void cache_store(ak_llm_grammar *gr, uint64_t h, const uint32_t *key, size_t n,
                        const uint32_t *mask) {
    pthread_mutex_lock(&gr->cache_lock);
    ak__mask_cache *c = cache_get(gr);
    if (c) {
        cache_entry *e = &c->slots[h & (c->n_slots - 1)];
        uint32_t *k = malloc(n * sizeof *k);
        uint32_t *m = e->mask ? e->mask : malloc(c->mask_words * sizeof *m);
        if (k && m) {
            free(e->key);
            memcpy(k, key, n * sizeof *k);
            memcpy(m, mask, c->mask_words * sizeof *m);
            *e = (cache_entry){h, k, n, m};
        } else {
            free(k);
            if (m != e->mask) free(m);
        }
    }
    pthread_mutex_unlock(&gr->cache_lock);
}

static ak_status compute_mask(const ak__grammar_state *s, uint32_t *allowed) {
    const ak_llm_grammar *gr = s->gr;
    size_t words = ((size_t)gr->n_vocab + 31) / 32;
    memset(allowed, 0, words * sizeof *allowed);
    walk w = {.c = {.gr = gr, .elems = gr->g.elems}, .t = &gr->trie, .allowed = allowed};
    w.interned_mask = 4095;
    w.memo_mask = 4095;
    w.interned = calloc(w.interned_mask + 1, sizeof *w.interned);
    w.memo = calloc(w.memo_mask + 1, sizeof *w.memo);
    if (!w.interned || !w.memo) w.c.st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    gset set = {0};
    if (w.c.st == AK_OK) load_stacks(&w.c, s, &set);
    const iset *start = w.c.st == AK_OK ? intern(&w, &set) : NULL;
    if (start) walk_node(&w, 0, start, s->partial_value, s->partial_remain);
    arena_free(&w.c.a);
    free(w.interned), free(w.memo);
    if (w.c.st != AK_OK) return w.c.st;
    if (ak__grammar_state_can_end(s))
        for (int32_t t = 0; t < gr->n_vocab; ++t)
            if (gr->is_eog[t]) allowed[t >> 5] |= 1u << (t & 31);
    return AK_OK;
}

ak_status ak__grammar_state_mask(const ak__grammar_state *s, uint32_t *allowed) {
    ak_llm_grammar *gr = (ak_llm_grammar *)s->gr; /* only the cache (under its lock) changes */
    size_t n = state_key(s, NULL);
    uint32_t small[256];
    uint32_t *key = n <= 256 ? small : malloc(n * sizeof *key);
    if (!key) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    state_key(s, key);
    uint64_t h = hash_words(key, n);
    ak_status st = AK_OK;
    if (!cache_lookup(gr, h, key, n, allowed)) {
        st = compute_mask(s, allowed);
        if (st == AK_OK) cache_store(gr, h, key, n, allowed);
    }
    if (key != small) free(key);
    return st;
}

ak_status ak__grammar_state_apply(const ak__grammar_state *s, float *logits) {
    size_t words = ((size_t)s->gr->n_vocab + 31) / 32;
    uint32_t *allowed = malloc(words * sizeof *allowed);
    if (!allowed) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    ak_status st = ak__grammar_state_mask(s, allowed);
    int any = 0;
    if (st == AK_OK) {
        for (int32_t t = 0; t < s->gr->n_vocab; ++t)
            if (!(allowed[t >> 5] >> (t & 31) & 1)) logits[t] = -INFINITY;
            else any = 1;
        if (!any) st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: no token of the vocabulary can continue");
    }
    free(allowed);
    return st;
}
