/* --inject [KERNELS=]FAULT, shared by replay and gate. */
#ifndef KR_CLI_INJECT_H
#define KR_CLI_INJECT_H

#include <stddef.h>

#include "cli_options.h"
#include "fault_inject.h"

/* Parses arg into *fault and *kernels (pointing into buf, NULL for all
 * kernels).  "help" prints the faults on stdout and returns 1; a bad fault is
 * reported on stderr and returns -1; 0 on success. */
int cli_parse_inject(const cli_command_t *cmd, const char *arg, char *buf, size_t cap, fault_t *fault,
                     const char **kernels);

#endif
