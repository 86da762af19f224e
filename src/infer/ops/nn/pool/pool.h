/* The pooling operators' definitions (pool.c, unpool.c), listed by nn/table.c. */
#ifndef AK_INFER_OPS_NN_POOL_POOL_H
#define AK_INFER_OPS_NN_POOL_POOL_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__nn_maxpool, ak__nn_averagepool, ak__nn_lppool, ak__nn_nchwc_maxpool;
extern const ak__op_def ak__nn_global_averagepool, ak__nn_global_maxpool,
    ak__nn_global_lppool;
extern const ak__op_def ak__op_maxunpool;

#endif /* AK_INFER_OPS_NN_POOL_POOL_H */
