/* ak quantize's internal interface: the graph edits (quantize.c, quantize_edit.c) and the
 * calibration runs (quantize_calib.c) of ak_quantize_model (accelkit/infer.h). */
#ifndef AK_INFER_QUANTIZE_QUANTIZE_H
#define AK_INFER_QUANTIZE_QUANTIZE_H

#include "infer/model.h"

/* ---- graph edits on a loaded model (quantize_edit.c) ---------------------------------- */

/* A new value named base+suffix (made unique with a counter when taken). */
ak_status ak__qz_value(ak__ir_graph *g, const char *base, const char *suffix, int32_t *out);
/* A new constant value holding a copy of count elements of type at data, shaped dims. */
ak_status ak__qz_constant(ak__ir_graph *g, const char *base, const char *suffix,
                          ak_elem_type type, int rank, const int64_t *dims, const void *data,
                          int32_t *out);
/* Appends node op_type (default domain) named name_OpType (unique), reading ins, writing
 * outs; *out (may be NULL) is its index. */
ak_status ak__qz_node(ak__ir_graph *g, const char *op_type, const char *name,
                      const int32_t *ins, uint32_t num_ins, const int32_t *outs,
                      uint32_t num_outs, int32_t *out);
/* Gives node k one int attribute (replacing its attribute list). */
ak_status ak__qz_int_attr(ak__ir_graph *g, int32_t k, const char *name, int64_t value);
/* Nodes reading value v (inputs or captures), excluding node skip. */
size_t ak__qz_readers(const ak__ir_graph *g, int32_t v, int32_t skip);
/* Makes every node except `skip` that reads `from` read `to`. */
void ak__qz_rewire(ak__ir_graph *g, int32_t from, int32_t to, int32_t skip);
int ak__qz_is_graph_output(const ak__ir_graph *g, int32_t v);

/* ---- calibration (quantize_calib.c) ---------------------------------------------------- */

/* Runs `model` (float, as edited so far) over the samples of opts and returns, for each
 * of the n values named, the range [lo, hi] its quantization covers (MinMax or
 * percentile, per opts->method), before 0 is added to it. */
ak_status ak__qz_calibrate(const ak_model *model, const char *const *names, size_t n,
                           const ak_quantize_options *opts, float *lo, float *hi);

#endif /* AK_INFER_QUANTIZE_QUANTIZE_H */
