/* Loading a kreplay plugin (plugin.h) and running its kernels like registry
 * kernels.
 *
 * plugin_load() dlopens a shared library, reads its KREPLAY_PLUGIN_SYMBOL,
 * checks the ABI version and every kernel entry, and builds one
 * kernel_desc_t per plugin kernel:
 *   family "plugin", op GEMM, weight_kind MXFP4, refs R_exact | R_source,
 *   prepare_act: act_prepare_fp8_token (recorded or quantized e4m3fn
 *     activations, as every W4A8 model gets them), then the kernel's own
 *     constraints (fp8 format, N multiple, fragment-order shape) -> a refusal
 *     there becomes an UNSUPPORTED row;
 *   run_cpu: lays the operands out as the kernel declared (weight permuted
 *     to fragment order, scales transposed, weight_ref NULL or [N] row
 *     maxima), then calls the plugin's launch on host buffers (CPU plugin)
 *     or on device copies with a stream (GPU plugin, through kr_gpu.h),
 *     with the output poisoned (bf16 0x7FC1) and, on the host, between guard
 *     bytes covering a whole tile past the last row and column.  A nonzero
 *     return fails the run with a message (an ERROR row), a guard write
 *     with PLUGIN_RUN_OUT_OF_BOUNDS (an OOB_WRITE row); unwritten elements
 *     are counted in the run's note; a crash or hang is the caller's to
 *     contain (harness/common/isolate.h).
 * The descriptors live in the returned kr_plugin_t and are valid until
 * plugin_unload(); nothing here keeps global state.
 *
 * A GPU plugin's run does every GPU call (device selection included) inside
 * run_cpu, never at load time, so it can run in a forked child whose parent
 * has not initialized the GPU runtime. */
#ifndef KR_PLUGIN_LOADER_H
#define KR_PLUGIN_LOADER_H

#include "kr_error.h"
#include "plugin.h"
#include "registry.h"

typedef struct kr_plugin kr_plugin_t;

/* What a plugin descriptor's run_cpu returns when the kernel wrote outside
 * its output (a guard's canary bytes changed; err says how many and where);
 * any other failure is -1. */
#define PLUGIN_RUN_OUT_OF_BOUNDS 2

/* Loads the plugin at `path` (a path without '/' is taken relative to the
 * working directory, never searched for on the library path).  Returns 0 with
 * *out set, or -1 with err naming the file and what is wrong: no such file,
 * not a loadable shared library (the loader's message), no
 * KREPLAY_PLUGIN_SYMBOL, ABI version found vs expected, a malformed kernel
 * entry, a name that clashes with the registry or repeats. */
int plugin_load(const char *path, kr_plugin_t **out, kr_error_t *err);

/* Closes the library; the plugin's descriptors become invalid. */
void plugin_unload(kr_plugin_t *p);

const char *plugin_path(const kr_plugin_t *p);     /* as given to plugin_load */
const char *plugin_name(const kr_plugin_t *p);     /* the library's own name */
int plugin_is_gpu(const kr_plugin_t *p);           /* KREPLAY_PLUGIN_GPU */
int plugin_kernel_count(const kr_plugin_t *p);
const kernel_desc_t *plugin_kernel_at(const kr_plugin_t *p, int i);
const kernel_desc_t *plugin_kernel_find(const kr_plugin_t *p, const char *name);

/* Is k a descriptor built by plugin_load (as opposed to a registry kernel)? */
int kernel_is_plugin(const kernel_desc_t *k);
/* Does a plugin descriptor run on the GPU?  0 for registry kernels. */
int plugin_kernel_is_gpu(const kernel_desc_t *k);
/* The plugin's entry for a plugin descriptor, NULL for registry kernels. */
const kreplay_kernel_t *plugin_kernel_entry(const kernel_desc_t *k);

#endif
