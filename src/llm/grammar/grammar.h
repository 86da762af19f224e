/* GBNF grammars (internal): the compiled form, the incremental per-sample state and the
 * token mask.
 *
 * Compiled form. Rules are stored one after the other in one element array, as llama.cpp
 * does: a rule is its alternatives separated by AK__GE_ALT and closed by AK__GE_END; an
 * alternative is a sequence of AK__GE_REF (another rule) and character classes. A class
 * is AK__GE_CHAR / AK__GE_CHAR_NOT with its first code point, optionally followed by
 * AK__GE_RNG_UPPER (that code point is the start of a range ending here) and more
 * AK__GE_CHAR_ALT / AK__GE_RNG_UPPER elements. Groups and repetitions are rewritten into
 * generated rules by the parser, so the state machine only sees these elements.
 *
 * State. The set of positions the grammar may be in is a set of pushdown stacks; a stack is
 * a list of element positions (the top is a character class to match next, the others are
 * the positions after the rule references that led there). An empty stack means the
 * grammar is complete. A code point advances every stack whose top matches it. Code points
 * arrive as bytes; a token may end inside a UTF-8 sequence, which the state remembers.
 *
 * Mask. The vocabulary's pieces (the bytes each token decodes to) are put in a byte trie
 * once per grammar; the mask walks that trie depth-first together with the stacks, so a
 * prefix shared by many tokens is matched once and a subtree no stack accepts is skipped.
 * Masks are cached per distinct state (stacks + partial code point): JSON generation goes
 * through the same states again and again. */
#ifndef AK_LLM_GRAMMAR_H
#define AK_LLM_GRAMMAR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

enum {
    AK__GE_END = 0,       /* end of a rule */
    AK__GE_ALT = 1,       /* start of another alternative */
    AK__GE_REF = 2,       /* value: rule index */
    AK__GE_CHAR = 3,      /* value: code point (start of a class) */
    AK__GE_CHAR_NOT = 4,  /* value: code point (start of a negated class) */
    AK__GE_RNG_UPPER = 5, /* value: upper end of the range started by the previous element */
    AK__GE_CHAR_ALT = 6,  /* value: another code point of the class */
    AK__GE_ANY = 7        /* any code point (`.`) */
};

typedef struct ak__gelem {
    uint32_t type, value;
} ak__gelem;

/* Limits that keep pathological grammars bounded (an error, never a hang). */
#define AK__GRAMMAR_MAX_STACKS 4096   /* stacks alive in one state */
#define AK__GRAMMAR_MAX_DEPTH 2048    /* nesting of one stack */
/* rule references expanded for one character: chains of empty alternatives (""{0,N}) have
 * exponentially many paths to the same few stacks */
#define AK__GRAMMAR_MAX_EXPANSIONS (1u << 18)
#define AK__GRAMMAR_MAX_RULES 65536
#define AK__GRAMMAR_MAX_ELEMS (1u << 22)
#define AK__GRAMMAR_MAX_TEXT (1u << 24) /* bytes of GBNF */

/* A parsed grammar without a vocabulary. */
typedef struct ak__gbnf {
    ak__gelem *elems;
    uint32_t n_elems;
    uint32_t *rule_start; /* element index of each rule's first alternative */
    char **rule_names;    /* generated rules are named after their parent, e.g. root_3 */
    uint32_t n_rules;
    uint32_t root;
} ak__gbnf;

/* Parses GBNF text; AK_ERR_INVALID_ARG naming the line or rule on error. */
ak_status ak__gbnf_parse(const char *text, size_t len, ak__gbnf *out);
void ak__gbnf_free(ak__gbnf *g);

/* The byte trie of a vocabulary's pieces. */
typedef struct ak__trie {
    uint32_t *child;     /* first child node (0 = none; node 0 is the root) */
    uint32_t *sibling;   /* next sibling (0 = none), siblings sorted by byte */
    uint8_t *byte;       /* byte on the edge into the node */
    int32_t *first_tok;  /* first token ending here (-1 = none) */
    uint32_t n_nodes;
    int32_t *next_tok;   /* per token: next token with the same piece (-1 = none) */
    int32_t n_vocab;
} ak__trie;

typedef struct ak__mask_cache ak__mask_cache;

struct ak_llm_grammar {
    ak__gbnf g;
    ak__trie trie;
    int32_t n_vocab;
    int32_t eos;          /* the tokenizer's EOS (-1 = none) */
    uint8_t *is_eog;      /* per token: ends generation (EOS and EOT-like control ids) */
    char **pieces;        /* per token: decoded bytes (NUL-terminated), NULL when empty */
    uint32_t *piece_len;
    pthread_mutex_t cache_lock; /* the mask cache is shared by every sample using the grammar */
    ak__mask_cache *cache;
};

/* One sample's position in the grammar. */
typedef struct ak__grammar_state {
    const ak_llm_grammar *gr;
    uint32_t *stacks;      /* the stacks one after the other, each bottom → top */
    uint32_t *stack_len;   /* element count of each */
    uint32_t n_stacks, stacks_cap, lens_cap;
    uint32_t total;        /* used entries of stacks */
    uint32_t partial_value; /* a code point begun by the last token */
    int32_t partial_remain; /* its missing continuation bytes (0 = none) */
} ak__grammar_state;

/* The start state (the root rule expanded). */
ak_status ak__grammar_state_init(ak__grammar_state *s, const ak_llm_grammar *gr);
void ak__grammar_state_free(ak__grammar_state *s);
ak_status ak__grammar_state_copy(ak__grammar_state *dst, const ak__grammar_state *src);
/* 1 when the grammar may end here (some stack is empty, no code point pending). */
int ak__grammar_state_can_end(const ak__grammar_state *s);
/* 1 when the grammar can accept nothing but its end. */
int ak__grammar_state_must_end(const ak__grammar_state *s);
/* Advances by the bytes of one piece; AK_ERR_INVALID_ARG when the grammar rejects them
 * (the state is unchanged then). */
ak_status ak__grammar_state_accept_bytes(ak__grammar_state *s, const char *bytes, size_t len);
/* Advances by a token (EOG tokens are accepted only when the grammar can end). */
ak_status ak__grammar_state_accept_token(ak__grammar_state *s, int32_t token);
/* allowed: (n_vocab + 31) / 32 words, bit t set when token t may come next. */
ak_status ak__grammar_state_mask(const ak__grammar_state *s, uint32_t *allowed);
/* Sets the logits of disallowed tokens to -inf. */
ak_status ak__grammar_state_apply(const ak__grammar_state *s, float *logits);

/* Whole-string matcher by plain backtracking over the rules (the scalar reference of the
 * tests): 1 when the grammar derives exactly `text`, 0 when not, -1 when it gave up
 * (budget exhausted). */
int ak__gbnf_match_reference(const ak__gbnf *g, const char *text, size_t len);

#endif /* AK_LLM_GRAMMAR_H */
