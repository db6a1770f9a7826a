"""The generated Python kernels of the third held-out corpus (written by
make_corpus.py; frozen).  Each computes through grammar_ref.run_spec with its spec."""
from heldout_operands import bf16_kernel, w4a4_kernel, w4a8_kernel

g3_17 = w4a8_kernel(['xs-rows:rev8'])

g3_18 = w4a8_kernel(['acc:carry-m16', 'out-cols:stride*4'])

g3_19 = w4a8_kernel(['x-rows:mod16', 'w-rows:first16'])

g3_20 = w4a8_kernel(['ws-blocks:first4', 'w-rows:first16'])

g3_21 = w4a4_kernel(['x:lo-neg'])

g3_22 = w4a4_kernel(['out-cols:prev16'])

g3_23 = w4a4_kernel(['w-rows:rot64+1', 'ws-rows:rev32'])

g3_24 = w4a4_kernel(['acc:k-first-tile-twice', 'ws-blocks:tr2x4'])

g3_25 = w4a4_kernel(['x-k:mod4', 'ws-blocks:rev16'])

g3_26 = w4a4_kernel(['out-cols:rot64+1', 'w-rows:swap64'])

g3_27 = w4a4_kernel(['x:lo-neg', 'ws-blocks:tr4x4'])

g3_28 = w4a4_kernel(['x-k:rev8', 'x-k:next'])

g3_29 = bf16_kernel(['w-rows:mod8'])

g3_30 = bf16_kernel(['out-cols:mod8', 'w:neg-zero'])

g3_31 = bf16_kernel(['w-rows:mod16', 'out-cols:tr16x4'])

g3_32 = bf16_kernel(['w:round-e5m2', 'w-k:rot64-1'])

g3_33 = bf16_kernel(['w-rows:mod8', 'out-cols:tr8x4'])

g3_34 = bf16_kernel(['x-rows:tr8x2', 'w-rows:rot4-1'])

g3_35 = bf16_kernel(['x-k:mod4', 'acc:split2-first-twice'])

g3_36 = bf16_kernel(['x-k:half', 'x-rows:first32'])
