// whisper_tokens MODEL CLIP.wav [--threads N] [--tokens N]: whisper.cpp's greedy tokens of a clip on
// the CPU, as one line "greedy tokens: [t0 t1 ...]" on stdout. The same source builds against our
// package (examples/whisper) and against the ggml a whisper.rn package ships (bench/peers), so
// tests/whisper/run.sh peer can compare what the client's own ggml gives for a model file with what
// ours gives. The decoding is whisper_check's greedy run: language "en", no timestamps, temperature
// 0 without fallback, one segment.

#include "greedy.h"
#include "wav.h"
#include "whisper.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void quiet(enum wsp_ggml_log_level level, const char * text, void *) {
    if (level == WSP_GGML_LOG_LEVEL_ERROR) {
        std::fputs(text, stderr);
    }
}

} // namespace

int main(int argc, char ** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: whisper_tokens MODEL CLIP.wav [--threads N] [--tokens N]\n");
        return 2;
    }
    int threads = 2, max_tokens = 10;
    for (int i = 3; i + 1 < argc; i += 2) {
        const int v = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--threads") == 0 && v > 0) {
            threads = v;
        } else if (std::strcmp(argv[i], "--tokens") == 0 && v > 0) {
            max_tokens = v;
        } else {
            std::fprintf(stderr, "whisper_tokens: bad option %s %s\n", argv[i], argv[i + 1]);
            return 2;
        }
    }
    whisper_log_set(quiet, nullptr);
    std::vector<float> mono;
    int                rate = 0;
    std::string        error;
    if (!wsp::example::read_wav_mono(argv[2], mono, rate, &error)) {
        std::fprintf(stderr, "whisper_tokens: %s\n", error.c_str());
        return 2;
    }
    const std::vector<float> pcm = wsp::example::resample(mono, rate, WHISPER_SAMPLE_RATE);

    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu                = false;
    whisper_context * ctx     = whisper_init_from_file_with_params(argv[1], cp);
    if (ctx == nullptr) {
        std::fprintf(stderr, "whisper_tokens: whisper.cpp could not load %s\n", argv[1]);
        return 2;
    }
    const whisper_full_params p = wsp::example::greedy_params(threads, max_tokens);
    if (whisper_full(ctx, p, pcm.data(), (int) pcm.size()) != 0) {
        std::fprintf(stderr, "whisper_tokens: whisper_full failed\n");
        whisper_free(ctx);
        return 1;
    }
    std::string line = "greedy tokens: [";
    for (int s = 0; s < whisper_full_n_segments(ctx); ++s) {
        for (int t = 0; t < whisper_full_n_tokens(ctx, s); ++t) {
            line += (line.back() == '[' ? "" : " ") + std::to_string(whisper_full_get_token_id(ctx, s, t));
        }
    }
    std::printf("%s]\n", line.c_str());
    whisper_free(ctx);
    return 0;
}
