// Encoder and decoder timing of whisper.cpp on the CPU, one JSON object on stdout. The same source
// builds against our package (examples/whisper) and against the ggml a whisper.rn package ships
// (bench/peers), so it uses only whisper.h calls that whisper.rn 0.4.3 and 0.7.3 both have.
//   whisper_bench MODEL (CLIP.wav | --seconds S) [--threads 2] [--tokens 32] [--batch 5] [--runs 3] [--flash]
//                 [--label NAME]
// One warm-up encode and decode, then per run one whisper_encode, N single-token whisper_decode
// steps (n_past 0..N-1; whisper_decode drops the cache cells from n_past on, so runs repeat) and
// BATCH_STEPS steps of B tokens each (n_past on from N): the mat-mul shapes of a beam search over B
// beams, whose decoder multiplies B rows at a time.

#include "wav.h"
#include "whisper.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
    std::string model;
    std::string wav;
    std::string label;
    double      seconds = 0;
    int         threads = 2;
    int         tokens  = 32;
    int         batch   = 5;
    int         runs    = 3;
    bool        flash   = false;
    bool        verbose = false;
};

void usage() {
    std::fprintf(stderr, "usage: whisper_bench MODEL (CLIP.wav | --seconds S) [--threads N] [--tokens N] "
                         "[--batch B] [--runs R] [--flash] [--label NAME] [--verbose]\n");
}

bool parse(int argc, char ** argv, Options & o) {
    std::vector<std::string> positional;
    for (int i = 1; i < argc; ++i) {
        const std::string a     = argv[i];
        auto              value = [&](const char * name) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "whisper_bench: %s needs a value\n", name);
                return nullptr;
            }
            return argv[++i];
        };
        const char * v = nullptr;
        if (a == "--threads" || a == "--tokens" || a == "--batch" || a == "--runs") {
            if (!(v = value(a.c_str()))) {
                return false;
            }
            const int n = std::atoi(v);
            if (n < 1) {
                std::fprintf(stderr, "whisper_bench: %s must be at least 1\n", a.c_str());
                return false;
            }
            (a == "--threads" ? o.threads : a == "--tokens" ? o.tokens : a == "--batch" ? o.batch : o.runs) = n;
        } else if (a == "--seconds") {
            if (!(v = value("--seconds"))) {
                return false;
            }
            o.seconds = std::atof(v);
        } else if (a == "--label") {
            if (!(v = value("--label"))) {
                return false;
            }
            o.label = v;
        } else if (a == "--flash") {
            o.flash = true;
        } else if (a == "--verbose") {
            o.verbose = true;
        } else if (a == "-h" || a == "--help") {
            usage();
            std::exit(0);
        } else if (a.size() > 1 && a[0] == '-') {
            std::fprintf(stderr, "whisper_bench: unknown option %s\n", a.c_str());
            return false;
        } else {
            positional.push_back(a);
        }
    }
    if (positional.empty() || positional.size() > 2 || (positional.size() == 2) == (o.seconds > 0)) {
        usage();
        return false;
    }
    o.model = positional[0];
    if (positional.size() == 2) {
        o.wav = positional[1];
    }
    return true;
}

// a deterministic stand-in for speech: a few drifting harmonics under an amplitude envelope
std::vector<float> generated_audio(double seconds) {
    const int          rate = WHISPER_SAMPLE_RATE;
    std::vector<float> pcm(size_t(seconds * rate));
    const double       pi = 3.14159265358979323846;
    for (size_t i = 0; i < pcm.size(); ++i) {
        const double t  = double(i) / rate;
        const double f0 = 140 + 30 * std::sin(2 * pi * 0.7 * t);
        double       s  = 0;
        for (int h = 1; h <= 5; ++h) {
            s += std::sin(2 * pi * f0 * h * t) / h;
        }
        pcm[i] = float(0.2 * s * (0.5 + 0.5 * std::sin(2 * pi * 3 * t)));
    }
    return pcm;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void quiet_log(enum wsp_ggml_log_level, const char *, void *) {}

std::string json_escaped(const std::string & s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        return 2;
    }
    if (!o.verbose) {
        whisper_log_set(quiet_log, nullptr);
    }

    std::vector<float> pcm;
    if (!o.wav.empty()) {
        int         rate = 0;
        std::string error;
        if (!wsp::example::read_wav_mono(o.wav, pcm, rate, &error)) {
            std::fprintf(stderr, "whisper_bench: %s: %s\n", o.wav.c_str(), error.c_str());
            return 1;
        }
        if (rate != WHISPER_SAMPLE_RATE) {
            pcm = wsp::example::resample(pcm, rate, WHISPER_SAMPLE_RATE);
        }
    } else {
        pcm = generated_audio(o.seconds);
    }

    whisper_context_params cp = whisper_context_default_params();
    cp.use_gpu                = false;
    cp.flash_attn             = o.flash;
    auto              t_load  = std::chrono::steady_clock::now();
    whisper_context * ctx     = whisper_init_from_file_with_params(o.model.c_str(), cp);
    const double      load_ms = ms_since(t_load);
    if (!ctx) {
        std::fprintf(stderr, "whisper_bench: whisper.cpp could not load %s\n", o.model.c_str());
        return 1;
    }
    constexpr int BATCH_STEPS = 8;
    if (o.tokens + BATCH_STEPS * o.batch > whisper_n_text_ctx(ctx)) {
        std::fprintf(stderr,
                     "whisper_bench: --tokens %d and %d steps of --batch %d exceed the model's text context %d\n",
                     o.tokens, BATCH_STEPS, o.batch, whisper_n_text_ctx(ctx));
        whisper_free(ctx);
        return 2;
    }
    auto         t_mel  = std::chrono::steady_clock::now();
    const int    mel_rc = whisper_pcm_to_mel(ctx, pcm.data(), int(pcm.size()), o.threads);
    const double mel_ms = ms_since(t_mel);
    if (mel_rc != 0) {
        std::fprintf(stderr, "whisper_bench: whisper_pcm_to_mel failed\n");
        whisper_free(ctx);
        return 1;
    }

    // the decoded sequence: start of transcript, then fixed ordinary text tokens
    std::vector<whisper_token> seq(size_t(o.tokens));
    const int                  ordinary = std::min(whisper_token_eot(ctx), whisper_n_vocab(ctx));
    for (int i = 0; i < o.tokens; ++i) {
        seq[size_t(i)] = i == 0 ? whisper_token_sot(ctx) : whisper_token((220 + 7919 * i) % ordinary);
    }

    // one run: encode, then the decode steps; false on a failure
    std::vector<double>        encode_ms, decode_ms, batch_ms;
    std::vector<whisper_token> step(size_t(o.batch));
    auto                       run = [&](bool record) {
        auto t0 = std::chrono::steady_clock::now();
        if (whisper_encode(ctx, 0, o.threads) != 0) {
            std::fprintf(stderr, "whisper_bench: whisper_encode failed\n");
            return false;
        }
        const double enc = ms_since(t0);
        t0               = std::chrono::steady_clock::now();
        for (int i = 0; i < (record ? o.tokens : 1); ++i) {
            if (whisper_decode(ctx, &seq[size_t(i)], 1, i, o.threads) != 0) {
                std::fprintf(stderr, "whisper_bench: whisper_decode failed at step %d\n", i);
                return false;
            }
        }
        if (!record) {
            return true;
        }
        encode_ms.push_back(enc);
        decode_ms.push_back(ms_since(t0) / o.tokens);
        t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < BATCH_STEPS; ++i) {
            for (int b = 0; b < o.batch; ++b) {
                step[size_t(b)] = seq[size_t((i * o.batch + b) % o.tokens)];
            }
            if (whisper_decode(ctx, step.data(), o.batch, o.tokens + i * o.batch, o.threads) != 0) {
                std::fprintf(stderr, "whisper_bench: whisper_decode of %d tokens failed at step %d\n", o.batch, i);
                return false;
            }
        }
        batch_ms.push_back(ms_since(t0) / BATCH_STEPS);
        return true;
    };
    bool ok = run(false);
    for (int r = 0; ok && r < o.runs; ++r) {
        ok = run(true);
    }
    const int n_audio_ctx = whisper_model_n_audio_ctx(ctx);
    const int n_vocab     = whisper_model_n_vocab(ctx);
    const int n_state     = whisper_model_n_audio_state(ctx);
    const int n_layer     = whisper_model_n_audio_layer(ctx);
    const int ftype       = whisper_model_ftype(ctx);
    whisper_free(ctx);
    if (!ok) {
        return 1;
    }

    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double peak_rss_mib = double(ru.ru_maxrss) / 1024.0; // Linux: KiB
    std::printf("{\"label\": \"%s\", \"model\": \"%s\", \"n_audio_ctx\": %d, \"n_state\": %d, \"n_layer\": %d, "
                "\"n_vocab\": %d, \"ftype\": %d, \"threads\": %d, \"tokens\": %d, \"runs\": %d, \"flash_attn\": %s, "
                "\"audio_s\": %.3f, \"load_ms\": %.2f, \"mel_ms\": %.2f, \"encode_ms_best\": %.2f, "
                "\"encode_ms_median\": %.2f, \"decode_ms_per_token\": %.3f, \"decode_ms_per_token_best\": %.3f, "
                "\"batch\": %d, \"decode_batch_ms_per_step\": %.3f, "
                "\"peak_rss_mib\": %.1f, \"system_info\": \"%s\"}\n",
                json_escaped(o.label).c_str(), json_escaped(o.model).c_str(), n_audio_ctx, n_state, n_layer, n_vocab,
                ftype, o.threads, o.tokens, o.runs, o.flash ? "true" : "false",
                double(pcm.size()) / WHISPER_SAMPLE_RATE, load_ms, mel_ms,
                *std::min_element(encode_ms.begin(), encode_ms.end()), median(encode_ms), median(decode_ms),
                *std::min_element(decode_ms.begin(), decode_ms.end()), o.batch, median(batch_ms), peak_rss_mib,
                json_escaped(whisper_print_system_info()).c_str());
    return 0;
}
