/* The operand misreads the diagnosis tries (misread.h says how each is
 * evaluated).  Order does not matter: every entry is evaluated and they are
 * ranked by residual. */
#include "misread.h"

const misread_t misread_table[] = {
    {"nibble-order", "the kernel reads element 2j of the packed weight from the HIGH nibble "
                     "(the nibbles of each byte swapped)", .w = MR_W_NIBBLES_SWAPPED},
    {"e2m1-sign", "the kernel ignores the e2m1 sign bit (|w| for every weight)",
     .w = MR_W_SIGN_IGNORED},
    {"scale-k-next", "each 32-block takes the NEXT block's e8m0 exponent (scale index shifted "
                     "along K by +1)", .si = MR_S_K_NEXT},
    {"scale-k-prev", "each 32-block takes the PREVIOUS block's e8m0 exponent (scale index "
                     "shifted along K by -1)", .si = MR_S_K_PREV},
    {"scale-n-next", "each weight row takes the NEXT row's e8m0 exponents (scale index shifted "
                     "along N by +1)", .si = MR_S_N_NEXT},
    {"scale-n-prev", "each weight row takes the PREVIOUS row's e8m0 exponents (scale index "
                     "shifted along N by -1)", .si = MR_S_N_PREV},
    {"scale-kn-read-as-nk", "the kernel reads its [K/32, N] e8m0 scales as [N, K/32] (scale "
                            "layout transposed)", .si = MR_S_KN_AS_NK},
    {"scale-nk-read-as-kn", "the kernel reads its [N, K/32] e8m0 scales as [K/32, N] (scale "
                            "layout transposed)", .si = MR_S_NK_AS_KN},
    {"scale-twice", "the block scale 2^(E-127) is applied twice", .sv = MR_SV_TWICE},
    {"e8m0-bias-128", "e8m0 decoded with bias 128 (2^(E-128))", .sv = MR_SV_BIAS_128},
    {"e8m0-bias-126", "e8m0 decoded with bias 126 (2^(E-126))", .sv = MR_SV_BIAS_126},
    {"fp8-e4m3fnuz", "the fp8 activations are decoded as e4m3fnuz (bias 8), not e4m3fn",
     .xa = MR_X_E4M3FNUZ},
    {"fp8-e5m2", "the fp8 activations are decoded as e5m2, not e4m3", .xa = MR_X_E5M2},
    {"fp8-e4m3fn", "the fp8 activations are decoded as e4m3fn, not e4m3fnuz", .xa = MR_X_E4M3FN},
    {"x_scale-inverted", "the kernel divides by x_scale[m] instead of multiplying",
     .xs = MR_XS_INVERTED},
    {"x_scale-by-column", "x_scale is indexed by the output column (x_scale[n]), not the row",
     .xs = MR_XS_BY_COLUMN},
    {"x_scale-missing", "x_scale is never applied", .xs = MR_XS_MISSING},
    {"x_scale-twice", "x_scale is applied twice", .xs = MR_XS_TWICE},
};

const int misread_count = (int)(sizeof misread_table / sizeof misread_table[0]);
