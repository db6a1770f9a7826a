/* --kernels PATTERNS: every comma-separated glob must match a kernel, and a
 * typo is answered with the nearest kernel name. */
#ifndef KR_CLI_KERNEL_PATTERNS_H
#define KR_CLI_KERNEL_PATTERNS_H

#include "cli_options.h"
#include "registry.h"

/* Returns 0 when every pattern matches a registry kernel or one of extra;
 * otherwise prints one line per unmatched pattern (with "did you mean") and
 * returns -1. */
int cli_check_kernel_patterns(const cli_command_t *cmd, const char *patterns,
                              const kernel_desc_t *const *extra, int n_extra);

/* "kreplay CMD: --OPTION: 'word' is not a kernel (did you mean X?)". */
void cli_kernel_typo(const cli_command_t *cmd, const char *option, const char *word,
                     const kernel_desc_t *const *extra, int n_extra);

#endif
