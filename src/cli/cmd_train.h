/* Shared by `ak train` and `ak sysinfo --cluster-json` (src/cli/cmd_train.c). */
#ifndef AK_CLI_CMD_TRAIN_H
#define AK_CLI_CMD_TRAIN_H

/* What ak sysinfo measured, and how the host is split into ranks. */
typedef struct ak_cluster_measures {
    double peak_gflops_per_core, memcpy_gbps;
    int cores;
    long ranks;
    const char *comm_tuning; /* AK_COMM_TUNING file of ak bench comm --calibrate */
} ak_cluster_measures;

/* Prints this host as a planner cluster description (one device per rank). */
int ak__cli_cluster_json(const ak_cluster_measures *m);
/* tp*pp*dp of plan `which` of an `ak plan --json` file, or -1 after printing why. */
long ak__cli_plan_ranks(const char *path, int which);

#endif
