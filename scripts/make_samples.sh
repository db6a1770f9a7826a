#!/usr/bin/env bash
# Regenerates the bundled sample cases (cases/samples/) with `kreplay synth`.
# Seeded: running it again gives the same data (tests/test_samples.c checks).
#   scripts/make_samples.sh [KREPLAY_BINARY] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
kreplay=${1:-build/kreplay}
out=${2:-cases/samples}
mkdir -p "$out"
s() { "$kreplay" synth --out "$out" "$@" >/dev/null; }
# The gated-delta-net b/a projection at TP=2 and TP=1, decode band.
s --shape 48x5120 --m 17 --seed 11 --name gdn_in_proj_ba_N48_K5120_M17 \
  --layer "linear_attn.in_proj_ba (TP=2)" --model synthetic
s --shape 96x5120 --m 64 --seed 12 --name gdn_in_proj_ba_N96_K5120_M64 \
  --layer "linear_attn.in_proj_ba (TP=1)" --model synthetic
# The MoE gate shape, a small decode batch.
s --shape 256x2048 --m 8 --seed 13 --name moe_gate_N256_K2048_M8 --layer "mlp.gate" --model synthetic
# A slice of the gdn out_proj (N=5120 K=3072) carrying one whole NaN head in
# its input: 17 rows x 128 columns, as measured on a healthy serve.
s --shape 512x3072 --m 17 --seed 14 --nan-block 17x128@1024 --name gdn_out_proj_slice_N512_K3072_M17_nanhead \
  --layer "linear_attn.out_proj (N sliced to 512)" --model synthetic
# Prefill band, with the layouts production uses after loading: scales
# [K/32, N] and the weight in WPERM fragment order.
s --shape 256x2048 --m 300 --seed 15 --scale-layout kn --fragment-order \
  --name prefill_N256_K2048_M300_kn_wperm --layer "synthetic prefill" --model synthetic
