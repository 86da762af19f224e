/* The α–β cost model that picks a collective algorithm per (operation, size, topology).
 *
 * Each link class (same host, across hosts) has a latency α and a bandwidth β; every
 * algorithm's time is its number of steps × α plus the bytes it puts on the slowest link
 * it uses / β (docs/collectives.md gives the formulas). Parameters come from a tuning
 * file (AK_COMM_TUNING) or from defaults per transport kind measured on this project's
 * machines; AK_COMM_ALGO forces a choice. */
#ifndef AK_COMM_COMM_MODEL_H
#define AK_COMM_COMM_MODEL_H

#include "comm/comm_internal.h"

/* "auto", "ring", "rd", "tree", "hier" (also the long names). */
ak_status ak__comm_algo_parse(const char *text, ak_comm_algo *out);
/* Fills comm->links from the tuning file or the defaults. */
ak_status ak__comm_model_init(ak_comm *comm, int threads_of_one_process);
/* Predicted allreduce time in µs of `algo` for `bytes` on this communicator
 * (INFINITY when the algorithm cannot run here, e.g. hierarchical on one host). */
double ak__comm_model_allreduce_us(const ak_comm *comm, ak_comm_algo algo, size_t bytes);
/* Writes the model (link parameters and measured allreduce times) as a tuning file. */
ak_status ak__comm_model_save(const ak_comm *comm, const char *path);
/* The algorithm to run: the forced one, else the cheapest predicted. */
ak_comm_algo ak__comm_pick_allreduce(const ak_comm *comm, size_t bytes);

#endif /* AK_COMM_COMM_MODEL_H */
