#pragma once

// The greedy decoding whisper_check and whisper_tokens both run (header-only: whisper_tokens also
// builds against the client's whisper.h in bench/peers): language "en", no timestamps, one
// segment without context, temperature 0 without fallback, nothing printed.

#include "whisper.h"

namespace wsp::example {

inline whisper_full_params greedy_params(int threads, int max_tokens) {
    whisper_full_params p = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    p.n_threads           = threads;
    p.no_timestamps       = true;
    p.no_context          = true;
    p.single_segment      = true;
    p.language            = "en";
    p.detect_language     = false;
    p.temperature         = 0.0f;
    p.temperature_inc     = 0.0f; // no fallback to higher temperatures
    p.max_tokens          = max_tokens;
    p.print_progress      = false;
    p.print_realtime      = false;
    p.print_special       = false;
    p.print_timestamps    = false;
    return p;
}

} // namespace wsp::example
