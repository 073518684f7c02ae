#!/usr/bin/env bash
# tests/models/convert.sh CLI WORK: `CLI convert` against checkpoints the test writes itself.
# `write-model --format hf` writes write-model's random weights as a Hugging Face checkpoint
# (config.json, model.safetensors, vocab.json, merges.txt); converted, it must give exactly the
# bytes `write-model` writes for the same seed and dimensions: an F32 checkpoint into f32, f16 and
# q8_0 files (an F16 checkpoint is checked in test_hf_checkpoint.cpp). The tensor names are
# checked here against transformers' own (written out below, not taken from the converter's
# table), and a broken checkpoint is refused with a message and no file left behind.
set -uo pipefail
cli=$1
work=$2

fail() {
    echo "FAILED: $*"
    exit 1
}
quiet() { # command...: its output only when it fails
    "$@" >"$work/out" 2>&1 || { cat "$work/out"; fail "$*"; }
}

rm -rf "$work"
mkdir -p "$work"
dims=(--state 64 --heads 2 --layers 2 --audio-ctx 32 --text-ctx 24 --seed 7)
quiet "$cli" write-model --format hf --out "$work/hf-f32" "${dims[@]}" --type f32
quiet "$cli" write-model --format hf --out "$work/hf-f16" "${dims[@]}" --type f16

# transformers' names for WhisperForConditionalGeneration (the k_proj has no bias)
header=$(head -c 100000 "$work/hf-f32/model.safetensors" | tail -c +9 | tr -d '\0')
for name in model.encoder.conv1.weight model.encoder.conv2.bias model.encoder.embed_positions.weight \
    model.encoder.layers.1.self_attn.q_proj.weight model.encoder.layers.1.self_attn.k_proj.weight \
    model.encoder.layers.0.self_attn.v_proj.bias model.encoder.layers.0.self_attn.out_proj.bias \
    model.encoder.layers.0.self_attn_layer_norm.weight model.encoder.layers.0.final_layer_norm.bias \
    model.encoder.layers.0.fc1.weight model.encoder.layers.0.fc2.bias model.encoder.layer_norm.weight \
    model.decoder.embed_tokens.weight model.decoder.embed_positions.weight \
    model.decoder.layers.1.encoder_attn.q_proj.weight model.decoder.layers.1.encoder_attn.k_proj.weight \
    model.decoder.layers.1.encoder_attn_layer_norm.bias model.decoder.layers.0.self_attn.out_proj.weight \
    model.decoder.layer_norm.bias; do
    grep -q "\"$name\"" <<<"$header" || fail "the checkpoint has no $name"
done
grep -q "k_proj.bias" <<<"$header" && fail "the checkpoint has a k_proj bias, which whisper has not"
# torch's order of a linear layer's weight: [out, in]; conv: [out, in, kernel]; the conv bias: [n]
grep -q '"model.encoder.layers.0.fc1.weight":{"data_offsets":\[[0-9]*,[0-9]*\],"dtype":"F32","shape":\[256,64\]}' \
    <<<"$header" || fail "fc1.weight is not F32 [256, 64]"
grep -q '"model.encoder.conv1.weight":{[^}]*"shape":\[64,80,3\]}' <<<"$header" || fail "conv1.weight is not [64, 80, 3]"
grep -q '"model.encoder.conv1.bias":{[^}]*"shape":\[64\]}' <<<"$header" || fail "conv1.bias is not [64]"
# GPT-2's byte-level text: token 220 is " ", written U+0120
grep -q '"Ġ":220' "$work/hf-f32/vocab.json" || fail "vocab.json does not give \"Ġ\" (a space) id 220"

# converted: the bytes write-model writes
# (an F16 checkpoint holds its biases and norms in F16 too, so its file differs in those: its
# values are HfCheckpoint.F16CheckpointGivesTheRoundedValues's)
for case in "f32 f32" "f32 f16" "f32 q8_0"; do
    read -r from type <<<"$case"
    quiet "$cli" write-model --out "$work/direct-$type.bin" "${dims[@]}" --type "$type"
    quiet "$cli" convert "$work/hf-$from" --out "$work/converted-$from-$type.bin" --type "$type"
    cat "$work/out"
    cmp "$work/direct-$type.bin" "$work/converted-$from-$type.bin" ||
        fail "the $from checkpoint converted to $type differs from write-model's $type file"
    echo "ok: the $from checkpoint converted to $type equals write-model's file byte for byte"
done

# broken checkpoints: refused with the file and the fault named, no model file left
refused() { # pattern, checkpoint
    rm -f "$work/bad.bin"
    "$cli" convert "$2" --out "$work/bad.bin" >"$work/out" 2>&1
    local rc=$?
    cat "$work/out"
    [ $rc -eq 1 ] || fail "convert exited $rc on a broken checkpoint, not 1"
    grep -Eq -- "$1" "$work/out" || fail "no message matching '$1'"
    [ ! -e "$work/bad.bin" ] && [ ! -e "$work/bad.bin.part" ] || fail "a refused conversion left a file"
}
cp -r "$work/hf-f32" "$work/no-vocab" && rm "$work/no-vocab/vocab.json"
refused "convert: cannot open .*no-vocab/vocab.json" "$work/no-vocab"
cp -r "$work/hf-f32" "$work/wider" && sed -i -e 's/"d_model": 64/"d_model": 128/' -e 's/_ffn_dim": 256/_ffn_dim": 512/' "$work/wider/config.json"
refused "model.safetensors: tensor model.encoder.embed_positions.weight has shape \[32, 64\], not \[32, 128\]" "$work/wider"
cp -r "$work/hf-f32" "$work/cut" && truncate -s 1000000 "$work/cut/model.safetensors"
refused "model.safetensors: tensor .* has bytes [0-9]+\.\.[0-9]+, past the data's" "$work/cut"
cp -r "$work/hf-f32" "$work/other" && sed -i 's/"model_type": "whisper"/"model_type": "llama"/' "$work/other/config.json"
refused "model_type is \"llama\", not \"whisper\"" "$work/other"
echo "PASSED"
