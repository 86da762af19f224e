/* Internal interface of the ONNX loader: the guarded protobuf decoder and the tensor
 * converter, used by onnx_load.c. */
#ifndef AK_INFER_ONNX_INTERNAL_H
#define AK_INFER_ONNX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "infer/ir/ir.h"
#include "infer/onnx.pb-c.h"

/* Hard limits on what a file may ask of the decoder. ONNX files are protobuf messages,
 * which cannot exceed 2 GiB; weights beyond that live in external data files. */
#define AK_ONNX_MAX_FILE_BYTES ((size_t)INT32_MAX)
#define AK_ONNX_MAX_DEPTH 96 /* nested messages: about 30 levels of subgraphs */

/* Decodes a ModelProto after checking the wire format (lengths, nesting depth) so
 * protobuf-c never recurses deeper than AK_ONNX_MAX_DEPTH, and with an allocator that
 * refuses to grow beyond a budget proportional to the input. Free with
 * ak__onnx_model_free. */
ak_status ak__onnx_decode(const uint8_t *data, size_t size, Akonnx__ModelProto **out);
void ak__onnx_model_free(Akonnx__ModelProto *model);
/* The same guards for one serialized TensorProto (the .pb files of ONNX test data). */
ak_status ak__onnx_decode_tensor(const uint8_t *data, size_t size, Akonnx__TensorProto **out);
void ak__onnx_tensor_free(Akonnx__TensorProto *tensor);

/* Reads a whole regular file of at most AK_ONNX_MAX_FILE_BYTES (free with free()). */
ak_status ak__onnx_read_file(const char *path, uint8_t **data, size_t *size);

/* Where external tensor data is read from: a directory, or none (in-memory models). */
typedef struct ak__onnx_ctx {
    const char *base_dir; /* NULL: external data is refused */
    int base_fd;          /* base_dir opened on first use, or -1 */
} ak__onnx_ctx;

/* Converts a TensorProto (typed fields, raw_data or external data) into an IR tensor
 * allocated in g. `what` names the tensor in error messages. */
ak_status ak__onnx_tensor(ak__ir_graph *g, ak__onnx_ctx *ctx, const Akonnx__TensorProto *t,
                          const char *what, ak__ir_tensor **out);
/* Checks an element type code from the file: AK_ERR_UNSUPPORTED beyond the known ones. */
ak_status ak__onnx_elem_type(int32_t code, const char *what, ak_elem_type *out);

#endif /* AK_INFER_ONNX_INTERNAL_H */
