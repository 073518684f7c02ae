// whisper.cpp's decoding for whisper_transcribe and wsp-whisper-server (decoding.h).

#include "decoding.h"

namespace wsp::transcribe {

whisper_full_params full_params(const Decoding & d, wsp_ggml_abort_callback abort, void * abort_data) {
    const bool          beams = d.beam_size > 1;
    whisper_full_params p = whisper_full_default_params(beams ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY);
    p.n_threads           = d.threads;
    p.translate           = d.translate;
    p.temperature         = d.temperature;
    p.greedy.best_of      = d.best_of;
    if (beams) {
        p.beam_search.beam_size = d.beam_size;
    }
    p.initial_prompt   = d.prompt.empty() ? nullptr : d.prompt.c_str();
    p.language         = d.language.c_str();
    p.detect_language  = false; // "auto" detects and goes on to transcribe
    p.max_tokens       = d.max_tokens;
    p.print_progress   = false;
    p.print_realtime   = false;
    p.print_special    = false;
    p.print_timestamps = false;
    if (d.no_fallback) {
        p.temperature_inc = 0.0f;
    }
    p.abort_callback           = abort;
    p.abort_callback_user_data = abort_data;
    return p;
}

bool language_known(const std::string & language) {
    return language == "auto" || whisper_lang_id(language.c_str()) >= 0;
}

std::string known_languages() {
    std::string all = "auto";
    for (int i = 0; i <= whisper_lang_max_id(); ++i) {
        all += std::string(", ") + whisper_lang_str(i);
    }
    return all;
}

Transcript transcript_of(whisper_context * ctx, const std::string & file, const std::string & language_asked) {
    Transcript t;
    t.file         = file;
    const int lang = whisper_full_lang_id(ctx);
    t.language     = lang >= 0 ? whisper_lang_str(lang) : language_asked;
    for (int s = 0; s < whisper_full_n_segments(ctx); ++s) {
        Segment seg;
        seg.t0   = whisper_full_get_segment_t0(ctx, s);
        seg.t1   = whisper_full_get_segment_t1(ctx, s);
        seg.text = whisper_full_get_segment_text(ctx, s);
        for (int k = 0; k < whisper_full_n_tokens(ctx, s); ++k) {
            const whisper_token_data d = whisper_full_get_token_data(ctx, s, k);
            seg.tokens.push_back({ d.id, whisper_full_get_token_text(ctx, s, k), d.p });
        }
        t.segments.push_back(std::move(seg));
    }
    return t;
}

} // namespace wsp::transcribe
