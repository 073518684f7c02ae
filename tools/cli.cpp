// wsp-ggml-cli: the project's command-line tool; this file is its command line (CLI11), the
// commands are in cli/ (one file each).
//   devices              list the registered backends and their devices
//   encode [options]     run a whisper-shaped encoder with random weights and print its result and time
//   write-model [opts]   write a whisper.cpp model file with random weights (model/whisper_file.h)
// Every subcommand takes --json (one JSON object on stdout instead of text) and --help. A wrong
// value is refused before anything runs, with the valid values named and CLI11's exit code.

#include "cli/commands.h"

#include "ggml.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using wsp::cli::EncodeOptions;
using wsp::cli::Mode;

const std::vector<std::string> kEncodeTypes = { "f32",  "f16",  "bf16", "q8_0", "q5_1", "q5_0", "q4_1",
                                                "q4_0", "q6_K", "q5_K", "q4_K", "q3_K", "q2_K" };
const std::vector<std::string> kModes       = { "split", "layers", "all" };
const std::vector<std::string> kSizes       = { "tiny", "base", "small", "medium", "large" };

std::string join(const std::vector<std::string> & names, const char * sep) {
    std::string s;
    for (const std::string & n : names) {
        s += (s.empty() ? "" : sep) + n;
    }
    return s;
}

// accepts exactly one of names; the message names them all ("q9 is not one of f32, f16, ...")
CLI::Validator one_of(const std::vector<std::string> & names) {
    const std::string list = join(names, ", ");
    return CLI::Validator(
        [names, list](std::string & v) {
            for (const std::string & n : names) {
                if (v == n) {
                    return std::string();
                }
            }
            return v + " is not one of " + list;
        },
        "{" + join(names, ",") + "}");
}

// a whole decimal integer in [lo, hi]; what: the message's name for the range
CLI::Validator integer(long long lo, long long hi, const std::string & what, const std::string & desc) {
    return CLI::Validator(
        [lo, hi, what](std::string & v) {
            char * end         = nullptr;
            errno              = 0;
            const long long x  = std::strtoll(v.c_str(), &end, 10);
            const bool      ok = end != v.c_str() && *end == '\0' && errno == 0 && x >= lo && x <= hi;
            return ok ? std::string() : v + " is not " + what;
        },
        desc);
}

const CLI::Validator kPositive    = integer(1, INT_MAX, "a positive integer", "POSITIVE");
const CLI::Validator kNonNegative = integer(0, INT32_MAX, "an integer in 0..2147483647", "NONNEGATIVE");

wsp_ggml_type type_by_name(const std::string & name) {
    for (int t = 0; t < WSP_GGML_TYPE_COUNT; ++t) {
        if (wsp_ggml_blck_size((wsp_ggml_type) t) != 0 && name == wsp_ggml_type_name((wsp_ggml_type) t)) {
            return (wsp_ggml_type) t;
        }
    }
    return WSP_GGML_TYPE_COUNT;
}

// the weight types write-model can write, in the order encode lists them
std::vector<std::string> file_types() {
    std::vector<std::string> names;
    for (const std::string & n : kEncodeTypes) {
        wsp_ggml_type t;
        if (wsp::model::whisper_file_type(n, t)) {
            names.push_back(n);
        }
    }
    return names;
}

void add_encode_options(CLI::App & cmd, EncodeOptions & o) {
    auto & cfg = o.cfg;
    cmd.add_option("--threads", o.n_threads, "CPU threads")->check(kPositive);
    cmd.add_option("--runs", o.runs,
                   "timed evaluations, after one untimed warm-up evaluation: one-time copies (weights spread at "
                   "first use) stay out of the times and of moved:")
        ->check(kPositive);
    cmd.add_option("--ctx", cfg.n_ctx, "encoder positions (the mel input has 2 * N frames)")->check(kPositive);
    cmd.add_option("--state", cfg.n_state,
                   "state width, a multiple of --heads (and of the block: 32, or 256 for the K-quants)")
        ->check(kPositive);
    cmd.add_option("--heads", cfg.n_head, "attention heads")->check(kPositive);
    cmd.add_option("--layers", cfg.n_layer, "transformer blocks")->check(kPositive);
    cmd.add_option("--mels", cfg.n_mels, "mel bands")->check(kPositive);
    cmd.add_option_function<std::string>(
           "--type", [&](const std::string & s) { cfg.wtype = type_by_name(s); }, "mat-mul weight type (default f16)")
        ->check(one_of(kEncodeTypes));
    cmd.add_flag("--flash", cfg.flash_attn, "attention through flash_attn_ext");
    cmd.add_flag(
        "--check", o.check,
        "compare the result with the double-precision reference (exit status 2 when its NMSE is 1e-6 or more)");
    cmd.add_option("--device", o.device,
                   "auto: every GPU of the registry (the CPU where there is none); cpu; NAME: one device (see "
                   "wsp-ggml-cli devices); with --mode all, NAME picks one all-GPU device");
    cmd.add_option("--sim", o.n_sim, "N simulated devices (CPU kernels, device memory, async streams) instead of GPUs")
        ->check(kPositive)
        ->default_str("");
    cmd.add_option_function<std::string>(
           "--mode",
           [&](const std::string & s) { o.mode = s == "layers" ? Mode::Layers
                                                 : s == "all"  ? Mode::All
                                                               : Mode::Split; },
           "several devices: split (default) spreads every layer's mat-mul weights by rows; layers puts whole "
           "layers on the devices in turn; all uses the registry's all-GPU device (SIM_All with --sim N, N >= 2; "
           "CUDA_All, ...): the weights whole in its buffer type, the scheduler over it and the CPU, its backend "
           "spreading the work over its members")
        ->check(one_of(kModes));
    cmd.add_option("--tensor-split", o.tensor_split,
                   "shares per device, A,B,... (3,1: 75% and 25%; missing parts are 0; default: by free memory); "
                   "with --mode all, the all-GPU device's members' shares")
        ->type_name("A,B,...");
    cmd.add_flag("--json", o.json, "print one JSON object with the figures instead of text");
}

// the checks between encode's options; throws CLI11's ValidationError
void check_encode(const EncodeOptions & o) {
    if (o.mode == Mode::All && o.n_sim == 1) {
        throw CLI::ValidationError("--mode", "all needs two or more devices: --sim N with N >= 2");
    }
    if (o.cfg.n_state % o.cfg.n_head != 0) {
        throw CLI::ValidationError("--state", "must be a multiple of --heads");
    }
    const int64_t block = wsp_ggml_blck_size(o.cfg.wtype);
    if (o.cfg.n_state % block != 0) {
        throw CLI::ValidationError("--state", std::string(wsp_ggml_type_name(o.cfg.wtype)) +
                                                  " weights need a multiple of " + std::to_string(block));
    }
}

// write-model's options: the preset by --size, then each dimension option over the fields it sets
struct WriteModelOptions {
    struct Dim {
        const char *           name;
        const char *           help;
        std::vector<int32_t *> fields;
        int32_t                value = 0;
        CLI::Option *          opt   = nullptr;
    };

    wsp::model::WhisperFileConfig cfg;
    std::string                   out;
    std::string                   size   = "tiny";
    long long                     seed   = 1;
    std::string                   format = "ggml";
    bool                          json   = false;
    std::vector<Dim>              dims   = {
                       { "--audio-ctx", "encoder positions, 1..1500 (default 1500; see below)", { &cfg.n_audio_ctx } },
                       { "--text-ctx", "decoder positions (default 448)", { &cfg.n_text_ctx } },
                       { "--vocab", "51864 English-only, 51865 multilingual (default), 51866 large-v3 layout", { &cfg.n_vocab } },
                       { "--mels", "mel bands (default 80)", { &cfg.n_mels } },
                       { "--state",
                         "audio and text state (default by --size; whisper.cpp requires them equal)",
                         { &cfg.n_audio_state, &cfg.n_text_state } },
                       { "--heads", "audio and text heads (default by --size)", { &cfg.n_audio_head, &cfg.n_text_head } },
                       { "--layers", "audio and text layers (default by --size)", { &cfg.n_audio_layer, &cfg.n_text_layer } },
                       { "--audio-heads", "audio heads only", { &cfg.n_audio_head } },
                       { "--text-heads", "text heads only", { &cfg.n_text_head } },
                       { "--audio-layers", "audio layers only", { &cfg.n_audio_layer } },
                       { "--text-layers", "text layers only", { &cfg.n_text_layer } },
    };

    WriteModelOptions()                                      = default;
    WriteModelOptions(const WriteModelOptions &)             = delete; // dims point into cfg
    WriteModelOptions & operator=(const WriteModelOptions &) = delete;
};

void add_write_model_options(CLI::App & cmd, WriteModelOptions & w) {
    cmd.add_option("--out", w.out, "the file to write (a folder with --format hf)")->required();
    cmd.add_option("--format", w.format,
                   "ggml: whisper.cpp's model file; hf: a Hugging Face checkpoint folder of the same weights "
                   "(config.json, model.safetensors in f32, or f16 with --type f16, vocab.json, merges.txt) "
                   "for `convert`")
        ->check(one_of({ "ggml", "hf" }));
    cmd.add_option("--size", w.size, "dimensions of the public whisper model; the options below override them")
        ->check(one_of(kSizes));
    cmd.add_option_function<std::string>(
           "--type", [&](const std::string & s) { wsp::model::whisper_file_type(s, w.cfg.wtype); },
           "mat-mul weights and token embedding (default f16); conv kernels stay f16, the rest f32")
        ->check(one_of(file_types()));
    cmd.add_option("--seed", w.seed, "weights are a function of the seed and the tensor name")
        ->check(integer(0, INT64_MAX, "an integer in 0..9223372036854775807", "NONNEGATIVE"));
    for (WriteModelOptions::Dim & d : w.dims) {
        // no "=0" in the help: a field keeps its preset unless the option is given
        d.opt = cmd.add_option(d.name, d.value, d.help)->check(kNonNegative)->default_str("");
    }
    cmd.add_flag("--json", w.json, "print one JSON object (path, config, bytes) instead of text");
}

// the preset, then the dimension options in command-line order (the last one given for a field wins)
void apply_write_model(CLI::App & cmd, WriteModelOptions & w) {
    wsp::model::whisper_file_preset(w.size, w.cfg);
    w.cfg.seed = (uint64_t) w.seed;
    for (const CLI::Option * opt : cmd.parse_order()) {
        for (const WriteModelOptions::Dim & d : w.dims) {
            if (d.opt == opt) {
                for (int32_t * f : d.fields) {
                    *f = d.value;
                }
            }
        }
    }
}

} // namespace

// the library's log: warnings and errors always, info (such as "CUDA: no usable GPU" on a machine
// with the toolkit and no driver) with --verbose; a continuation follows its message
struct LogFilter {
    bool verbose = false;
    bool showing = true; // the last message's fate, for its continuations
};

void log_filtered(wsp_ggml_log_level level, const char * text, void * user_data) {
    LogFilter & f = *static_cast<LogFilter *>(user_data);
    if (level != WSP_GGML_LOG_LEVEL_CONT) {
        f.showing = f.verbose || level >= WSP_GGML_LOG_LEVEL_WARN;
    }
    if (f.showing) {
        std::fputs(text, stderr);
    }
}

int main(int argc, char ** argv) {
    wsp_ggml_time_init();
    static LogFilter log_filter;
    wsp_ggml_log_set(log_filtered, &log_filter);
    CLI::App app{ "wsp-ggml-cli: the wsp-ggml backends, the whisper-shaped encoder on them, and whisper.cpp model "
                  "files with random weights",
                  "wsp-ggml-cli" };
    app.require_subcommand(1);
    app.add_flag("-v,--verbose", log_filter.verbose, "the library's info messages too (warnings and errors always)");
    // a repeated option keeps its last value, as the hand-written parser did
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->always_capture_default();

    bool   devices_json = false;
    auto * devices      = app.add_subcommand("devices", "list the registered backends, their devices and features");
    devices->add_flag("--json", devices_json, "print one JSON object {backends, devices, regs} instead of text");

    EncodeOptions o;
    auto *        encode = app.add_subcommand(
               "encode", "run a whisper-shaped encoder with random weights through the scheduler and print its result "
                                "and time (on sims also the bytes moved between devices)");
    add_encode_options(*encode, o);

    WriteModelOptions w;
    auto *            write_model =
        app.add_subcommand("write-model", "write a whisper.cpp model file with random weights (default tiny, f16)");
    add_write_model_options(*write_model, w);
    write_model->footer("--audio-ctx N: the encoder reads the first 2*N mel frames (N * 20 ms) of every 30 s window "
                        "and ignores the rest, like whisper.cpp's audio_ctx; a multiple of 256 keeps whisper.cpp's "
                        "flash-attention path equal to its plain path. --state: a multiple of the heads (and of the "
                        "type's block: 32, or 256 for the K-quants q2_K ... q6_K).");

    std::string   convert_dir, convert_out;
    wsp_ggml_type convert_type = WSP_GGML_TYPE_F16;
    bool          convert_json = false;
    auto *        convert      = app.add_subcommand(
                    "convert", "convert a Hugging Face whisper checkpoint (config.json, model.safetensors, vocab.json) into "
                                           "whisper.cpp's model file");
    convert->add_option("dir", convert_dir, "the checkpoint's folder")->required();
    convert->add_option("--out", convert_out, "the model file to write")->required();
    convert
        ->add_option_function<std::string>(
            "--type", [&](const std::string & s) { wsp::model::whisper_file_type(s, convert_type); },
            "mat-mul weights and token embedding (default f16); conv kernels f16 (f32 for f32), the rest f32")
        ->check(one_of(file_types()));
    convert->add_flag("--json", convert_json, "print one JSON object (path, config, tensors, tokens, bytes)");

    if (argc < 2) {
        std::fprintf(stderr, "%s", app.help().c_str());
        return wsp::cli::EXIT_USAGE;
    }
    // the first word that is not an option names the command (CLI11 would call an unknown one "A
    // subcommand is required")
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.empty() || a[0] == '-') {
            continue;
        }
        if (a != devices->get_name() && a != encode->get_name() && a != write_model->get_name() &&
            a != convert->get_name()) {
            std::fprintf(stderr, "wsp-ggml-cli: unknown command '%s': one of convert, devices, encode, write-model\n",
                         a.c_str());
            return wsp::cli::EXIT_USAGE;
        }
        break;
    }
    try {
        app.parse(argc, argv);
        if (encode->parsed()) {
            check_encode(o);
        }
    } catch (const CLI::Success & e) { // --help: the help on stdout, status 0
        return app.exit(e);
    } catch (const CLI::ParseError & e) { // Note [exit codes] in cli/commands.h
        std::fprintf(stderr, "wsp-ggml-cli: %s\n(wsp-ggml-cli COMMAND --help lists the options)\n", e.what());
        return wsp::cli::EXIT_USAGE;
    }
    if (devices->parsed()) {
        return wsp::cli::cmd_devices(devices_json);
    }
    if (encode->parsed()) {
        return wsp::cli::cmd_encode(o);
    }
    if (convert->parsed()) {
        return wsp::cli::cmd_convert(convert_dir, convert_type, convert_out, convert_json);
    }
    apply_write_model(*write_model, w);
    return wsp::cli::cmd_write_model(w.cfg, w.out, w.format == "hf", w.json);
}
