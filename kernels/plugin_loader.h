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
 *     maxima), then calls the plugin's launch on host buffers (a CPU
 *     plugin; a GPU plugin's kernels are launched by the GPU worker on
 *     device copies, harness/engine/gpu_session.h), with the output
 *     poisoned (bf16 0x7FC1) and between guard bytes covering a whole tile
 *     past the last row and column.  A nonzero
 *     return fails the run with a message (an ERROR row), a guard write
 *     with PLUGIN_RUN_OUT_OF_BOUNDS (an OOB_WRITE row); unwritten elements
 *     are counted in the run's note; a crash or hang is the caller's to
 *     contain (harness/common/isolate.h).
 * The descriptors live in the returned kr_plugin_t and are valid until
 * plugin_unload(); nothing here keeps global state.
 *
 * Nothing here touches a GPU: kreplay's process never initializes the GPU
 * runtime, so the workers it forks can. */
#ifndef KR_PLUGIN_LOADER_H
#define KR_PLUGIN_LOADER_H

#include <stddef.h>
#include <stdint.h>

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
/* Does a plugin descriptor keep state across launches (KREPLAY_PLUGIN_PERSISTENT:
 * launched in one worker process for the whole run)?  0 for registry kernels. */
int plugin_kernel_is_persistent(const kernel_desc_t *k);
/* The plugin's last_error text (never NULL) for a plugin descriptor. */
const char *plugin_kernel_last_error(const kernel_desc_t *k);

/* ---- what the GPU worker shares with the host run ---- */

/* The bf16 pattern `out` is filled with before a launch: a NaN no kernel
 * writes (NaN outputs are 0x7FC0 / 0xFFC0), so an element left holding it
 * was not written.  The guards around it hold PLUGIN_GUARD_BYTE. */
#define PLUGIN_POISON_BF16 0x7FC1u
#define PLUGIN_GUARD_BYTE 0xA5

/* The operands laid out as plugin kernel k declared them, on the host:
 * the weight in checkpoint or fragment order, the scales in its layout,
 * weight_ref NULL or the [N] row maxima (the case's when it has N). */
typedef struct {
    const uint8_t *weight;
    const uint8_t *scales;
    const uint8_t *ref;         /* NULL for KREPLAY_WREF_NONE */
    uint8_t *owned[3];
} plugin_layout_t;

int plugin_layout(const kernel_desc_t *k, const kernel_inputs_t *in, plugin_layout_t *h,
                  kr_error_t *err);
void plugin_layout_free(plugin_layout_t *h);

/* The guard bytes on each side of an [M, N] bf16 output: 128 rows and
 * columns past it, at least 4 KiB, a multiple of 64. */
size_t plugin_guard_bytes(int64_t N);

/* What a scan of both guards found (indices within each guard). */
typedef struct {
    size_t guard;
    int64_t n_before, last_before;              /* changed bytes before out, the nearest */
    int64_t n_after, first_after, last_after;   /* changed bytes after out */
} plugin_guard_scan_t;

/* 0 when the guards are intact; otherwise PLUGIN_RUN_OUT_OF_BOUNDS with err
 * saying how many canary bytes changed on each side, where the writes
 * start and what element of the [M, N] grid that is. */
int plugin_guard_report(const char *what, const char *name, const plugin_guard_scan_t *g,
                        int64_t M, int64_t N, kr_error_t *err);

/* The run's note for `count` elements left poisoned, the first at flat index first. */
void plugin_note_unwritten(int64_t count, int64_t first, int64_t M, int64_t N,
                           kernel_run_info_t *info);

#endif
