"""The generated Python kernels of the held-out corpus (written by make_corpus.py;
frozen).  Each computes through grammar_ref.run_spec with its spec."""
from heldout_operands import bf16_kernel, w4a4_kernel, w4a8_kernel

g17 = w4a8_kernel(['out-cols:tr4x8', 'ws-rows:stride/8'])

g18 = w4a8_kernel(['ws:zero-byte'])

g19 = w4a8_kernel(['ws-rows:rot8+1', 'ws-blocks:stride/4'])

g20 = w4a8_kernel(['acc:k-last-elem-dropped', 'w-k:rot16+1'])

g21 = w4a4_kernel(['ws-rows:first16', 'w-k:stride/8'])

g22 = w4a4_kernel(['ws-blocks:tr8x8', 'x-k:rev32'])

g23 = w4a4_kernel(['out-cols:tr2x4', 'ws-rows:reverse'])

g24 = w4a4_kernel(['w:wperm-undone'])

g25 = w4a4_kernel(['x-k:rev64'])

g26 = w4a4_kernel(['ws-blocks:tr2x2'])

g27 = w4a4_kernel(['w-k:tr16x2', 'x-rows:tr8x4'])

g28 = w4a4_kernel(['acc:split4-first-twice', 'out-cols:rev16'])

g29 = bf16_kernel(['x-k:tr4x8', 'x-k:tr8x8'])

g30 = bf16_kernel(['out-cols:tr2x8', 'out-rows:rot4-1'])

g31 = bf16_kernel(['x:fp16'])

g32 = bf16_kernel(['x-k:reverse', 'out-cols:first8'])

g33 = bf16_kernel(['out-cols:rev16', 'w-rows:next'])

g34 = bf16_kernel(['out-cols:tr2x4', 'x-k:prev'])

g35 = bf16_kernel(['x-k:rot16+1'])

g36 = bf16_kernel(['out-cols:rev64', 'out-cols:stride*8'])
