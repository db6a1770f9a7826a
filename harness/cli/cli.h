/* The kreplay command line: one function per subcommand, reached through its
 * cli_command_t (cli_commands.h), dispatched by name in cli_main.c.  Each
 * returns the process exit code: 0 success, 1 a failing verdict, 2 a usage
 * or input error. */
#ifndef KR_CLI_H
#define KR_CLI_H

#include "kr_error.h"
#include "mxfp4_weight.h"

#define EXIT_VERDICT_FAILED 1
#define EXIT_USAGE 2

int kreplay_main(int argc, char **argv);

/* Shared helpers. */
/* "kreplay: error: MESSAGE" on stderr, the one way every command reports a
 * failure it cannot go on from; returns EXIT_USAGE for the caller to return
 * or keep as its status. */
int cli_error(const kr_error_t *err);

/* "a,b,c" of integers -> values (returns count, or -1 on a malformed list). */
int cli_parse_int_list(const char *s, long long *values, int cap);
/* A scale layout as the command line names it: nk or kn, or the layout's
 * own name (N,K/32, K/32,N).  Returns 0, or -1 for any other word. */
int cli_scale_layout_from_word(const char *s, scale_layout_t *out);
/* Expands CASE arguments: files as given, directories to their *.h5 and *.pt
 * files in name order.  Returns a malloc'd NULL-terminated array of strings. */
char **cli_expand_cases(int n, char **args, int *count);
void cli_free_strings(char **list);
/* The command line as one string, for provenance. */
char *cli_command_line(int argc, char **argv);
/* The build's version and commit. */
const char *cli_version(void);
const char *cli_git_commit(void);

#endif
