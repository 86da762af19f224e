/* The `ak` option layer: each subcommand declares one table of its flags, and the table
 * drives parsing (getopt_long: `--opt value`, `--opt=value`, `-o value`, `-ovalue`),
 * validation (numbers parsed in full and range-checked, enums matched, an error naming
 * the flag and the bad value), the defaults, and `--help`.
 *
 * Errors read `ak SUBCOMMAND: ...` on stderr, followed by the same usage line `--help`
 * starts with; usage errors exit with AK_EXIT_ERROR (2). */
#ifndef AK_CLI_CLI_OPTS_H
#define AK_CLI_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

typedef enum ak_opt_kind {
    AK_OPT_FLAG,   /* no value: int dest set to 1 */
    AK_OPT_INT,    /* long dest, whole decimal in [min, max] */
    AK_OPT_SIZE,   /* size_t dest, whole number with an optional K/M/G (1024-based) suffix */
    AK_OPT_DOUBLE, /* double dest, finite number in [min, max] */
    AK_OPT_STRING, /* const char * dest */
    AK_OPT_ENUM,   /* int dest: index of the value in choices ("a|b|c") */
    AK_OPT_CUSTOM, /* parse(dest, value, more): lists, key=value pairs, two-value flags */
} ak_opt_kind;

/* What a custom parser may read beyond its own value (launch's two-value flag). */
typedef struct ak_opt_more {
    int argc, *next; /* *next: index of the next unread argument */
    char **argv;
} ak_opt_more;

/* The next argument after the flag's value, consumed; NULL when there is none. */
char *ak_opt_take(ak_opt_more *more);

/* Parses value into dest; returns NULL on success, else why it is bad ("want MxNxK"). */
typedef const char *(*ak_opt_parse_fn)(void *dest, char *value, ak_opt_more *more);

typedef struct ak_opt {
    const char *name;  /* long name(s) without "--"; "np|num-proc": aliases after the first;
                          NULL for a flag with only a short letter */
    int letter;        /* short letter, 0 for none */
    ak_opt_kind kind;
    void *dest;
    const char *arg;   /* the value's placeholder in --help ("N", "FILE"); NULL: kind's */
    const char *help;  /* what the flag means */
    const char *def;   /* default value, applied to dest before parsing and shown in
                          --help; NULL: dest keeps what the caller put there */
    double min, max;   /* INT, SIZE, DOUBLE: the accepted range (both 0: any) */
    const char *choices; /* ENUM: "a|b|c" */
    ak_opt_parse_fn parse; /* CUSTOM */
} ak_opt;

#define AK_OPT_END {0}

enum {
    AK_CMD_OPTIONS_FIRST = 1, /* options end at the first operand (ak launch: the rest is
                                 the launched command's) */
};

typedef struct ak_cli_cmd {
    const char *name;    /* "compare", "bench kernels" */
    const char *usage;   /* synopsis after "usage: "; NULL: commands.def's or bench.def's */
    const char *summary; /* one line saying what it does; NULL: as usage */
    const ak_opt *opts;  /* ends with AK_OPT_END */
    unsigned flags;      /* AK_CMD_* */
    const char *notes;   /* printed after the options in --help; may be NULL */
} ak_cli_cmd;

/* Result of ak_cli_parse besides the exit codes: parsing went through, run the command. */
#define AK_CLI_CONTINUE (-1)

/* Applies the defaults, parses argv[1..] (argv[0] is the subcommand's name) and sets
 * *first_operand to the index of the first operand (operands are argv[*first_operand ..
 * argc - 1], in order; getopt moves them after the options). Returns AK_CLI_CONTINUE,
 * AK_EXIT_OK after printing --help, or AK_EXIT_ERROR after printing a usage error. */
int ak_cli_parse(const ak_cli_cmd *cmd, int argc, char **argv, int *first_operand);

/* Prints the whole --help of cmd to out. */
void ak_cli_print_help(const ak_cli_cmd *cmd, FILE *out);

/* Prints "ak NAME: <message>", then the usage line, to stderr; returns AK_EXIT_ERROR. */
int ak_cli_usage_error(const ak_cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Number parsers the table uses, for values read elsewhere (ids lists, key=value
 * specs); 0 on success. ak_cli_parse_bytes takes a K/M/G suffix (1024-based). */
int ak_cli_parse_long(const char *text, long lo, long hi, long *out);
int ak_cli_parse_double(const char *text, double *out);
int ak_cli_parse_bytes(const char *text, size_t *out);

#endif /* AK_CLI_CLI_OPTS_H */
