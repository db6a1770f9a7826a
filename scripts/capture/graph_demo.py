#!/usr/bin/env python3
"""The capture hook under real CUDA graphs: what it captures eagerly, what it reports while a
graph is captured and replayed, and how the eager window captures the decode band.

    python3 scripts/capture/graph_demo.py --out DIR [--kreplay build/kreplay] [--device auto]

A small torch module (two bf16 linears, each through a dispatch-like op wrapped with
kreplay.capture's capture_linear, kind "skinny_gemm": fn(x, weight [N, K] bf16) -> x @ W^T)
runs in five phases, each dumping into its own folder under DIR:

  1 eager       the module at a prefill M and a decode M, eagerly: both are dumped.
  2 graph       captured into a torch.cuda.CUDAGraph at a decode M (the hook sees the stream
                capturing and dumps nothing), then replayed (no Python runs: nothing dumped).
  3 window      a serving loop that replays per-M graphs for the decode band and runs larger
                M eagerly, as vLLM V1's CUDAGraphWrapper does; the hook's eager window
                (eager_window(N)) turns the next N real steps to eager, so their decode-band
                calls are dumped.  vLLM is not needed: the forward context this loop keeps
                has the names the hook reads (vllm.forward_context's get/set_forward_context,
                cudagraph_runtime_mode) and is installed under that module name only when
                vLLM itself is not importable.
  4 compile     torch.compile(mode="reduce-overhead") over the module with the op registered
                by torch.library.custom_op (torch >= 2.4), when it compiles offline.
  5 replay      `kreplay inspect` and `kreplay replay --kernels 'bf16.*'` on every dump.

Without a CUDA device (or --device cpu) phases 2 and 4 are skipped with a line saying so, and
phase 3's graph steps call the op without the hook, which is what a graph replay amounts to
for the hook: everything else runs.  Exit status: 0 when every phase that ran did what it
should, 1 otherwise (the report says which).
"""
import argparse
import contextlib
import enum
import glob
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

from kreplay import capture as kc  # noqa: E402

# The layers: the MoE router gate's production shape, and a second linear on its output.
LAYERS = (("demo.gate", 256, 2048), ("demo.proj", 512, 256))
PREFILL_M, DECODE_M = 300, 8
DECODE_BAND = (1, 2, 4, 8, 16, 32, 64)       # the per-M graphs phase 3 captures

REPORT = []
FAILED = []


def say(line):
    REPORT.append(line)
    print(line, flush=True)


def expect(cond, what):
    say(("  ok    " if cond else "  FAIL  ") + what)
    if not cond:
        FAILED.append(what)


def dumps(folder):
    return sorted(glob.glob(os.path.join(folder, "case_*")))


def dumped_ms(folder):
    return sorted({int(os.path.basename(p).split("_M")[1].split("_")[0]) for p in dumps(folder)})


# ---- the module ---------------------------------------------------------------------------

def skinny_gemm(x, weight):
    """The dispatch-like op: bf16 x bf16 -> bf16 (torch's matmul)."""
    return torch.matmul(x, weight.t())


class TwoLinear(torch.nn.Module):
    def __init__(self, op, device):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.op = op
        self.w = torch.nn.ParameterList(
            torch.nn.Parameter((torch.randn(n, k, generator=g) / k ** 0.5).to(torch.bfloat16)
                               .to(device), requires_grad=False) for _, n, k in LAYERS)

    def forward(self, x):
        return self.op[1](self.op[0](x, self.w[0]), self.w[1])


def hooked_ops():
    """Each layer's op wrapped by capture_linear (the hook runs after the op, in its body)."""
    return [kc.capture_linear(name, kind="skinny_gemm")(skinny_gemm) for name, _, _ in LAYERS]


def inputs(M, device, seed=1):
    g = torch.Generator().manual_seed(seed + M)
    return torch.randn(M, LAYERS[0][2], generator=g).to(torch.bfloat16).to(device)


def configure(folder, per_key=1):
    os.makedirs(folder, exist_ok=True)
    return kc.configure(directory=folder, fmt="pt", max_files=64, per_key=per_key)


def custom_op(i, body):
    """body registered as torch.library.custom_op kreplay_demo::gemm<i> (the hook inside)."""
    def gemm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return body(x, weight)
    op = torch.library.custom_op(f"kreplay_demo::gemm{i}", mutates_args=())(gemm)

    def fake(x, weight):
        return x.new_empty(x.shape[0], weight.shape[0])
    op.register_fake(fake)
    return op


# ---- phases -------------------------------------------------------------------------------

def phase_eager(out, device):
    say(f"== 1 eager: M={PREFILL_M} and M={DECODE_M}, no graph")
    folder = os.path.join(out, "eager")
    cap = configure(folder)
    model = TwoLinear(hooked_ops(), device)
    for M in (PREFILL_M, DECODE_M):
        cap.step()
        model(inputs(M, device))
    say(f"  dumped {len(dumps(folder))} files, M {dumped_ms(folder)}")
    expect(dumped_ms(folder) == sorted((PREFILL_M, DECODE_M)) and len(dumps(folder)) == 4,
           "eager calls of both layers at both M are dumped")


def phase_graph(out, device):
    say(f"== 2 graph: torch.cuda.CUDAGraph at M={DECODE_M}")
    if device.type != "cuda":
        say("  skipped: no CUDA device (torch.cuda.is_available() is False)")
        return
    folder = os.path.join(out, "graph")
    cap = configure(folder)
    model = TwoLinear(hooked_ops(), device)
    x = inputs(DECODE_M, device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), kc.warmup():     # warm-up runs: never dumped
        model(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    after_capture = len(dumps(folder))
    say(f"  during capture: {cap.skipped_capturing} calls seen capturing, "
        f"{after_capture} dumped")
    expect(cap.skipped_capturing == 2 and after_capture == 0,
           "the hook sees both calls capturing and dumps neither")
    for i in range(3):
        cap.step()
        x.copy_(inputs(DECODE_M, device, seed=10 + i))
        g.replay()
    torch.cuda.synchronize()
    eager = model(x)
    say(f"  after 3 replays: {len(dumps(folder))} dumped (the op body never runs under replay); "
        f"replay output == eager output: {bool(torch.equal(y, eager))}")
    expect(len(dumps(folder)) == 2 and cap.files == 2,
           "only the eager check call after the replays is dumped (2 files)")


class Mode(enum.Enum):
    NONE = 0
    FULL = 2


class ForwardContext:
    def __init__(self, attn_metadata, mode):
        self.attn_metadata = attn_metadata
        self.cudagraph_runtime_mode = mode
        self.batch_descriptor = None


def forward_context_stub(make_context, default_mode):
    """A vllm.forward_context module with the names the hook reads: get_forward_context,
    is_forward_context_available and set_forward_context(attn_metadata, mode=default_mode), a
    context manager that makes make_context(attn_metadata, mode) current.  Registers nothing:
    also for other stand-ins of vLLM that import this script."""
    state = {"ctx": None}
    fc = types.ModuleType("vllm.forward_context")
    fc.get_forward_context = lambda: state["ctx"]
    fc.is_forward_context_available = lambda: state["ctx"] is not None

    @contextlib.contextmanager
    def set_forward_context(attn_metadata, mode=default_mode):
        prev, state["ctx"] = state["ctx"], make_context(attn_metadata, mode)
        try:
            yield
        finally:
            state["ctx"] = prev
    fc.set_forward_context = set_forward_context
    return fc


def forward_context_module():
    """vllm.forward_context: vLLM's own when importable, else one with the names the hook reads."""
    try:
        import vllm.forward_context as fc    # noqa: F401
        return fc, "vLLM's"
    except Exception:
        pass
    fc = forward_context_stub(ForwardContext, Mode.FULL)
    sys.modules.setdefault("vllm", types.ModuleType("vllm"))
    sys.modules["vllm.forward_context"] = fc
    return fc, "this script's (vLLM is not importable)"


class GraphServe:
    """Per-M graphs for the decode band, eager above it; the forward context's
    cudagraph_runtime_mode NONE makes a step eager (vLLM V1's CUDAGraphWrapper rule)."""

    def __init__(self, fc, device):
        self.fc, self.device = fc, device
        self.model = TwoLinear(hooked_ops(), device)
        self.plain = TwoLinear([skinny_gemm, skinny_gemm], device)   # what a replay runs
        self.plain.load_state_dict(self.model.state_dict())
        self.graphs = {}
        if device.type == "cuda":
            for M in DECODE_BAND:
                x = inputs(M, device)
                with kc.warmup():
                    self.model(x)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    y = self.model(x)
                self.graphs[M] = (g, x, y)

    def step(self, M):
        with self.fc.set_forward_context({"step": M}):
            ctx = self.fc.get_forward_context()
            graph = M in DECODE_BAND and ctx.cudagraph_runtime_mode != Mode.NONE
            x = inputs(M, self.device, seed=100)
            if not graph:
                return self.model(x), "eager"
            if self.device.type != "cuda":
                return self.plain(x), "graph (CPU: the op without the hook)"
            g, xs, ys = self.graphs[M]
            xs.copy_(x)
            g.replay()
            return ys, "graph replay"


def phase_window(out, device):
    say("== 3 eager window: decode band under graphs, eager_window(3)")
    folder = os.path.join(out, "window")
    fc, whose = forward_context_module()
    say(f"  forward context: {whose}")
    cap = configure(folder)
    serve = GraphServe(fc, device)
    if device.type == "cuda":
        say(f"  captured {len(serve.graphs)} graphs (M {sorted(serve.graphs)}); hook saw "
            f"{cap.skipped_capturing} calls capturing, dumped {len(dumps(folder))}")
    steps = (1, 16, 512, 64)
    ran = [f"M={M}: {serve.step(M)[1]}" for M in steps]
    before = dumped_ms(folder)
    say(f"  before the window: {'; '.join(ran)} -> dumped M {before}")
    expect(before == [512], "without the window only the eager (non-decode) M is dumped")
    opened = kc.eager_window(3)
    ran = [f"M={M}: {serve.step(M)[1]}" for M in (1, 16, 64, 32)]
    inside = [m for m in dumped_ms(folder) if m != 512]
    say(f"  window opened: {opened}; {'; '.join(ran)} -> decode-band M dumped {inside}")
    expect(opened and inside == [1, 16, 64],
           "the window's 3 steps (M 1, 16, 64) are dumped, the 4th (M 32) replays again")


def phase_compile(out, device):
    say('== 4 torch.compile(mode="reduce-overhead")')
    if device.type != "cuda":
        say("  skipped: no CUDA device (reduce-overhead is CUDA graphs)")
        return
    if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
        say(f"  skipped: torch {torch.__version__} has no torch.library.custom_op")
        return
    folder = os.path.join(out, "compile")
    cap = configure(folder, per_key=100)    # every eager run of the op body would dump
    try:
        ops = [custom_op(i, body) for i, body in enumerate(hooked_ops())]
        model = torch.compile(TwoLinear(ops, device), mode="reduce-overhead", fullgraph=True)
        outcomes = []
        for i in range(5):
            cap.step()
            model(inputs(DECODE_M, device, seed=200 + i))
            torch.cuda.synchronize()
            outcomes.append(len(dumps(folder)))
    except Exception as e:
        say(f"  did not run: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return
    say(f"  files after each of 5 calls at M={DECODE_M}: {outcomes}; hook saw "
        f"{cap.skipped_capturing} calls capturing/tracing")
    expect(outcomes[0] > 0 and outcomes[-1] == outcomes[2],
           "the warm-up call's op bodies are dumped; once the graph is recorded (call 3 on) "
           "replays dump nothing more")


def phase_replay(out, kreplay):
    say("== 5 kreplay inspect / replay on the dumps")
    files = sorted(glob.glob(os.path.join(out, "*", "case_*")))
    if not files:
        expect(False, "some dump to replay")
        return
    if not kreplay or not os.access(kreplay, os.X_OK):
        say(f"  skipped: no kreplay binary at {kreplay!r} (--kreplay)")
        return
    ins = subprocess.run([kreplay, "inspect", files[0]], capture_output=True, text=True)
    say(f"  kreplay inspect {os.path.relpath(files[0], out)}: exit {ins.returncode}")
    for line in ins.stdout.splitlines()[:6]:
        say("    " + line)
    rep = subprocess.run([kreplay, "replay", "--kernels", "bf16.*", *files],
                         capture_output=True, text=True)
    tail = [ln for ln in rep.stdout.splitlines() if ln.strip()][-3:]
    say(f"  kreplay replay --kernels 'bf16.*' on {len(files)} dumps: exit {rep.returncode}")
    for line in tail:
        say("    " + line)
    if rep.returncode not in (0, 1):
        say("    " + (rep.stderr.strip().splitlines() or [""])[-1])
    expect(ins.returncode == 0 and rep.returncode in (0, 1),
           "the dumps inspect and replay (exit 0 or 1: a verdict, not an input error)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="where the dumps go (one folder per phase)")
    ap.add_argument("--kreplay", default=os.path.join(HERE, "..", "..", "build", "kreplay"))
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    a = ap.parse_args()
    cuda = torch.cuda.is_available() if a.device == "auto" else a.device == "cuda"
    device = torch.device("cuda" if cuda else "cpu")
    say(f"graph_demo: torch {torch.__version__}, device {device}"
        + (f" ({torch.cuda.get_device_name(0)})" if cuda else ""))
    for phase in (phase_eager, phase_graph, phase_window, phase_compile):
        try:
            phase(a.out, device)
        except Exception as e:
            expect(False, f"{phase.__name__} raised {type(e).__name__}: {e}")
    phase_replay(a.out, a.kreplay)
    say(f"== graph_demo: {'all phases as expected' if not FAILED else f'{len(FAILED)} FAILED'}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
