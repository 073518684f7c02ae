#pragma once

// A writer of whisper.cpp's legacy model files ("ggml" magic, hparams, mel filters, vocab, tensors)
// with random weights of chosen dimensions and weight type, so that tests can run the real
// whisper.cpp against this library without downloading a model. The layout and the tensor types
// follow whisper.cpp's loader and its own quantizer: mat-mul matrices (and the token embedding) in
// the weight type, conv kernels in F16 (F32 for an F32 model), everything else in F32.
// Weights are deterministic per (seed, tensor name): two files that differ only in type or in
// n_audio_ctx hold the same underlying values.

#include "ggml.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace wsp::model {

// Note [audio context]
// whisper.cpp handles any n_audio_ctx in 1..1500: its conv graph takes 2 * n_audio_ctx mel frames from
// the current offset (the mel of the audio plus 30 s of padding; frames beyond are never read) and the
// stride-2 conv makes n_audio_ctx positions, so such a model hears the first n_audio_ctx * 20 ms of
// every 30 s window, as whisper_full's audio_ctx parameter does at run time. The flash-attention path
// attends over n_audio_ctx rounded up to 256 positions of a zero-filled cache without a mask, so its
// results equal the plain path's only when n_audio_ctx is a multiple of 256 (1500 is close to 1536).

struct WhisperFileConfig {
    int32_t       n_vocab       = 51865; // 51864 English-only, 51865 multilingual, 51866 large-v3 layout
    int32_t       n_audio_ctx   = 1500;  // encoder positions: see Note [audio context]
    int32_t       n_audio_state = 384;
    int32_t       n_audio_head  = 6;
    int32_t       n_audio_layer = 4;
    int32_t       n_text_ctx    = 448;
    int32_t       n_text_state  = 384; // whisper.cpp requires n_text_state == n_audio_state
    int32_t       n_text_head   = 6;
    int32_t       n_text_layer  = 4;
    int32_t       n_mels        = 80;
    wsp_ggml_type wtype         = WSP_GGML_TYPE_F16; // type of the mat-mul matrices
    uint64_t      seed          = 1;

    // false with a message when whisper.cpp could not load or run a model of these dimensions
    bool        validate(std::string * error) const;
    std::string describe() const;
};

// The public whisper dimensions (tiny, base, small, medium, large) into cfg; false for another name.
bool whisper_file_preset(const std::string & size, WhisperFileConfig & cfg);

// The weight types a file can hold (whisper.cpp's ftypes): f32, f16, q8_0, q5_1, q5_0, q4_1, q4_0.
bool whisper_file_type(const std::string & name, wsp_ggml_type & type);

// A tensor of the file as whisper.cpp's loader declares it (it checks a record by name, shape and
// byte size): mat-mul matrices and the token embedding in the weight type, conv kernels in F16 (F32
// for an F32 model), everything else in F32.
struct WhisperTensor {
    std::string          name;
    std::vector<int32_t> ne; // ggml order: ne[0] varies fastest
    wsp_ggml_type        type;

    int64_t rows() const {
        int64_t r = 1;
        for (size_t i = 1; i < ne.size(); ++i) {
            r *= ne[i];
        }
        return r;
    }
};

// The file's tensors in the file's order.
std::vector<WhisperTensor> whisper_file_tensors(const WhisperFileConfig & cfg);

// Where a tensor's values come from: rows [r0, r0 + n_rows) of t as F32 into out (n_rows * ne[0]
// values); false with a message. The writer asks for each tensor's rows in order, once.
using WhisperValues =
    std::function<bool(const WhisperTensor & t, int64_t r0, int64_t n_rows, float * out, std::string * error)>;

// write-model's values: a function of cfg.seed and the tensor's name, scaled per tensor (the
// matrices by 1/sqrt(fan-in), gains near one, whisper's sinusoidal encoder positions).
WhisperValues whisper_random_values(const WhisperFileConfig & cfg);

// write-model's vocab: whisper_token_text of each regular id (whisper_regular_tokens of them).
std::vector<std::string> whisper_file_tokens(int32_t n_vocab);

// Writes the model with write-model's random values and vocab (to path + ".part", renamed to path
// when complete); false with a message, and no file left behind, on invalid dimensions or an I/O
// error. bytes_written receives the file size.
bool write_whisper_model(const WhisperFileConfig & cfg, const std::string & path, std::string * error,
                         size_t * bytes_written = nullptr);

// The same with the tensors' values from `values` and the regular tokens' texts (ids 0.., at most
// n_vocab; whisper.cpp makes the special tokens above them): the converter's path.
bool write_whisper_model(const WhisperFileConfig & cfg, const std::vector<std::string> & tokens,
                         const WhisperValues & values, const std::string & path, std::string * error,
                         size_t * bytes_written = nullptr);

// Slaney-style mel filterbank (librosa's default, as whisper's reference uses): n_mels rows of
// n_fft / 2 + 1 weights over the FFT bins from 0 Hz to sample_rate / 2, each triangle area-normalised.
std::vector<float> slaney_mel_filters(int n_mels, int n_fft, int sample_rate);

// The text of regular token id, distinct for every id. As in the GPT-2 vocab whisper uses, ids 0..93
// are the printable ASCII characters '!'..'~' and id 220 is " " (whisper_full looks " " up and
// throws where it is missing; the single characters let whisper.cpp's tokenizer encode any ASCII
// prompt); every other id is a space and the id in bijective base 26 (" a" .. " z", " aa", ...).
std::string whisper_token_text(int32_t id);

// How many regular tokens the file's vocab holds; whisper.cpp synthesises the rest (eot, sot,
// languages, tasks, timestamps) up to n_vocab.
int32_t whisper_regular_tokens(int32_t n_vocab);

} // namespace wsp::model
