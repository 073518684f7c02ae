#pragma once

// Hugging Face whisper checkpoints (transformers' WhisperForConditionalGeneration as saved by
// save_pretrained) and whisper.cpp's model files, both ways:
//   convert_hf_checkpoint   a checkpoint folder -> a whisper.cpp model file (wsp-ggml-cli convert)
//   write_hf_checkpoint     write-model's random model as a checkpoint folder, for the converter's
//                           test (wsp-ggml-cli write-model --format hf)
// A checkpoint folder holds config.json (the dimensions), model.safetensors (an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
// tensors), and the tokenizer's vocab.json (GPT-2's byte-level text of each token -> id). The
// tokenizer's merges.txt is not read: whisper.cpp's tokenizer matches the longest known token.
// The mel filterbank, which a checkpoint does not hold, is computed (slaney_mel_filters).

#include "model/whisper_file.h"

#include <string>
#include <vector>

namespace wsp::model {

// The checkpoint's name of a tensor of whisper.cpp's file ("encoder.blocks.0.attn.query.weight" ->
// "model.encoder.layers.0.self_attn.q_proj.weight"); empty for a name it does not know.
std::string hf_tensor_name(const std::string & whisper_name);

// GPT-2's byte-level alphabet: each byte as the one character the tokenizer's files write for it
// (printable bytes as themselves, the others shifted above U+0100; ' ' is U+0120 'Ġ'), and back.
std::string hf_bytes_to_text(const std::string & bytes);
bool        hf_text_to_bytes(const std::string & text, std::string & bytes); // false: not of the alphabet

struct ConvertReport {
    WhisperFileConfig cfg;
    size_t            n_tensors = 0;
    size_t            n_tokens  = 0;
    size_t            bytes     = 0;
    std::string       source_dtype; // of the checkpoint's weights: F32, F16 or BF16 (mixed: "F32+F16")
};

// Converts the checkpoint in dir into a whisper.cpp model file at out with wtype mat-mul weights
// (f32, f16 or a quantized type whisper.cpp's files hold). False with a message naming the file and
// the tensor or key at fault, and no file left behind, when the checkpoint is incomplete, of
// another model, or holds a tensor of the wrong shape or dtype.
bool convert_hf_checkpoint(const std::string & dir, wsp_ggml_type wtype, const std::string & out,
                           ConvertReport * report, std::string * error);

// Writes write-model's random model of cfg (its values and vocab) as a checkpoint folder, with the
// tensors in dtype F32 or F16. False with a message on an I/O error or invalid dimensions.
bool write_hf_checkpoint(const WhisperFileConfig & cfg, const std::string & dir, wsp_ggml_type dtype,
                         std::string * error);

} // namespace wsp::model
