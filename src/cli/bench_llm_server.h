/* `ak bench llm --url URL --concurrency N ...`: a load test of a running `ak serve`. */
#ifndef AK_CLI_BENCH_LLM_SERVER_H
#define AK_CLI_BENCH_LLM_SERVER_H

/* argv[0] is the domain name ("llm"); exit codes as every subcommand (cli.h). */
int ak_bench_llm_server(int argc, char **argv);

#endif /* AK_CLI_BENCH_LLM_SERVER_H */
