/* What the registry says about the kernel a results row names, for the
 * readers of rows (reports/) that do not depend on kernels/ themselves.
 * A name the registry does not hold (a plugin, a recorded output, a GPU
 * variant such as "+mma") is no quantizer and holds no role. */
#ifndef KR_ROW_KERNEL_H
#define KR_ROW_KERNEL_H

/* 1 when the row's kernel is a registry quantizer (KERNEL_OP_QUANT). */
int row_kernel_is_quantizer(const char *kernel);

/* 1 when it is a registry W4A8 GEMM (fp8 activations, MXFP4 weight). */
int row_kernel_is_w4a8(const char *kernel);

/* The registry's kernels of the W4A8-vs-W4A4 comparison (compare_role), by
 * name; NULL when the registry has none. */
const char *row_kernel_w4a8_production(void);
const char *row_kernel_w4a8_model(void);
const char *row_kernel_w4a4(void);

#endif
