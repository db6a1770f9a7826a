/* Words of a command the user can paste back into a shell: the rerun
 * command of a failing row, the resume command of an interrupted gate. */
#ifndef KR_CLI_SHELL_WORDS_H
#define KR_CLI_SHELL_WORDS_H

#include <stdio.h>

/* s as is when the shell takes it so, else in single quotes. */
void cli_shell_word(FILE *fp, const char *s);
/* An absolute path where it exists, so the command works from any directory. */
void cli_path_word(FILE *fp, const char *path);
/* The running kreplay binary's absolute path ("kreplay" when unknown). */
void cli_binary_word(FILE *fp);

#endif
