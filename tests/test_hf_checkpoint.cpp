// Hugging Face checkpoints (tools/model/hf_checkpoint.h): the tensor names against transformers'
// own, GPT-2's byte-level alphabet, and a checkpoint round trip through the converter (the whole
// file equality is tests/models/convert.sh's).

#include "model/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

using namespace wsp::model;

namespace {

// whisper's layout at a few kilobytes of weights (the vocab's embedding apart)
WhisperFileConfig small_config() {
    WhisperFileConfig cfg;
    cfg.n_audio_state = cfg.n_text_state = 32;
    cfg.n_audio_head = cfg.n_text_head = 2;
    cfg.n_audio_layer = cfg.n_text_layer = 1;
    cfg.n_audio_ctx = cfg.n_text_ctx = 16;
    return cfg;
}

} // namespace

TEST(HfCheckpoint, NamesAreTransformers) {
    const std::pair<const char *, const char *> cases[] = {
        { "encoder.positional_embedding", "model.encoder.embed_positions.weight" },
        { "encoder.conv2.bias", "model.encoder.conv2.bias" },
        { "encoder.blocks.3.attn.query.weight", "model.encoder.layers.3.self_attn.q_proj.weight" },
        { "encoder.blocks.11.attn.key.weight", "model.encoder.layers.11.self_attn.k_proj.weight" },
        { "encoder.blocks.0.attn_ln.bias", "model.encoder.layers.0.self_attn_layer_norm.bias" },
        { "encoder.blocks.0.mlp.0.weight", "model.encoder.layers.0.fc1.weight" },
        { "encoder.blocks.0.mlp.2.bias", "model.encoder.layers.0.fc2.bias" },
        { "encoder.blocks.0.mlp_ln.weight", "model.encoder.layers.0.final_layer_norm.weight" },
        { "encoder.ln_post.bias", "model.encoder.layer_norm.bias" },
        { "decoder.token_embedding.weight", "model.decoder.embed_tokens.weight" },
        { "decoder.positional_embedding", "model.decoder.embed_positions.weight" },
        { "decoder.blocks.2.cross_attn.value.bias", "model.decoder.layers.2.encoder_attn.v_proj.bias" },
        { "decoder.blocks.2.cross_attn_ln.weight", "model.decoder.layers.2.encoder_attn_layer_norm.weight" },
        { "decoder.blocks.2.attn.out.weight", "model.decoder.layers.2.self_attn.out_proj.weight" },
        { "decoder.ln.weight", "model.decoder.layer_norm.weight" },
    };
    for (const auto & [ours, theirs] : cases) {
        EXPECT_EQ(hf_tensor_name(ours), theirs) << ours;
    }
    EXPECT_EQ(hf_tensor_name("decoder.blocks.2.attn.rotary"), "");
    EXPECT_EQ(hf_tensor_name("encoder.blocks..attn.query.weight"), "");

    // every tensor of a model has a name, each its own
    WhisperFileConfig cfg;
    cfg.n_audio_layer = cfg.n_text_layer = 2;
    std::set<std::string> names;
    for (const WhisperTensor & t : whisper_file_tensors(cfg)) {
        const std::string n = hf_tensor_name(t.name);
        EXPECT_FALSE(n.empty()) << t.name;
        EXPECT_TRUE(names.insert(n).second) << n;
    }
}

TEST(HfCheckpoint, ByteLevelAlphabetRoundTrips) {
    EXPECT_EQ(hf_bytes_to_text(" the"), "\xC4\xA0the"); // U+0120
    EXPECT_EQ(hf_bytes_to_text("\n"), "\xC4\x8A");      // U+010A
    EXPECT_EQ(hf_bytes_to_text("\xE9"), "\xC3\xA9");    // a printable Latin-1 byte is itself
    std::string all;
    for (int b = 0; b < 256; ++b) {
        all += (char) b;
    }
    std::string back;
    ASSERT_TRUE(hf_text_to_bytes(hf_bytes_to_text(all), back));
    EXPECT_EQ(back, all);
    EXPECT_FALSE(hf_text_to_bytes(" ", back)) << "a plain space is not of the alphabet";
    EXPECT_FALSE(hf_text_to_bytes("\xE2\x82\xAC", back)) << "U+20AC is not of the alphabet";
}

TEST(HfCheckpoint, ConvertsWhatItWroteAndRefusesAHeaderPastTheEnd) {
    WhisperFileConfig cfg = small_config();
    const std::string dir = testing::TempDir() + "hf-checkpoint-test";
    std::string       error;
    ASSERT_TRUE(write_hf_checkpoint(cfg, dir, WSP_GGML_TYPE_F32, &error)) << error;

    ConvertReport     r;
    const std::string out = dir + "/converted.bin";
    ASSERT_TRUE(convert_hf_checkpoint(dir, WSP_GGML_TYPE_F16, out, &r, &error)) << error;
    EXPECT_EQ(r.source_dtype, "F32");
    EXPECT_EQ(r.cfg.describe(), [&] {
        WhisperFileConfig c = cfg;
        c.wtype             = WSP_GGML_TYPE_F16;
        return c.describe();
    }());
    EXPECT_EQ(r.n_tokens, (size_t) whisper_regular_tokens(cfg.n_vocab));
    EXPECT_EQ(r.n_tensors, whisper_file_tensors(cfg).size());

    // a header length beyond the file: refused before anything is read or written
    {
        std::ofstream       f(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
        const unsigned char length[8] = { 0xff, 0xff, 0, 0, 0, 0, 0, 0 };
        f.write(reinterpret_cast<const char *>(length), 8);
        f << "{}";
    }
    std::remove(out.c_str());
    EXPECT_FALSE(convert_hf_checkpoint(dir, WSP_GGML_TYPE_F16, out, &r, &error));
    EXPECT_NE(error.find("header length (65535 bytes) runs past its end"), std::string::npos) << error;
    EXPECT_FALSE(std::ifstream(out).good());
}

namespace {

// the tensor records of a whisper.cpp model file: name -> (type, raw data); header, filters and
// vocab skipped
std::map<std::string, std::pair<int32_t, std::string>> read_records(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    std::string   all((std::istreambuf_iterator<char>(f)), {});
    size_t        at  = 0;
    auto          i32 = [&] {
        int32_t v;
        std::memcpy(&v, all.data() + at, 4);
        at += 4;
        return v;
    };
    at                  = 4 * 12; // magic and hparams
    const int32_t n_mel = i32(), n_fft = i32();
    at += (size_t) n_mel * n_fft * 4;
    for (int32_t n = i32(); n > 0; --n) {
        at += (size_t) i32();
    }
    std::map<std::string, std::pair<int32_t, std::string>> records;
    while (at < all.size()) {
        const int32_t n_dims = i32(), name_len = i32(), type = i32();
        int64_t       count = 1;
        for (int32_t d = 0; d < n_dims; ++d) {
            count *= i32();
        }
        const std::string name = all.substr(at, (size_t) name_len);
        at += (size_t) name_len;
        const size_t bytes = (size_t) count * wsp_ggml_type_size((wsp_ggml_type) type);
        records[name]      = { type, all.substr(at, bytes) };
        at += bytes;
    }
    return records;
}

} // namespace

// An F16 checkpoint (as large-v3's is): every value converted is write-model's value rounded to
// F16 and back, whatever the file's type of the tensor
TEST(HfCheckpoint, F16CheckpointGivesTheRoundedValues) {
    WhisperFileConfig cfg = small_config();
    cfg.wtype             = WSP_GGML_TYPE_F32;
    const std::string dir = testing::TempDir() + "hf-checkpoint-f16";
    std::string       error;
    ASSERT_TRUE(write_hf_checkpoint(cfg, dir, WSP_GGML_TYPE_F16, &error)) << error;
    const std::string out = dir + "/converted-f32.bin";
    ASSERT_TRUE(convert_hf_checkpoint(dir, WSP_GGML_TYPE_F32, out, nullptr, &error)) << error;

    const auto          records = read_records(out);
    const WhisperValues values  = whisper_random_values(cfg);
    size_t              checked = 0;
    for (const WhisperTensor & t : whisper_file_tensors(cfg)) {
        ASSERT_EQ(records.count(t.name), 1u) << t.name;
        const auto & [type, data] = records.at(t.name);
        ASSERT_EQ(type, (int32_t) WSP_GGML_TYPE_F32) << t.name;
        const int64_t      n = t.rows() * t.ne[0];
        std::vector<float> want((size_t) n);
        ASSERT_TRUE(values(t, 0, t.rows(), want.data(), &error)) << error;
        ASSERT_EQ(data.size(), (size_t) n * sizeof(float)) << t.name;
        for (int64_t i = 0; i < n; ++i) {
            float got;
            std::memcpy(&got, data.data() + i * sizeof(float), sizeof(float));
            const float rounded = wsp_ggml_fp16_to_fp32(wsp_ggml_fp32_to_fp16(want[(size_t) i]));
            ASSERT_EQ(got, rounded) << t.name << " [" << i << "]";
        }
        ++checked;
    }
    EXPECT_EQ(checked, records.size());
}
