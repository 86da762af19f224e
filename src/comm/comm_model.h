/* The α–β cost model that picks a collective algorithm per (collective, size, topology).
 *
 * Each link class (same host, across hosts) is a one-way message time measured at a few
 * sizes; every algorithm's time is the sum over its steps of the time of that step's
 * message on the slowest link it uses (docs/collectives.md gives the formulas). Where
 * the algorithms themselves were timed at small sizes (calibration at creation, or the
 * tuning file's measured lines for this topology) those times win. comm_model.c holds
 * the formulas and the choice, comm_calibrate.c the measurements and the tuning file;
 * AK_COMM_ALGO forces a choice. */
#ifndef AK_COMM_COMM_MODEL_H
#define AK_COMM_COMM_MODEL_H

#include "comm/comm_internal.h"

/* "auto", "ring", "rd", "tree", "hier", "hier_pipe", "direct" (also the long names). */
ak_status ak__comm_algo_parse(const char *text, ak_comm_algo *out);
/* Short name (the tuning file's and AK_COMM_ALGO's spelling) and collective names. */
const char *ak__comm_algo_short_name(ak_comm_algo algo);
const char *ak__comm_coll_name(ak_comm_coll coll);
/* Fills comm->links and the measured times from the tuning file, or by calibration. A
 * split (parent not NULL) keeps the parent's link model and measures only what its own
 * topology changes; parent_topology (the parent's ranks in the parent's order) takes the
 * parent's whole model. */
ak_status ak__comm_model_init(ak_comm *comm, int threads_of_one_process, const ak_comm *parent,
                              int parent_topology);
/* Predicted time in µs of `coll` run with `algo` on `bytes` (ak_comm_choose_coll_algo
 * says what bytes means per collective): the measured times where there are some, else
 * the formula; INFINITY when the algorithm does not run here (hierarchical on one host,
 * recursive halving on a group that is not a power of two, an algorithm coll lacks). */
double ak__comm_model_us(const ak_comm *comm, ak_comm_coll coll, ak_comm_algo algo, size_t bytes);
/* The formula alone. */
double ak__comm_formula_us(const ak_comm *comm, ak_comm_coll coll, ak_comm_algo algo,
                           size_t bytes);
/* Writes the model (link parameters and measured times) as a tuning file. */
ak_status ak__comm_model_save(const ak_comm *comm, const char *path);
/* The algorithm to run for `coll`: `want` if not AUTO (calibration, tests), else the
 * forced one (config.algo), mapped to coll's algorithm of the same kind, else the
 * cheapest predicted. Never AUTO; always one that runs here. */
ak_comm_algo ak__comm_pick(const ak_comm *comm, ak_comm_coll coll, size_t bytes, ak_comm_algo want);

/* Chunk in bytes (of all ranks' data) for the pipelined hierarchical allreduce,
 * reduce-scatter or allgather of `bytes`: the model's fastest (256 KiB … 16 MiB), or
 * AK_COMM_HIER_CHUNK when set. */
size_t ak__comm_pipe_chunk(const ak_comm *comm, ak_comm_coll coll, size_t bytes);

/* The sizes (bytes) the algorithms are timed at, ascending (comm_calibrate.c). */
extern const size_t ak__comm_measured_bytes[AK_COMM_MEASURED_SIZES];

/* Logs (info) the model's choice per collective at a few sizes, whatever is forced. */
void ak__comm_model_log(const ak_comm *comm);

/* Link helpers shared by the two files. */
ak__link_model ak__link_alpha_beta(double alpha_us, double beta_gbps);
double ak__link_alpha(const ak__link_model *l);
double ak__link_beta_gbps(const ak__link_model *l);

#endif /* AK_COMM_COMM_MODEL_H */
