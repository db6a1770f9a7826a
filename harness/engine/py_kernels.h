/* `--py MODULE:FUNCTION`: Python callables as kernels, through the in-tree
 * plugin kernels/plugins/python (libkr_plugin_python.so, see its README).
 *
 * py_kernels_load() checks each spec (MODULE:FUNCTION, MODULE a dotted name
 * or a path to a .py file; no ','), hands them to the plugin in the
 * environment variable KREPLAY_PY_KERNELS (the plugin reads it when it is
 * loaded), and loads the plugin like `--plugin`: from $KREPLAY_PY_PLUGIN, or
 * plugins/libkr_plugin_python.so beside the running executable.  One load per
 * process: every spec of a run goes in one call. */
#ifndef KR_PY_KERNELS_H
#define KR_PY_KERNELS_H

#include "kr_error.h"
#include "plugin_loader.h"

#define PY_KERNELS_MAX 8

/* Returns 0 with *out loaded (one kernel per spec, in order), or -1 with err
 * naming the spec or the plugin and what was expected. */
int py_kernels_load(const char *const *specs, int n, kr_plugin_t **out, kr_error_t *err);

#endif
