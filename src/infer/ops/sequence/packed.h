/* The packed layout of sequence and empty-optional values.
 *
 * The runtime computes on tensors only, so a sequence travels as one opaque uint8 tensor
 * holding a serialized list, and the memory plan, lifetimes, folding and subgraph
 * crossings need no notion of sequences:
 *   header (64 bytes: magic, count, element type) | count entries | payloads
 * Each entry holds an element's shape, offset and size; payloads are 64-byte aligned.
 * An empty optional is a header alone with the NONE magic; an optional that holds a
 * value is that value (a tensor or a packed sequence). Every reader checks the magic
 * and the bounds, so a tensor passed where a sequence is expected fails cleanly. */
#ifndef AK_INFER_OPS_SEQUENCE_PACKED_H
#define AK_INFER_OPS_SEQUENCE_PACKED_H

#include <stdint.h>

#include "infer/runtime/tensor.h"

#define AK__SEQ_MAGIC 0x5145534b41ULL  /* "AKSEQ" */
#define AK__NONE_MAGIC 0x454e4f4e4b41ULL /* "AKNONE" */
#define AK__SEQ_MAX 256 /* elements per sequence: bounds the views kept on the stack */

typedef struct ak__seq_header {
    uint64_t magic, count;
    int64_t elem_type;
    uint64_t pad[5];
} ak__seq_header;

typedef struct ak__seq_entry {
    int32_t type, rank;
    int64_t dims[AK_IR_MAX_RANK];
    uint64_t offset, nbytes;
} ak__seq_entry;

static inline uint64_t ak__seq_align64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* Bytes of the header and `count` entries, rounded up to the payloads' alignment. */
static inline uint64_t ak__seq_entries_end(uint64_t count) {
    return ak__seq_align64(sizeof(ak__seq_header) + count * sizeof(ak__seq_entry));
}

/* A read view of a packed sequence. */
typedef struct ak__seq_view {
    const ak__seq_header *h;
    const ak__seq_entry *e;
    const uint8_t *base;
} ak__seq_view;

/* Opens bytes..bytes+size as a packed sequence: 0 when valid (magic, count, every entry
 * in bounds), -1 when not. */
int ak__seq_open_bytes(const void *bytes, uint64_t size, ak__seq_view *v);
/* Element i of a view as a tensor (data points into the sequence). */
ak__tensor ak__seq_elem(const ak__seq_view *v, uint64_t i);
/* Packed size of n elements. */
uint64_t ak__seq_packed_bytes(const ak__tensor *const *items, uint64_t n);
/* Writes n elements (type: the sequence's element type) into out (packed_bytes long). */
void ak__seq_pack(const ak__tensor *const *items, uint64_t n, ak_elem_type type, void *out);

/* The empty optional: a header of sizeof(ak__seq_header) bytes with the NONE magic. */
void ak__none_write(void *out);
int ak__is_none(const ak__tensor *t);

#endif /* AK_INFER_OPS_SEQUENCE_PACKED_H */
