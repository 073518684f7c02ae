// wsp-ggml-cli write-model: a whisper.cpp model file with random weights (model/whisper_file.h), or
// the same weights as a Hugging Face checkpoint folder (model/hf_checkpoint.h); prints the path, the
// dimensions and the size, as text or as one JSON object.

#include "cli/commands.h"
#include "cli/json.h"
#include "model/hf_checkpoint.h"

#include <cstdio>

namespace wsp::cli {

int cmd_write_model(const wsp::model::WhisperFileConfig & cfg, const std::string & out, bool hf, bool json) {
    std::string error;
    size_t      bytes = 0;
    if (hf) {
        // the checkpoint's tensors in f16 for --type f16, else f32 (a checkpoint holds no quantized type)
        const wsp_ggml_type dtype = cfg.wtype == WSP_GGML_TYPE_F16 ? WSP_GGML_TYPE_F16 : WSP_GGML_TYPE_F32;
        if (!wsp::model::write_hf_checkpoint(cfg, out, dtype, &error)) {
            std::fprintf(stderr, "write-model: %s\n", error.c_str());
            return 1;
        }
        if (json) {
            JsonWriter j;
            j.begin_object()
                .field("path", out)
                .field("format", "hf")
                .field("describe", cfg.describe())
                .field("dtype", wsp_ggml_type_name(dtype))
                .field("seed", (uint64_t) cfg.seed)
                .end_object();
            std::printf("%s\n", j.str().c_str());
        } else {
            std::printf("wrote the checkpoint %s: %s (tensors in %s), seed %llu\n", out.c_str(), cfg.describe().c_str(),
                        wsp_ggml_type_name(dtype), (unsigned long long) cfg.seed);
        }
        return 0;
    }
    if (!wsp::model::write_whisper_model(cfg, out, &error, &bytes)) {
        std::fprintf(stderr, "write-model: %s\n", error.c_str());
        return 1;
    }
    if (!json) {
        std::printf("wrote %s: %s, seed %llu, %zu bytes (%.1f MiB)\n", out.c_str(), cfg.describe().c_str(),
                    (unsigned long long) cfg.seed, bytes, bytes / 1048576.0);
        return 0;
    }
    JsonWriter j;
    j.begin_object()
        .field("path", out)
        .key("config")
        .begin_object()
        .field("describe", cfg.describe())
        .field("n_vocab", cfg.n_vocab)
        .field("n_audio_ctx", cfg.n_audio_ctx)
        .field("n_audio_state", cfg.n_audio_state)
        .field("n_audio_head", cfg.n_audio_head)
        .field("n_audio_layer", cfg.n_audio_layer)
        .field("n_text_ctx", cfg.n_text_ctx)
        .field("n_text_state", cfg.n_text_state)
        .field("n_text_head", cfg.n_text_head)
        .field("n_text_layer", cfg.n_text_layer)
        .field("n_mels", cfg.n_mels)
        .field("type", wsp_ggml_type_name(cfg.wtype))
        .field("seed", (uint64_t) cfg.seed)
        .end_object()
        .field("bytes", (uint64_t) bytes)
        .end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
}

} // namespace wsp::cli
