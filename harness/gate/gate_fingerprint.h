/* The gate's options fingerprint (run_options.h): the command line's
 * row-changing options, then a digest of each of the suite's Python kernel
 * files, whose code gives the rows as much as an option does. */
#ifndef KR_GATE_FINGERPRINT_H
#define KR_GATE_FINGERPRINT_H

#include <stddef.h>

#include "suite.h"

/* cli_fingerprint (NULL: none) and "python kernel SPEC=DIGEST" for each
 * python: entry of s whose module is a .py file (its bytes' FNV-1a; "unread"
 * when it cannot be read) into buf. */
void gate_fingerprint(const char *cli_fingerprint, const suite_t *s, char *buf, size_t cap);

#endif
