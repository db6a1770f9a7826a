"""Python kernels that fail on purpose, for tests/test_py_kernel.c: each failure must become
its own row (ERROR, CRASHED, TIMEOUT) while the rest of the run goes on."""
import ctypes
import time


def raises(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    raise ValueError(f"refusing M={M} on purpose")


def segfaults(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    ctypes.string_at(0)          # reads address 0: SIGSEGV in the interpreter


def sleeps(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    time.sleep(3600)


def wrong_dtype(x_fp8, weight, weight_scale, weight_ref, x_scale, M, N, K):
    import torch
    return torch.zeros(M, N, dtype=torch.float32)
