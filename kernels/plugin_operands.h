/* The named operands of plugin.h's launch_named: what a plugin kernel asks
 * for by name ("x", "x_mxfp4", "w_folded", ...), computed from the case and
 * the prepared activations on first request and kept until the launch ends.
 *
 * The source never quantizes activations itself: x_fp8/x_scale and
 * x_mxfp4/x_mxfp4_scale are the kernel_act_t the descriptor's prepare_act
 * built (the operands-of kernel's, so they are the bits its model and its
 * R_exact see).  The folded weight is folded_weight.h's plan, the one every
 * W4A8 folded model sums with. */
#ifndef KR_PLUGIN_OPERANDS_H
#define KR_PLUGIN_OPERANDS_H

#include <stdint.h>

#include "plugin.h"
#include "registry.h"

#define PLUGIN_OPERANDS_MAX 16

/* The weight in the layouts the kernel declared (NULL when the case has no
 * MXFP4 weight). */
typedef struct {
    const uint8_t *weight;      /* [N, K/2] */
    const uint8_t *scales;      /* [K/32, N] or [N, K/32] */
    const uint8_t *ref;         /* [N] or NULL */
} plugin_weight_view_t;

typedef struct {
    char name[24];
    void *data;
    int64_t bytes;
} plugin_operand_t;

/* Operands built so far (owned) and the reason of the last refusal. */
typedef struct {
    plugin_operand_t built[PLUGIN_OPERANDS_MAX];
    int count;
    char why[320];
} plugin_operand_cache_t;

struct kreplay_operand_source {
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    plugin_weight_view_t weight;
    plugin_operand_cache_t *cache;  /* mutable behind the const source the ABI passes */
};

void plugin_operands_init(kreplay_operand_source_t *src, plugin_operand_cache_t *cache,
                          const kernel_inputs_t *in, const kernel_act_t *act,
                          const plugin_weight_view_t *weight);

/* plugin.h's kreplay_get_operand_fn. */
int plugin_operands_get(const kreplay_operand_source_t *src, const char *name, const void **data,
                        int64_t *bytes);

void plugin_operands_free(kreplay_operand_source_t *src);

#endif
