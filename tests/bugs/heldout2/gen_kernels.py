"""The generated Python kernels of the second held-out corpus (written by
make_corpus.py; frozen).  Each computes through grammar_ref.run_spec with its spec."""
from heldout_operands import bf16_kernel, w4a4_kernel, w4a8_kernel

g2_17 = w4a8_kernel(['ws-rows:tr4x8'])

g2_18 = w4a8_kernel(['xs-rows:mod16', 'ws-blocks:stride/2'])

g2_19 = w4a8_kernel(['out-rows:mod32'])

g2_20 = w4a8_kernel(['w-rows:rot4+1', 'ws-blocks:tr8x4'])

g2_21 = w4a4_kernel(['w:lo-neg', 'ws-rows:prev16'])

g2_22 = w4a4_kernel(['w:abs', 'xs-blocks:swap8'])

g2_23 = w4a4_kernel(['xs-rows:first16', 'out:trunc'])

g2_24 = w4a4_kernel(['ws-rows:mod8', 'x-rows:next16'])

g2_25 = w4a4_kernel(['x-k:reverse', 'ws:nk-as-kn'])

g2_26 = w4a4_kernel(['x-rows:swap2', 'acc:carry-n16'])

g2_27 = w4a4_kernel(['acc:carry-n', 'w-rows:stride*2'])

g2_28 = w4a4_kernel(['x-k:mod4', 'ws-blocks:mod4'])

g2_29 = bf16_kernel(['x:mk-as-km'])

g2_30 = bf16_kernel(['out-cols:first16', 'acc:split8-first-dropped'])

g2_31 = bf16_kernel(['acc:k-first-elem-dropped', 'w-k:swap64'])

g2_32 = bf16_kernel(['acc:fp16-chunk16', 'out-cols:tr4x2'])

g2_33 = bf16_kernel(['w-rows:mod8', 'acc:k-last-elem-twice'])

g2_34 = bf16_kernel(['w-rows:prev', 'w:neg-zero'])

g2_35 = bf16_kernel(['out-rows:tr4x8', 'out-rows:stride/2'])

g2_36 = bf16_kernel(['out-cols:tr8x2', 'w-rows:tr2x4'])
