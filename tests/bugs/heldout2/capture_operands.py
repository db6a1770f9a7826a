"""Kernels that write the named operands they are given to HELDOUT2_CAPTURE (an .npz) and
return zeros: make_corpus.py replays them on each case to get the operands every corpus
kernel of a route sees, and checks each drawn spec against them (grammar_ref.run_spec)."""
import os

import numpy as np

from heldout_operands import _np


def _save(M, N, K, **ops):
    np.savez(os.environ["HELDOUT2_CAPTURE"], M=M, N=N, K=K, **{k: _np(v) for k, v in ops.items()})
    return np.zeros((M, N), dtype=np.uint16)


def w4a8(x_fp8, weight, weight_scale, x_scale, M, N, K):
    return _save(M, N, K, x_fp8=x_fp8, weight=weight, weight_scale=weight_scale, x_scale=x_scale)


def w4a4(x_mxfp4, x_mxfp4_scale, weight, weight_scale, M, N, K):
    return _save(M, N, K, x_mxfp4=x_mxfp4, x_mxfp4_scale=x_mxfp4_scale, weight=weight,
                 weight_scale=weight_scale)


def bf16(x_bf16, weight_bf16, M, N, K):
    return _save(M, N, K, x_bf16=x_bf16, weight_bf16=weight_bf16)
