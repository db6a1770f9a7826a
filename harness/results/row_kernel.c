#include "row_kernel.h"

#include "registry.h"

int row_kernel_is_quantizer(const char *kernel)
{
    const kernel_desc_t *k = kernel ? kernel_find(kernel) : NULL;
    return k && k->op == KERNEL_OP_QUANT;
}

int row_kernel_is_w4a8(const char *kernel)
{
    return kernel && kernel_is_w4a8(kernel_find(kernel));
}

static const char *role_name(compare_role_t role)
{
    const kernel_desc_t *k = kernel_for_role(role);
    return k ? k->name : NULL;
}

const char *row_kernel_w4a8_production(void)
{
    return role_name(COMPARE_ROLE_W4A8_PRODUCTION);
}

const char *row_kernel_w4a8_model(void)
{
    return role_name(COMPARE_ROLE_W4A8_MODEL);
}

const char *row_kernel_w4a4(void)
{
    return role_name(COMPARE_ROLE_W4A4_EMULATION);
}
