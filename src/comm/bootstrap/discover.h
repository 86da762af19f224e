/* Rank discovery: who am I, how many are we, where is the store, which host am I on.
 *
 * Sources, first match wins: the config's explicit fields; `ak launch` (AK_RANK,
 * AK_WORLD_SIZE, AK_LOCAL_RANK, AK_LOCAL_SIZE); horovodrun (HOROVOD_RANK, HOROVOD_SIZE,
 * HOROVOD_LOCAL_RANK, HOROVOD_LOCAL_SIZE); torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE); Open MPI (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE); Slurm
 * (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_NODELIST/SLURM_NODELIST); else
 * a world of one. The store address comes from the config, AK_MASTER_ADDR/AK_MASTER_PORT,
 * MASTER_ADDR/MASTER_PORT, or (Slurm) the first node of the node list; default port
 * 29500. */
#ifndef AK_COMM_BOOTSTRAP_DISCOVER_H
#define AK_COMM_BOOTSTRAP_DISCOVER_H

#include "accelkit/comm.h"

typedef struct ak__world_info {
    int rank, world_size;
    int local_rank, local_size; /* -1 when the source does not say (derived from hosts) */
    char store_addr[256];
    int store_port;
    char source[16]; /* "config", "ak launch", "horovod", "torchrun", "openmpi", "slurm",
                      * "single" */
} ak__world_info;

/* getenv, with "" counted as unset (launchers sometimes export empty variables); NULL
 * name: NULL. */
const char *ak__env(const char *name);

/* Fails with AK_ERR_INVALID_ARG naming the variable when a source is inconsistent
 * (rank ≥ world size, a non-number, a Slurm node list it cannot parse, ...). */
ak_status ak__discover(const ak_comm_config *cfg, ak__world_info *out);

/* This process's host identity: hostname plus the network-namespace inode, so network
 * namespaces on one machine count as different hosts (as they must: they do not share
 * loopback). */
ak_status ak__host_id(char *buf, size_t cap);

/* First host of a Slurm node list ("node[01-04,07],gpu2" -> "node01"). */
ak_status ak__slurm_first_node(const char *nodelist, char *buf, size_t cap);

#endif /* AK_COMM_BOOTSTRAP_DISCOVER_H */
