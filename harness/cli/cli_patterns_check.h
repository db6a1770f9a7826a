/* What a replay's command line names must be run: a kernel loaded by name
 * (--plugin LIB, --py MODULE:FUNCTION) that --kernels leaves out, or an
 * --inject KERNELS glob that matches none of the kernels run, is an error
 * naming it, never a run that quietly checked less than it was asked. */
#ifndef KR_CLI_PATTERNS_CHECK_H
#define KR_CLI_PATTERNS_CHECK_H

#include "cli_options.h"
#include "plugin_loader.h"
#include "replay.h"

/* 0 when opt runs some kernel of each plugin and every kernel of py (the
 * --py kernels, one per spec of py_specs, in order; NULL: none), and every
 * --inject KERNELS glob matches a kernel it runs; else prints why (exit 2
 * follows) and returns -1. */
int cli_check_named_kernels(const cli_command_t *cmd, const replay_options_t *opt, kr_plugin_t *const *plugins,
                            int n_plugins, const kr_plugin_t *py, const char *const *py_specs);

#endif
