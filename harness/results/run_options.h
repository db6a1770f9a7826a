/* A run's options fingerprint: the options that change its rows, as one
 * canonical string in the provenance (results_meta_t.options, the results
 * file's "options" attribute), so `gate --resume` can refuse partials of a
 * run that asked for other rows, naming each option that differs.
 *
 * Format: entries "name=value" (a flag given: "name") joined by ';', in a
 * fixed order (the option table's, then what the gate adds: "python
 * kernel SPEC=DIGEST" per Python kernel file of the suite; a name with a
 * space is no option), an option given twice once per
 * value; '\' and ';' inside a value are escaped with '\'.  The builders are
 * the command line's (cli_run_options.h) and the gate's. */
#ifndef KR_RUN_OPTIONS_H
#define KR_RUN_OPTIONS_H

#include <stddef.h>

/* Appends "name=value" (value NULL: "name") to the fingerprint in buf.
 * Returns 0, or -1 when it does not fit (buf unchanged). */
int run_options_append(char *buf, size_t cap, const char *name, const char *value);

/* The options whose values differ between two fingerprints, for the
 * user: "--inject: was 'w4a8.folded=tile-scale:1.5', now not given;
 * --kernels: was not given, now 'w4a8.*'" into msg.  Returns how many
 * differ (0: the same rows are asked for). */
int run_options_diff(const char *was, const char *now, char *msg, size_t cap);

#endif
