"""What the capture hook learns from the serve around a call, without a device sync and
without importing anything the serve has not: vLLM's forward context (warm-ups, dummy runs,
steps) and CUDA-graph mode, the eager window, and the provenance a dump records (library
versions, GPU architecture, TP rank, the kernel's extension module).  Every look is guarded:
a serve's other vLLM version or runtime gives None, never an exception."""
import contextlib
import os
import sys

import numpy as np

from .case_writer import _is_torch

# --------------------------------------------------------------------------------------------
# vLLM: forward context (warm-ups, steps), graph mode, eager window -- all guarded
# --------------------------------------------------------------------------------------------

def _vllm_forward_context():
    """vLLM's current ForwardContext, or None (vLLM not imported, no context set, another API).
    Never imports vLLM: a serve that runs vLLM has it in sys.modules already."""
    fc = sys.modules.get("vllm.forward_context")
    if fc is None:
        return None
    try:
        avail = getattr(fc, "is_forward_context_available", None)
        if avail is not None and not avail():
            return None
        return fc.get_forward_context()
    except Exception:
        return None


def _is_dummy_context(ctx):
    """vLLM's profile run and its dummy warm-up runs set a forward context without attention
    metadata (attn_metadata None); a real step always has it."""
    return ctx is not None and hasattr(ctx, "attn_metadata") and ctx.attn_metadata is None


def _vllm_graph_note():
    """One line on what CUDA-graph replay hides, from vLLM's config; None when it hides
    nothing or vLLM's config cannot be read."""
    cfg_mod = sys.modules.get("vllm.config")
    if cfg_mod is None:
        return None
    try:
        cfg = cfg_mod.get_current_vllm_config()
        if getattr(getattr(cfg, "model_config", None), "enforce_eager", False):
            return None
        comp = getattr(cfg, "compilation_config", None)
        mode = getattr(comp, "cudagraph_mode", None)
        if mode is not None and str(getattr(mode, "name", mode)).upper() == "NONE":
            return None
        sizes = getattr(comp, "cudagraph_capture_sizes", None) or []
        top = getattr(comp, "max_cudagraph_capture_size", None) or (max(sizes) if sizes else None)
    except Exception:
        return None
    band = f"M <= {top}" if top else "the captured batch sizes"
    return (f"CUDA graphs are on (cudagraph_mode={getattr(mode, 'name', mode)}): calls at {band} "
            "replay a captured graph and the op body -- this hook -- never runs, so the decode "
            "band is not captured; set KREPLAY_CAPTURE_EAGER_STEPS=N (the next N real steps run "
            "without graph replay) or serve with --enforce-eager to capture it")


class _EagerWindow:
    """Makes the next `steps` forward passes run without CUDA-graph replay by setting the
    forward context's cudagraph_runtime_mode to NONE as vLLM V1 creates it (CUDAGraphWrapper
    then calls the eager callable, whose op bodies run this hook).  Installs itself by wrapping
    set_forward_context in vllm.forward_context and in every module that imported the name."""

    def __init__(self):
        self.left = 0
        self.installed = False
        self.opened = 0

    def open(self, steps, say):
        fc = sys.modules.get("vllm.forward_context")
        if fc is None or not hasattr(fc, "set_forward_context"):
            say("eager window: vLLM's forward context is not loaded; nothing to switch "
                "(graphs stay as the serve configured them)")
            return False
        self.left = int(steps)
        if not self.installed:
            orig = fc.set_forward_context
            window = self

            @contextlib.contextmanager
            def set_forward_context(*a, **kw):
                with orig(*a, **kw) as r:
                    window._apply(fc)
                    yield r
            set_forward_context.__wrapped__ = orig
            for mod in list(sys.modules.values()):
                try:
                    if getattr(mod, "set_forward_context", None) is orig:
                        mod.set_forward_context = set_forward_context
                except Exception:
                    pass
            self.installed = True
        say(f"eager window: the next {self.left} real steps run without CUDA-graph replay")
        return True

    def _apply(self, fc):
        if self.left <= 0:
            return
        try:
            ctx = fc.get_forward_context()
        except Exception:
            return
        if _is_dummy_context(ctx) or not hasattr(ctx, "cudagraph_runtime_mode"):
            return
        try:
            none = type(ctx.cudagraph_runtime_mode).NONE
        except Exception:
            return
        ctx.cudagraph_runtime_mode = none
        if hasattr(ctx, "batch_descriptor"):
            ctx.batch_descriptor = None
        self.left -= 1
        self.opened += 1


# --------------------------------------------------------------------------------------------
# provenance: versions, GPU architecture, TP rank, the loaded extension
# --------------------------------------------------------------------------------------------

def _versions():
    """"torch=2.5.1\nvllm=0.27.0\nrocm=6.3.1" (cuda=... instead of rocm on NVIDIA); only the
    libraries the serve has imported, plus numpy."""
    lines = [f"numpy={np.__version__}"]
    torch = sys.modules.get("torch")
    if torch is not None:
        lines.append(f"torch={getattr(torch, '__version__', '?')}")
        ver = getattr(torch, "version", None)
        if getattr(ver, "hip", None):
            lines.append(f"rocm={ver.hip}")
        elif getattr(ver, "cuda", None):
            lines.append(f"cuda={ver.cuda}")
    vllm = sys.modules.get("vllm")
    if vllm is not None:
        lines.append(f"vllm={getattr(vllm, '__version__', '?')}")
    return "\n".join(lines)


def _gpu_arch(t):
    """"gfx1201" / "sm_90" for a tensor on a GPU, "cpu" for a host tensor or array."""
    if not _is_torch(t) or t.device.type == "cpu":
        return "cpu"
    try:
        import torch
        p = torch.cuda.get_device_properties(t.device)
        arch = getattr(p, "gcnArchName", None)
        return arch.split(":")[0] if arch else f"sm_{p.major}{p.minor}"
    except Exception:
        return t.device.type


def _tp_rank():
    """vLLM's tensor-parallel rank, else torch.distributed's rank, else $RANK, else 0."""
    ps = sys.modules.get("vllm.distributed.parallel_state")
    if ps is not None:
        try:
            return int(ps.get_tensor_model_parallel_rank())
        except Exception:
            pass
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def _extension_path(module_name):
    mod = sys.modules.get(module_name) if module_name else None
    return getattr(mod, "__file__", None) if mod is not None else None
