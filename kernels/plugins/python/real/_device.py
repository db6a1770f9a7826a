"""What every real kernel here shares: the CUDA device, loud checks, the bf16 answer."""
import os


def check(cond, what, got):
    """assert with what was expected and what came: a device run must say why in one go."""
    if not cond:
        raise AssertionError(f"{what}; got {got}")


def cuda():
    """The device to run on: the GPU kreplay's worker uses (KREPLAY_PY_DEVICE, under
    --device gpu, where the operands already lie there), else the current CUDA device."""
    import torch
    check(torch.cuda.is_available(), "a CUDA device (these kernels run on the GPU)",
          f"torch {torch.__version__}, cuda available False, "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}")
    return torch.device(os.environ.get("KREPLAY_PY_DEVICE") or "cuda")


def to_cpu_bf16(out, M, N):
    import torch
    check(out.dtype == torch.bfloat16, "a bf16 result", out.dtype)
    check(tuple(out.shape) == (M, N), f"a [{M}, {N}] result", list(out.shape))
    return out.detach().to("cpu").contiguous()


def bytes_as(t, dtype):
    """A uint8 CPU tensor reinterpreted as a torch float8 dtype (same bits)."""
    import torch
    check(t.dtype == torch.uint8, "uint8 byte codes", t.dtype)
    return t.view(dtype)
