// Hugging Face whisper checkpoints <-> whisper.cpp model files (see hf_checkpoint.h). The JSON of
// config.json, vocab.json and the safetensors header is read and written with nlohmann-json; the
// tensors are mapped read-only and converted row by row as the model writer asks for them.

#include "model/hf_checkpoint.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>

namespace wsp::model {

namespace {

using json = nlohmann::json;

void set_error(std::string * error, const std::string & message) {
    if (error != nullptr) {
        *error = message;
    }
}

// dir/file
std::string in_dir(const std::string & dir, const char * file) {
    return dir + "/" + file;
}

bool read_json(const std::string & path, json & out, std::string * error) {
    std::ifstream in(path);
    if (!in) {
        set_error(error, "cannot open " + path + ": " + std::strerror(errno));
        return false;
    }
    out = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (out.is_discarded()) {
        set_error(error, path + " is not valid JSON");
        return false;
    }
    return true;
}

bool write_text(const std::string & path, const std::string & text, std::string * error) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
        set_error(error, "cannot write " + path + ": " + std::strerror(errno));
        return false;
    }
    return true;
}

// ---- names -------------------------------------------------------------------------------------

// a block's part of a whisper.cpp name -> the checkpoint's; the cross-attention's before the
// self-attention's, whose names it contains
const std::pair<const char *, const char *> kBlockParts[] = {
    { "cross_attn_ln.", "encoder_attn_layer_norm." },
    { "cross_attn.query.", "encoder_attn.q_proj." },
    { "cross_attn.key.", "encoder_attn.k_proj." },
    { "cross_attn.value.", "encoder_attn.v_proj." },
    { "cross_attn.out.", "encoder_attn.out_proj." },
    { "attn_ln.", "self_attn_layer_norm." },
    { "attn.query.", "self_attn.q_proj." },
    { "attn.key.", "self_attn.k_proj." },
    { "attn.value.", "self_attn.v_proj." },
    { "attn.out.", "self_attn.out_proj." },
    { "mlp_ln.", "final_layer_norm." },
    { "mlp.0.", "fc1." },
    { "mlp.2.", "fc2." },
};

const std::pair<const char *, const char *> kWholeNames[] = {
    { "encoder.positional_embedding", "model.encoder.embed_positions.weight" },
    { "encoder.conv1.weight", "model.encoder.conv1.weight" },
    { "encoder.conv1.bias", "model.encoder.conv1.bias" },
    { "encoder.conv2.weight", "model.encoder.conv2.weight" },
    { "encoder.conv2.bias", "model.encoder.conv2.bias" },
    { "encoder.ln_post.weight", "model.encoder.layer_norm.weight" },
    { "encoder.ln_post.bias", "model.encoder.layer_norm.bias" },
    { "decoder.positional_embedding", "model.decoder.embed_positions.weight" },
    { "decoder.token_embedding.weight", "model.decoder.embed_tokens.weight" },
    { "decoder.ln.weight", "model.decoder.layer_norm.weight" },
    { "decoder.ln.bias", "model.decoder.layer_norm.bias" },
};

// the output projection: whisper ties it to the token embedding, and whisper.cpp has no tensor for it
constexpr const char * kTiedOutput = "proj_out.weight";

// The checkpoint's shape of a tensor: torch's order (ggml's reversed); a conv bias, [1, n] in
// whisper.cpp's file, is [n] there.
std::vector<int64_t> hf_shape(const WhisperTensor & t) {
    std::vector<int64_t> shape(t.ne.rbegin(), t.ne.rend());
    if (t.name == "encoder.conv1.bias" || t.name == "encoder.conv2.bias") {
        shape = { t.ne[1] };
    }
    return shape;
}

// ---- byte-level text ---------------------------------------------------------------------------

// GPT-2's byte -> code point table: printable Latin-1 bytes are themselves, the others 256, 257, ...
// in byte order
const std::vector<uint32_t> & byte_code_points() {
    static const std::vector<uint32_t> table = [] {
        std::vector<uint32_t> t(256);
        uint32_t              next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            t[b]                 = printable ? b : next++;
        }
        return t;
    }();
    return table;
}

void append_utf8(std::string & out, uint32_t cp) {
    if (cp < 0x80) {
        out += (char) cp;
    } else if (cp < 0x800) {
        out += (char) (0xC0 | (cp >> 6));
        out += (char) (0x80 | (cp & 0x3F));
    } else {
        out += (char) (0xE0 | (cp >> 12));
        out += (char) (0x80 | ((cp >> 6) & 0x3F));
        out += (char) (0x80 | (cp & 0x3F));
    }
}

// ---- safetensors -------------------------------------------------------------------------------

struct Dtype {
    const char *  name;
    wsp_ggml_type type;
    size_t        size;
};

const Dtype kDtypes[] = {
    { "F32", WSP_GGML_TYPE_F32, 4 },
    { "F16", WSP_GGML_TYPE_F16, 2 },
    { "BF16", WSP_GGML_TYPE_BF16, 2 },
};

const Dtype * find_dtype(const std::string & name) {
    for (const Dtype & d : kDtypes) {
        if (name == d.name) {
            return &d;
        }
    }
    return nullptr;
}

// a tensor of the file: where its bytes are
struct Stored {
    const Dtype *        dtype = nullptr;
    std::vector<int64_t> shape;
    const uint8_t *      data = nullptr;
};

// model.safetensors mapped read-only, its header parsed and every tensor's range checked
class SafetensorsFile {
public:
    ~SafetensorsFile() {
        if (map_ != MAP_FAILED) {
            munmap(map_, size_);
        }
    }

    bool open(const std::string & path, std::string * error) {
        path_  = path;
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return fail(error, std::string("cannot open it: ") + std::strerror(errno));
        }
        struct stat st {};
        if (fstat(fd, &st) != 0 || st.st_size < 8) {
            ::close(fd);
            return fail(error, "it is shorter than the 8 bytes of its header's length");
        }
        size_ = (size_t) st.st_size;
        map_  = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);
        if (map_ == MAP_FAILED) {
            return fail(error, std::string("cannot map it: ") + std::strerror(errno));
        }
        const uint8_t * bytes = static_cast<const uint8_t *>(map_);
        uint64_t        n     = 0;
        for (int i = 7; i >= 0; --i) {
            n = (n << 8) | bytes[i]; // little-endian
        }
        if (n > size_ - 8) {
            return fail(error, "its header length (" + std::to_string(n) + " bytes) runs past its end");
        }
        const json header = json::parse(bytes + 8, bytes + 8 + n, nullptr, /*allow_exceptions=*/false);
        if (!header.is_object()) {
            return fail(error, "its header is not a JSON object");
        }
        const uint8_t * data      = bytes + 8 + n;
        const size_t    data_size = size_ - 8 - n;
        for (const auto & [name, t] : header.items()) {
            if (name == "__metadata__") {
                continue;
            }
            const std::string where = "tensor " + name;
            if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets") ||
                !t["dtype"].is_string() || !t["shape"].is_array() || !t["data_offsets"].is_array() ||
                t["data_offsets"].size() != 2) {
                return fail(error, where + " lacks its dtype, shape or data_offsets");
            }
            Stored s;
            s.dtype       = find_dtype(t["dtype"].get<std::string>());
            int64_t count = 1;
            for (const json & d : t["shape"]) {
                if (!d.is_number_unsigned()) {
                    return fail(error, where + " has a shape that is not a list of sizes");
                }
                s.shape.push_back(d.get<int64_t>());
                count *= s.shape.back();
            }
            const json & off = t["data_offsets"];
            if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
                return fail(error, where + " has data_offsets that are not byte offsets");
            }
            const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
            if (begin > end || end > data_size) {
                return fail(error, where + " has bytes " + std::to_string(begin) + ".." + std::to_string(end) +
                                       ", past the data's " + std::to_string(data_size));
            }
            if (s.dtype != nullptr && end - begin != (uint64_t) count * s.dtype->size) {
                return fail(error, where + " has " + std::to_string(end - begin) + " bytes for " +
                                       std::to_string(count) + " " + s.dtype->name + " values");
            }
            s.data = data + begin;
            // the dtype name kept for the message of a tensor the converter reads
            dtype_names_[name] = t["dtype"].get<std::string>();
            tensors_[name]     = std::move(s);
        }
        return true;
    }

    const Stored * find(const std::string & name) const {
        auto it = tensors_.find(name);
        return it == tensors_.end() ? nullptr : &it->second;
    }

    const std::string & dtype_name(const std::string & name) const { return dtype_names_.at(name); }

    const std::map<std::string, Stored> & tensors() const { return tensors_; }

private:
    bool fail(std::string * error, const std::string & message) {
        set_error(error, path_ + ": " + message);
        return false;
    }

    std::string                        path_;
    void *                             map_  = MAP_FAILED;
    size_t                             size_ = 0;
    std::map<std::string, Stored>      tensors_;
    std::map<std::string, std::string> dtype_names_;
};

std::string shape_text(const std::vector<int64_t> & shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

// ---- config.json -------------------------------------------------------------------------------

bool read_config(const std::string & path, WhisperFileConfig & cfg, std::string * error) {
    json c;
    if (!read_json(path, c, error)) {
        return false;
    }
    if (!c.is_object()) {
        set_error(error, path + " is not a JSON object");
        return false;
    }
    if (c.contains("model_type") && c["model_type"] != "whisper") {
        set_error(error, path + ": model_type is " + c["model_type"].dump() + ", not \"whisper\"");
        return false;
    }
    auto get = [&](const char * key, int32_t & field) {
        if (!c.contains(key) || !c[key].is_number_integer()) {
            set_error(error, path + " has no integer \"" + key + "\"");
            return false;
        }
        field = c[key].get<int32_t>();
        return true;
    };
    int32_t d_model = 0;
    if (!get("d_model", d_model) || !get("encoder_layers", cfg.n_audio_layer) ||
        !get("encoder_attention_heads", cfg.n_audio_head) || !get("decoder_layers", cfg.n_text_layer) ||
        !get("decoder_attention_heads", cfg.n_text_head) || !get("num_mel_bins", cfg.n_mels) ||
        !get("vocab_size", cfg.n_vocab) || !get("max_source_positions", cfg.n_audio_ctx) ||
        !get("max_target_positions", cfg.n_text_ctx)) {
        return false;
    }
    cfg.n_audio_state = cfg.n_text_state = d_model;
    // whisper.cpp's feed-forward layers are 4 * d_model wide
    for (const char * key : { "encoder_ffn_dim", "decoder_ffn_dim" }) {
        if (c.contains(key) && c[key] != json(4 * d_model)) {
            set_error(error, path + ": " + key + " is " + c[key].dump() +
                                 "; whisper.cpp needs 4 * d_model = " + std::to_string(4 * d_model));
            return false;
        }
    }
    return true;
}

bool read_vocab(const std::string & path, std::vector<std::string> & tokens, std::string * error) {
    json v;
    if (!read_json(path, v, error)) {
        return false;
    }
    if (!v.is_object() || v.empty()) {
        set_error(error, path + " is not a JSON object of token -> id");
        return false;
    }
    tokens.assign(v.size(), std::string());
    std::vector<bool> seen(v.size(), false);
    for (const auto & [text, id] : v.items()) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() >= v.size() || seen[id.get<size_t>()]) {
            set_error(error, path + ": token " + json(text).dump() + " has id " + id.dump() + "; the ids must be 0.." +
                                 std::to_string(v.size() - 1) + ", each once");
            return false;
        }
        const size_t i = id.get<size_t>();
        seen[i]        = true;
        if (!hf_text_to_bytes(text, tokens[i])) {
            set_error(error, path + ": token " + json(text).dump() + " is not GPT-2 byte-level text");
            return false;
        }
    }
    return true;
}

} // namespace

std::string hf_tensor_name(const std::string & n) {
    for (const auto & [ours, theirs] : kWholeNames) {
        if (n == ours) {
            return theirs;
        }
    }
    // "{encoder|decoder}.blocks.N.PART"
    for (const char * side : { "encoder", "decoder" }) {
        const std::string prefix = std::string(side) + ".blocks.";
        if (n.compare(0, prefix.size(), prefix) != 0) {
            continue;
        }
        const size_t dot = n.find('.', prefix.size());
        if (dot == std::string::npos || dot == prefix.size()) {
            return "";
        }
        const std::string layer = n.substr(prefix.size(), dot - prefix.size());
        const std::string part  = n.substr(dot + 1);
        for (const auto & [ours, theirs] : kBlockParts) {
            const std::string o(ours);
            if (part.compare(0, o.size(), o) == 0) {
                return "model." + std::string(side) + ".layers." + layer + "." + theirs + part.substr(o.size());
            }
        }
    }
    return "";
}

std::string hf_bytes_to_text(const std::string & bytes) {
    std::string out;
    for (unsigned char b : bytes) {
        append_utf8(out, byte_code_points()[b]);
    }
    return out;
}

bool hf_text_to_bytes(const std::string & text, std::string & bytes) {
    static const std::map<uint32_t, uint8_t> to_byte = [] {
        std::map<uint32_t, uint8_t> m;
        for (int b = 0; b < 256; ++b) {
            m[byte_code_points()[b]] = (uint8_t) b;
        }
        return m;
    }();
    bytes.clear();
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = (unsigned char) text[i];
        uint32_t            cp;
        size_t              len;
        if (c < 0x80) {
            cp = c, len = 1;
        } else if ((c & 0xE0) == 0xC0) {
            cp = c & 0x1F, len = 2;
        } else if ((c & 0xF0) == 0xE0) {
            cp = c & 0x0F, len = 3;
        } else {
            return false; // the alphabet ends at U+0143
        }
        if (i + len > text.size()) {
            return false;
        }
        for (size_t k = 1; k < len; ++k) {
            cp = (cp << 6) | ((unsigned char) text[i + k] & 0x3F);
        }
        const auto it = to_byte.find(cp);
        if (it == to_byte.end()) {
            return false;
        }
        bytes += (char) it->second;
        i += len;
    }
    return true;
}

bool convert_hf_checkpoint(const std::string & dir, wsp_ggml_type wtype, const std::string & out,
                           ConvertReport * report, std::string * error) {
    WhisperFileConfig cfg;
    cfg.wtype = wtype;
    if (!read_config(in_dir(dir, "config.json"), cfg, error)) {
        return false;
    }
    std::string problem;
    if (!cfg.validate(&problem)) {
        set_error(error, in_dir(dir, "config.json") + ": whisper.cpp cannot hold this model: " + problem);
        return false;
    }
    std::vector<std::string> tokens;
    if (!read_vocab(in_dir(dir, "vocab.json"), tokens, error)) {
        return false;
    }
    if (tokens.size() > (size_t) cfg.n_vocab) {
        set_error(error, in_dir(dir, "vocab.json") + " has " + std::to_string(tokens.size()) +
                             " tokens, more than config.json's vocab_size " + std::to_string(cfg.n_vocab));
        return false;
    }
    const std::string path = in_dir(dir, "model.safetensors");
    if (access(path.c_str(), F_OK) != 0 && access(in_dir(dir, "model.safetensors.index.json").c_str(), F_OK) == 0) {
        set_error(error, dir + " holds a sharded checkpoint (model.safetensors.index.json); convert reads one "
                               "model.safetensors");
        return false;
    }
    auto file = std::make_shared<SafetensorsFile>();
    if (!file->open(path, error)) {
        return false;
    }

    // every tensor of whisper.cpp's file, in the checkpoint with its shape and a dtype we read;
    // nothing of the checkpoint left unread but the tied output projection
    const std::vector<WhisperTensor> tensors = whisper_file_tensors(cfg);
    std::set<std::string>            used    = { kTiedOutput };
    std::set<std::string>            dtypes;
    for (const WhisperTensor & t : tensors) {
        const std::string name = hf_tensor_name(t.name);
        const Stored *    s    = file->find(name);
        if (s == nullptr) {
            set_error(error, path + " has no tensor " + name + " (whisper.cpp's " + t.name + ")");
            return false;
        }
        if (s->dtype == nullptr) {
            set_error(error, path + ": tensor " + name + " is " + file->dtype_name(name) +
                                 "; convert reads F32, F16 and BF16");
            return false;
        }
        if (s->shape != hf_shape(t)) {
            set_error(error, path + ": tensor " + name + " has shape " + shape_text(s->shape) + ", not " +
                                 shape_text(hf_shape(t)) + " as config.json's dimensions make it");
            return false;
        }
        used.insert(name);
        dtypes.insert(s->dtype->name);
    }
    for (const auto & [name, s] : file->tensors()) {
        if (used.count(name) == 0) {
            set_error(error, path + " holds " + name + ", which a whisper model has not: another model's checkpoint?");
            return false;
        }
    }

    const WhisperValues values = [file](const WhisperTensor & t, int64_t r0, int64_t n_rows, float * dst,
                                        std::string *) {
        const Stored &  s   = *file->find(hf_tensor_name(t.name));
        const int64_t   n   = n_rows * t.ne[0];
        const uint8_t * src = s.data + (size_t) (r0 * t.ne[0]) * s.dtype->size;
        switch (s.dtype->type) {
            case WSP_GGML_TYPE_F32: std::memcpy(dst, src, (size_t) n * sizeof(float)); break;
            case WSP_GGML_TYPE_F16:
                wsp_ggml_fp16_to_fp32_row(reinterpret_cast<const wsp_ggml_fp16_t *>(src), dst, n);
                break;
            default: wsp_ggml_bf16_to_fp32_row(reinterpret_cast<const wsp_ggml_bf16_t *>(src), dst, n); break;
        }
        return true;
    };
    size_t bytes = 0;
    if (!write_whisper_model(cfg, tokens, values, out, error, &bytes)) {
        return false;
    }
    if (report != nullptr) {
        report->cfg       = cfg;
        report->n_tensors = tensors.size();
        report->n_tokens  = tokens.size();
        report->bytes     = bytes;
        report->source_dtype.clear();
        for (const std::string & d : dtypes) {
            report->source_dtype += (report->source_dtype.empty() ? "" : "+") + d;
        }
    }
    return true;
}

bool write_hf_checkpoint(const WhisperFileConfig & cfg, const std::string & dir, wsp_ggml_type dtype,
                         std::string * error) {
    if (!cfg.validate(error)) {
        return false;
    }
    if (dtype != WSP_GGML_TYPE_F32 && dtype != WSP_GGML_TYPE_F16) {
        set_error(error, std::string("a checkpoint is written in f32 or f16, not ") + wsp_ggml_type_name(dtype));
        return false;
    }
    if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
        set_error(error, "cannot make the folder " + dir + ": " + std::strerror(errno));
        return false;
    }
    const int32_t d      = cfg.n_audio_state;
    json          config = {
                 { "model_type", "whisper" },
                 { "architectures", { "WhisperForConditionalGeneration" } },
                 { "d_model", d },
                 { "encoder_layers", cfg.n_audio_layer },
                 { "encoder_attention_heads", cfg.n_audio_head },
                 { "encoder_ffn_dim", 4 * d },
                 { "decoder_layers", cfg.n_text_layer },
                 { "decoder_attention_heads", cfg.n_text_head },
                 { "decoder_ffn_dim", 4 * d },
                 { "num_mel_bins", cfg.n_mels },
                 { "vocab_size", cfg.n_vocab },
                 { "max_source_positions", cfg.n_audio_ctx },
                 { "max_target_positions", cfg.n_text_ctx },
                 { "torch_dtype", dtype == WSP_GGML_TYPE_F32 ? "float32" : "float16" },
    };
    if (!write_text(in_dir(dir, "config.json"), config.dump(2) + "\n", error)) {
        return false;
    }
    json                           vocab  = json::object();
    const std::vector<std::string> tokens = whisper_file_tokens(cfg.n_vocab);
    for (size_t id = 0; id < tokens.size(); ++id) {
        vocab[hf_bytes_to_text(tokens[id])] = id;
    }
    // merges.txt: the header of an empty merge list (convert does not read it; a tokenizer would)
    if (!write_text(in_dir(dir, "vocab.json"), vocab.dump() + "\n", error) ||
        !write_text(in_dir(dir, "merges.txt"), "#version: 0.2\n", error)) {
        return false;
    }

    // the header: each tensor's dtype, torch shape and byte range, padded with spaces to 8 bytes
    const size_t                     elem    = dtype == WSP_GGML_TYPE_F32 ? 4 : 2;
    const std::vector<WhisperTensor> tensors = whisper_file_tensors(cfg);
    json                             header  = { { "__metadata__", { { "format", "pt" } } } };
    uint64_t                         offset  = 0;
    for (const WhisperTensor & t : tensors) {
        const uint64_t bytes           = (uint64_t) (t.rows() * t.ne[0]) * elem;
        header[hf_tensor_name(t.name)] = {
            { "dtype", dtype == WSP_GGML_TYPE_F32 ? "F32" : "F16" },
            { "shape", hf_shape(t) },
            { "data_offsets", { offset, offset + bytes } },
        };
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');

    const std::string path = in_dir(dir, "model.safetensors");
    std::ofstream     f(path, std::ios::binary);
    uint8_t           length[8];
    for (int i = 0; i < 8; ++i) {
        length[i] = (uint8_t) ((uint64_t) text.size() >> (8 * i));
    }
    f.write(reinterpret_cast<const char *>(length), 8);
    f.write(text.data(), (std::streamsize) text.size());
    const WhisperValues          values = whisper_random_values(cfg);
    std::vector<float>           row;
    std::vector<wsp_ggml_fp16_t> half;
    for (const WhisperTensor & t : tensors) {
        row.resize((size_t) t.ne[0]);
        for (int64_t r = 0; r < t.rows() && f; ++r) {
            if (!values(t, r, 1, row.data(), error)) {
                return false;
            }
            if (dtype == WSP_GGML_TYPE_F32) {
                f.write(reinterpret_cast<const char *>(row.data()), (std::streamsize)(row.size() * sizeof(float)));
            } else {
                half.resize(row.size());
                wsp_ggml_fp32_to_fp16_row(row.data(), half.data(), (int64_t) row.size());
                f.write(reinterpret_cast<const char *>(half.data()), (std::streamsize)(half.size() * 2));
            }
        }
    }
    f.close();
    if (!f) {
        set_error(error, "cannot write " + path + ": " + std::strerror(errno));
        return false;
    }
    return true;
}

} // namespace wsp::model
