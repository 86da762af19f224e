/* Feeding a model from the command line: inputs read from .npy/.pb files, or made up
 * (seeded random data in the model's declared shapes, symbolic dims from --dim), shared
 * by `ak run`, `ak compare` and `ak bench MODEL`. */
#ifndef AK_CLI_INFER_FEED_H
#define AK_CLI_INFER_FEED_H

#include "accelkit/infer.h"

#define AK_FEED_MAX 64

typedef struct ak_feed {
    size_t n;
    const char *names[AK_FEED_MAX];
    ak_tensor tensors[AK_FEED_MAX];
    int64_t dims[AK_FEED_MAX][32];
    ak_tensor_file *files[AK_FEED_MAX]; /* inputs read from files */
    void *made[AK_FEED_MAX];            /* inputs made up here (ak_alloc) */
    struct {
        const char *name;
        int64_t value;
    } dim_values[16];
    size_t num_dim_values;
} ak_feed;

/* Records "--dim name=value"; 0 on success. */
int ak_feed_add_dim(ak_feed *f, const char *arg);
/* Adds an input from "name=path" (.npy or .pb); 0 on success (errors printed). */
int ak_feed_add_file(ak_feed *f, const char *arg);
/* Adds every file of a folder: test_data_set style PREFIX_K.pb (by position) or
 * NAME.npy (by name). prefix "input" reads the model's inputs, "output" its outputs
 * (references); 0 on success. */
int ak_feed_add_dir(ak_feed *f, const ak_model *m, const char *dir, const char *prefix);
/* Makes up every model input not yet fed; 0 on success. */
int ak_feed_fill_random(ak_feed *f, const ak_model *m, unsigned seed);
void ak_feed_free(ak_feed *f);

/* Loads a model or prints why not; 0 on success. */
int ak_feed_load_model(const char *path, ak_model **out);

#endif /* AK_CLI_INFER_FEED_H */
