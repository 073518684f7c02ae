#pragma once

// whisper.cpp's decoding as whisper_transcribe and wsp-whisper-server ask for it: the options as
// whisper.cpp's CLI names them, the whisper_full parameters they make, and the result read back
// as a Transcript (outputs.h), which every output format renders.

#include "outputs.h"
#include "whisper.h"

#include <string>

namespace wsp::transcribe {

struct Decoding {
    std::string language    = "en"; // or "auto"
    bool        translate   = false;
    int         beam_size   = 1; // greedy unless over 1
    int         best_of     = 5; // candidates sampled at a temperature over 0 (whisper.cpp's default)
    float       temperature = 0.0f;
    std::string prompt;
    int         max_tokens  = 0;     // per segment; 0: no limit
    bool        no_fallback = false; // no retries at higher temperatures
    int         threads     = 4;
};

// The parameters of whisper_full for d; they point into d, which must outlive the call. abort is
// polled by whisper.cpp between its steps.
whisper_full_params full_params(const Decoding & d, wsp_ggml_abort_callback abort, void * abort_data);

// whether whisper knows the language ("auto" included), and the list of them, "auto" first
bool        language_known(const std::string & language);
std::string known_languages();

// the segments of ctx's last whisper_full, tokens with their probabilities
Transcript transcript_of(whisper_context * ctx, const std::string & file, const std::string & language_asked);

} // namespace wsp::transcribe
