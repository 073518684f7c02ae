// wsp-ggml-cli convert: a Hugging Face whisper checkpoint into whisper.cpp's model file
// (model/hf_checkpoint.h); prints what it wrote, as text or as one JSON object.

#include "cli/commands.h"
#include "cli/json.h"
#include "model/hf_checkpoint.h"

#include <cstdio>

namespace wsp::cli {

int cmd_convert(const std::string & dir, wsp_ggml_type type, const std::string & out, bool json) {
    std::string               error;
    wsp::model::ConvertReport r;
    if (!wsp::model::convert_hf_checkpoint(dir, type, out, &r, &error)) {
        std::fprintf(stderr, "convert: %s\n", error.c_str());
        return EXIT_FAILED;
    }
    if (!json) {
        std::printf("wrote %s from %s (%s weights): %s, %zu tensors, %zu tokens, %zu bytes (%.1f MiB)\n", out.c_str(),
                    dir.c_str(), r.source_dtype.c_str(), r.cfg.describe().c_str(), r.n_tensors, r.n_tokens, r.bytes,
                    r.bytes / 1048576.0);
        return 0;
    }
    JsonWriter j;
    j.begin_object()
        .field("path", out)
        .field("from", dir)
        .field("source_dtype", r.source_dtype)
        .field("describe", r.cfg.describe())
        .field("type", wsp_ggml_type_name(r.cfg.wtype))
        .field("tensors", (uint64_t) r.n_tensors)
        .field("tokens", (uint64_t) r.n_tokens)
        .field("bytes", (uint64_t) r.bytes)
        .end_object();
    std::printf("%s\n", j.str().c_str());
    return 0;
}

} // namespace wsp::cli
