/* Internal state of the LLM engine: requests, their sequences (one per sample), the
 * scheduler's queues and the per-step buffers. Everything a step needs is allocated at
 * engine creation or at submission, so the step loop itself allocates nothing.
 *
 * A sequence's tokens are prompt + generated; tokens[0, n_cached) have K/V in the cache
 * and tokens[n_cached, n_tokens) are pending. A step computes a chunk of the pending
 * tokens of each scheduled sequence; when the chunk reaches the end, its last row gives
 * the logits of the next token. Prefill, chunked prefill, decode and recompute after
 * preemption are all this one case. */
#ifndef AK_LLM_ENGINE_INTERNAL_H
#define AK_LLM_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/base/kv_cache.h"
#include "llm/engine/sampler.h"
#include "llm/engine/stop.h"
#include "llm/model/model.h"

typedef struct ak__req ak__req;

typedef struct ak__seq {
    ak__req *req;
    int32_t sample;
    int32_t *tokens;              /* capacity: prompt + max_tokens + spec slack */
    int32_t n_tokens, n_prompt, cap;
    int32_t n_cached;             /* tokens with K/V in the target cache */
    int32_t draft_cached;         /* tokens with K/V in the draft cache */
    int32_t *blocks;              /* block table */
    int32_t n_blocks, blocks_cap;
    int32_t n_published;          /* leading full blocks published for prefix caching */
    uint64_t last_hash;           /* chain hash of block n_published - 1 */
    int32_t n_generated;
    int32_t running;              /* in the running list (else waiting or done) */
    int32_t done;
    uint64_t admit_order;         /* newer = preempted first */
    int32_t chunk;                /* this step: tokens scheduled */
    int32_t out_row;              /* this step: first logits row, -1 = none */
    int32_t n_draft;              /* this step: speculative tokens after the pending one
                                     (stored past n_tokens), each with a logits row */
    int32_t spec_slot;            /* this step: index into the draft distributions */
    ak__sampler sampler;
    ak__stop stop;
    /* constrained decoding: this sample's grammar state (NULL = unconstrained) */
    struct ak__grammar_state *grammar;
} ak__seq;

struct ak__req {
    uint64_t id;
    ak_llm_request r;             /* prompt/stops point to the owned copies below */
    int32_t *prompt;
    int32_t *stop_ids;
    char **stop_strings;
    ak__seq *seqs;                /* r.n of them; seqs[0] prefills, the others fork */
    int32_t forked;
    int32_t n_done;
    int32_t cancelled;
    uint32_t n_cached_prompt;
    ak__req *next;                /* inbox / all-requests list */
};

struct ak_llm_engine {
    ak_llm_model *model, *draft;
    ak_llm_engine_options o;
    const ak_tokenizer *tok;
    int32_t eos;
    ak__kv_cache *kv, *draft_kv;
    ak__forward_ws *ws, *draft_ws;
    ak_threadpool *pool;
    /* scheduler (engine thread only) */
    ak__req *active;              /* admitted or waiting requests */
    ak__seq **waiting;            /* FCFS ring of sequences */
    int32_t n_waiting, waiting_head, waiting_cap;
    ak__seq **running;
    int32_t n_running;
    uint64_t admit_counter;
    /* the counters of ak_llm_engine_stats as the step counts them; publish_stats copies
     * them into `stats` under the lock, which is all other threads read */
    ak_llm_engine_stats tally;
    /* per-step buffers, sized at creation */
    int32_t *b_tokens, *b_pos, *b_seq, *b_out, *b_len;
    const int32_t **b_tables;
    ak__seq **b_seqs;
    float *logits, *probs, *draft_probs, *draft_logits;
    int32_t max_out;
    /* submission from other threads */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    ak__req *inbox;
    uint64_t *cancel_ids;
    int32_t n_cancel, cancel_cap;
    uint64_t next_id;
    ak_llm_engine_stats stats; /* the last step's published figures */
    pthread_t thread;
    int32_t thread_running, stop_requested;
    /* constrained decoding: a logits row masked by a grammar (n_vocab, made on first use) */
    float *grammar_row;
};

/* engine_sched.c: picks this step's chunks; returns the number of tokens scheduled. */
int32_t ak__engine_schedule(ak_llm_engine *e);
/* Releases every block of `s` and returns it to the front of the waiting queue. */
void ak__engine_preempt(ak_llm_engine *e, ak__seq *s);
/* Takes `s` out of the running list and frees its blocks (finished or cancelled). */
void ak__engine_retire(ak_llm_engine *e, ak__seq *s);
/* Publishes the sequence's newly completed full blocks for prefix caching. */
void ak__engine_publish(ak_llm_engine *e, ak__seq *s);
/* Blocks for positions up to n_cached + need, copying a shared block before it is
 * written; 0 on success, -1 when the cache has no free block. */
int ak__engine_reserve(ak_llm_engine *e, ak__seq *s, int32_t need);
void ak__engine_waiting_push_front(ak_llm_engine *e, ak__seq *s);
void ak__engine_waiting_push_back(ak_llm_engine *e, ak__seq *s);
/* Drops the finished (cancelled) sequences of request q from the waiting queue, wherever
 * they are in it, before q is freed. */
void ak__engine_waiting_forget(ak_llm_engine *e, const ak__req *q);

/* engine_spec.c: proposes draft tokens for decoding sequences (draft model or n-gram
 * lookup) and widens their chunks; after the target pass, verifies them. */
ak_status ak__engine_spec_propose(ak_llm_engine *e);
void ak__engine_spec_verify(ak_llm_engine *e, ak__seq *s, const float *rows);

/* engine_step.c */
/* Puts tokens[from, from + len) of `s` into the step buffers as batch sequence `slot`,
 * starting at token index t; returns the next token index. */
int32_t ak__engine_batch_add(ak_llm_engine *e, ak__seq *s, int32_t from, int32_t len,
                             int32_t slot, int32_t t);
/* Appends a sampled token, sends its event and ends the sequence when a stop holds. */
void ak__engine_deliver(ak_llm_engine *e, ak__seq *s, int32_t token, float logprob,
                        const ak_llm_logprob *top, int32_t n_top);
ak_status ak__engine_run_step(ak_llm_engine *e);
/* Ends a sequence with `reason` (event sent, blocks freed). */
void ak__engine_finish(ak_llm_engine *e, ak__seq *s, ak_finish_reason reason, size_t trim,
                       ak_status status);

/* engine_grammar.c: constrained decoding */
ak_status ak__engine_grammar_check(const ak_llm_engine *e, const ak_llm_request *r);
ak_status ak__engine_grammar_init(ak__seq *s, const ak_llm_grammar *g);
void ak__engine_grammar_free(ak__seq *s);
/* The row to sample from: `row` itself, or a copy with the tokens the grammar refuses at
 * -inf; NULL when the sequence was ended with an error. */
const float *ak__engine_grammar_mask(ak_llm_engine *e, ak__seq *s, const float *row);
/* Advances the grammar by the sampled token; 0 when the sequence was ended (error). */
int ak__engine_grammar_accept(ak_llm_engine *e, ak__seq *s, int32_t token);
/* 1 when the grammar is complete (the sample ends with "stop"). */
int ak__engine_grammar_done(const ak__seq *s);

#endif /* AK_LLM_ENGINE_INTERNAL_H */
