/* NonMaxSuppression (opsets 10, 11): greedy per-class box selection.
 *
 * boxes [B, N, 4], scores [B, C, N] (float32). For every batch b and class c the boxes
 * whose score is above score_threshold (input 4; no filter when omitted) are visited in
 * descending score order (equal scores in ascending box index); a box is kept unless its
 * intersection-over-union with a box already kept for (b, c) is above iou_threshold
 * (input 3, default 0), until max_output_boxes_per_class (input 2, default 0: nothing
 * is selected) are kept. Output selected_indices [K, 3] int64 rows (b, c, box), by batch,
 * then class, then selection order, as ONNX Runtime writes them.
 *
 * center_point_box = 0: a box is [y1, x1, y2, x2], any two opposite corners;
 * center_point_box = 1: [x_centre, y_centre, width, height]. A box of zero area overlaps
 * nothing. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/select/select.h"

typedef struct nms_state {
    ak__select_buf order;    /* candidates of one (b, c): score and box index */
    ak__select_buf kept;     /* box indices kept for one (b, c) */
    ak__select_buf selected; /* the output rows, 3 int64 each */
    uint64_t num_selected;
} nms_state;

typedef struct nms_candidate {
    float score;
    int64_t box;
} nms_candidate;

typedef struct nms_box {
    float y0, x0, y1, x1; /* y0 <= y1, x0 <= x1 */
} nms_box;

static ak_status nms_create(const ak__ir_node *node, const ak__tensor *const *consts,
                            void **state) {
    (void)consts;
    int64_t cpb = ak__attr_int(node, "center_point_box", 0);
    if (cpb != 0 && cpb != 1)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "center_point_box is %lld, expected 0 or 1",
                          (long long)cpb);
    nms_state *st = calloc(1, sizeof *st);
    if (!st) return AK_FAIL(AK_ERR_NO_MEMORY, "NonMaxSuppression: out of memory");
    *state = st;
    return AK_OK;
}

static void nms_destroy(void *state) {
    nms_state *st = state;
    if (!st) return;
    ak__select_release(&st->order);
    ak__select_release(&st->kept);
    ak__select_release(&st->selected);
    free(st);
}

static nms_box box_at(const float *b, int center_point) {
    nms_box r;
    if (center_point) {
        float xc = b[0], yc = b[1], hw = b[2] / 2, hh = b[3] / 2;
        r.x0 = xc - hw;
        r.x1 = xc + hw;
        r.y0 = yc - hh;
        r.y1 = yc + hh;
    } else {
        r.y0 = b[0] < b[2] ? b[0] : b[2];
        r.y1 = b[0] < b[2] ? b[2] : b[0];
        r.x0 = b[1] < b[3] ? b[1] : b[3];
        r.x1 = b[1] < b[3] ? b[3] : b[1];
    }
    if (r.x0 > r.x1) { /* a negative width or height */
        float t = r.x0;
        r.x0 = r.x1;
        r.x1 = t;
    }
    if (r.y0 > r.y1) {
        float t = r.y0;
        r.y0 = r.y1;
        r.y1 = t;
    }
    return r;
}

static float iou(nms_box a, nms_box b) {
    float area_a = (a.y1 - a.y0) * (a.x1 - a.x0), area_b = (b.y1 - b.y0) * (b.x1 - b.x0);
    if (area_a <= 0 || area_b <= 0) return 0;
    float ih = (a.y1 < b.y1 ? a.y1 : b.y1) - (a.y0 > b.y0 ? a.y0 : b.y0);
    float iw = (a.x1 < b.x1 ? a.x1 : b.x1) - (a.x0 > b.x0 ? a.x0 : b.x0);
    if (ih <= 0 || iw <= 0) return 0;
    float inter = ih * iw;
    return inter / (area_a + area_b - inter);
}

static int by_score(const void *pa, const void *pb) {
    const nms_candidate *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->box > b->box) - (a->box < b->box);
}

typedef struct nms_params {
    int64_t batches, classes, boxes, max_per_class;
    float iou_threshold, score_threshold;
    int has_score_threshold, center_point;
} nms_params;

static ak_status optional_scalar(const ak__op_ctx *ctx, uint32_t i, const char *what,
                                 ak_elem_type type, double *out) {
    const ak__tensor *t = ak__op_in(ctx, i);
    if (!t) return AK_OK;
    if (t->type != type || t->count != 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %u (%s) must be one %s (has %llu of %s)", i, what,
                          ak_elem_type_name(type), (unsigned long long)t->count,
                          ak_elem_type_name(t->type));
    *out = type == AK_ELEM_I64 ? (double)*(const int64_t *)t->data : *(const float *)t->data;
    return AK_OK;
}

static ak_status nms_params_of(const ak__op_ctx *ctx, nms_params *p) {
    const ak__tensor *boxes, *scores;
    AK_CHECK(ak__op_require(ctx, 0, &boxes));
    AK_CHECK(ak__op_require(ctx, 1, &scores));
    AK_CHECK(ak__op_check_type(ctx, 0, boxes, AK_ELEM_F32));
    AK_CHECK(ak__op_check_type(ctx, 1, scores, AK_ELEM_F32));
    if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 ||
        scores->dims[0] != boxes->dims[0] || scores->dims[2] != boxes->dims[1])
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "boxes must be [B, N, 4] and scores [B, C, N] (ranks %d and %d)",
                          boxes->rank, scores->rank);
    p->batches = boxes->dims[0];
    p->boxes = boxes->dims[1];
    p->classes = scores->dims[1];
    double max_out = 0, iou_thr = 0, score_thr = 0;
    AK_CHECK(optional_scalar(ctx, 2, "max_output_boxes_per_class", AK_ELEM_I64, &max_out));
    AK_CHECK(optional_scalar(ctx, 3, "iou_threshold", AK_ELEM_F32, &iou_thr));
    AK_CHECK(optional_scalar(ctx, 4, "score_threshold", AK_ELEM_F32, &score_thr));
    if (!(iou_thr >= 0 && iou_thr <= 1))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "iou_threshold %g is outside [0, 1]",
                          iou_thr);
    p->max_per_class = max_out < 0 ? 0 : (int64_t)max_out;
    if (p->max_per_class > p->boxes) p->max_per_class = p->boxes;
    p->iou_threshold = (float)iou_thr;
    p->score_threshold = (float)score_thr;
    p->has_score_threshold = ak__op_in(ctx, 4) != NULL;
    p->center_point = ak__attr_int(ctx->node, "center_point_box", 0) == 1;
    return AK_OK;
}

/* Selects the boxes of one (b, c), appending rows to out; returns how many. */
static uint64_t select_class(const nms_params *p, const float *boxes, const float *scores,
                             nms_candidate *cand, int64_t *kept, int64_t b, int64_t c,
                             int64_t *out) {
    size_t n = 0;
    for (int64_t i = 0; i < p->boxes; i++)
        if (!p->has_score_threshold || scores[i] > p->score_threshold)
            cand[n++] = (nms_candidate){scores[i], i};
    qsort(cand, n, sizeof *cand, by_score);
    int64_t num_kept = 0;
    for (size_t k = 0; k < n && num_kept < p->max_per_class; k++) {
        nms_box bx = box_at(boxes + cand[k].box * 4, p->center_point);
        int suppressed = 0;
        for (int64_t j = 0; j < num_kept && !suppressed; j++)
            suppressed = iou(bx, box_at(boxes + kept[j] * 4, p->center_point)) >
                         p->iou_threshold;
        if (suppressed) continue;
        kept[num_kept] = cand[k].box;
        out[3 * num_kept] = b;
        out[3 * num_kept + 1] = c;
        out[3 * num_kept + 2] = cand[k].box;
        num_kept++;
    }
    return (uint64_t)num_kept;
}

static ak_status nms_reshape(ak__op_ctx *ctx) {
    nms_state *st = ctx->state;
    nms_params p = {0};
    AK_CHECK(nms_params_of(ctx, &p));
    const float *boxes = ak__op_in(ctx, 0)->data, *scores = ak__op_in(ctx, 1)->data;
    size_t n = (size_t)p.boxes;
    size_t rows = (size_t)(p.batches * p.classes * p.max_per_class);
    AK_CHECK(ak__select_reserve(&st->order, n * sizeof(nms_candidate)));
    AK_CHECK(ak__select_reserve(&st->kept, n * sizeof(int64_t)));
    AK_CHECK(ak__select_reserve(&st->selected, rows * 3 * sizeof(int64_t)));
    int64_t *out = st->selected.data;
    st->num_selected = 0;
    for (int64_t b = 0; b < p.batches && p.max_per_class > 0; b++)
        for (int64_t c = 0; c < p.classes; c++)
            st->num_selected += select_class(
                &p, boxes + (size_t)(b * p.boxes * 4),
                scores + (size_t)((b * p.classes + c) * p.boxes), st->order.data,
                st->kept.data, b, c, out + 3 * st->num_selected);
    int64_t dims[2] = {(int64_t)st->num_selected, 3};
    return ak__op_set_output(ctx, 0, AK_ELEM_I64, 2, dims);
}

static ak_status nms_run(ak__op_ctx *ctx) {
    nms_state *st = ctx->state;
    ak__tensor *y = ak__op_out(ctx, 0);
    if (y && y->count) memcpy(y->data, st->selected.data, ak__tensor_nbytes(y));
    return AK_OK;
}

const ak__op_def ak__op_non_max_suppression = {
    "", "NonMaxSuppression", 10, 0, nms_create, nms_destroy, nms_reshape, nms_run};
