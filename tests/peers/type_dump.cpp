// type_dump DIR: the super-block types' converters through the public API, written to files that
// tests/peers/types.sh compares byte for byte between builds: this program is built against ours
// (tests/CMakeLists.txt) and against the client's ggml (bench/peers). For each type:
//   DIR/<type>        64 seeded random blocks dequantized (to_float); the scale fields hold finite
//                     values (random bytes there could be NaN or infinite, which both would pass
//                     through alike but prove nothing)
//   DIR/<type>.ref    seeded floats quantized by the type's reference quantizer (from_float_ref)
//   DIR/<type>.chunk  the same floats through wsp_ggml_wsp_quantize_chunk (the name both headers
//                     have) without an importance matrix (not for Q8_K, which the client's aborts on)
// A type whose converter is missing gets a line saying so and no file. The grid i-quants are
// dequantized only: ours reads the client's codebooks (Note [client codebooks]) and has no quantizer.
//
// The floats are 24 blocks of 256 values, each block a case the quantizers treat apart: gaussian
// values at scales from 1e-3 to 10, all positive, all negative, one constant value, a single
// outlier, half zeros, whisper-like weights, all zero, and all below the all-zero threshold 1e-15.
// The last two are left out of IQ4_NL's reference, where the client packs the quants of the block
// before (its stack array left as the previous block wrote it), which is nothing to agree with.

#include "ggml.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int QK = 256;

bool write_file(const std::string & path, const void * data, size_t bytes) {
    FILE * f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, bytes, f) != bytes || std::fclose(f) != 0) {
        std::fprintf(stderr, "type_dump: cannot write %s\n", path.c_str());
        return false;
    }
    return true;
}

// the blocks of floats to quantize, and which of them are all zero (or below the threshold)
std::vector<float> quantizer_input(std::vector<bool> & zero_block) {
    std::mt19937                          rng(7);
    std::normal_distribution<float>       normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    std::vector<float>                    x;
    auto                                  block = [&](bool zero, auto value) {
        for (int i = 0; i < QK; ++i) {
            x.push_back(value(i));
        }
        zero_block.push_back(zero);
    };
    for (float s : { 1e-3f, 1e-2f, 0.1f, 0.5f, 1.0f, 2.0f, 10.0f }) {
        for (int rep = 0; rep < 2; ++rep) {
            block(false, [&](int) { return s * normal(rng); });
        }
    }
    block(false, [&](int) { return 0.5f + 1.5f * uniform(rng); });
    block(false, [&](int) { return -0.5f - 1.5f * uniform(rng); });
    block(false, [&](int) { return 0.75f; });
    block(false, [&](int i) { return i == 77 ? 40.0f : 0.05f * normal(rng); });
    block(false, [&](int i) { return i % 2 == 0 ? 0.0f : normal(rng); });
    block(false, [&](int) { return 0.2f * (uniform(rng) - 0.5f); });
    block(false, [&](int i) { return i < 128 ? normal(rng) : 1e-4f * normal(rng); });
    block(false, [&](int i) { return (float) (i % 7) - 3.0f; });
    block(true, [&](int) { return 0.0f; });
    block(true, [&](int) { return 1e-20f * normal(rng); });
    return x;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: type_dump DIR\n");
        return 2;
    }
    const std::string dir = argv[1];
    // each type, and where its scales are in a block: fp16 fields, or Q8_K's one f32
    struct Case {
        wsp_ggml_type    type;
        std::vector<int> fp16_at;
        int              f32_at;
        bool             grid = false; // a grid i-quant: dequantized only (ours has no quantizer)
    };
    const Case cases[] = {
        { WSP_GGML_TYPE_Q2_K, { 80, 82 }, -1 },
        { WSP_GGML_TYPE_Q3_K, { 108 }, -1 },
        { WSP_GGML_TYPE_Q4_K, { 0, 2 }, -1 },
        { WSP_GGML_TYPE_Q5_K, { 0, 2 }, -1 },
        { WSP_GGML_TYPE_Q6_K, { 208 }, -1 },
        { WSP_GGML_TYPE_Q8_K, {}, 0 },
        { WSP_GGML_TYPE_TQ1_0, { 52 }, -1 },
        { WSP_GGML_TYPE_TQ2_0, { 64 }, -1 },
        { WSP_GGML_TYPE_IQ4_NL, { 0 }, -1 },
        { WSP_GGML_TYPE_IQ4_XS, { 0 }, -1 },
        // the grid i-quants (IQ1_M's d is in the scales: below)
        { WSP_GGML_TYPE_IQ2_XXS, { 0 }, -1, true },
        { WSP_GGML_TYPE_IQ2_XS, { 0 }, -1, true },
        { WSP_GGML_TYPE_IQ2_S, { 0 }, -1, true },
        { WSP_GGML_TYPE_IQ3_XXS, { 0 }, -1, true },
        { WSP_GGML_TYPE_IQ3_S, { 0 }, -1, true },
        { WSP_GGML_TYPE_IQ1_S, { 0 }, -1, true },
        { WSP_GGML_TYPE_IQ1_M, {}, -1, true },
    };
    std::vector<bool>        zero_block;
    const std::vector<float> input = quantizer_input(zero_block);

    constexpr int                         n_blocks = 64;
    std::mt19937                          rng(42);
    std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
    for (const Case & c : cases) {
        const auto *         tr   = wsp_ggml_get_type_traits(c.type);
        const std::string    name = tr->type_name;
        const size_t         bs   = tr->type_size;
        std::vector<uint8_t> blocks(bs * n_blocks);
        for (uint8_t & b : blocks) {
            b = (uint8_t) rng();
        }
        for (int i = 0; i < n_blocks; ++i) {
            for (int at : c.fp16_at) {
                const wsp_ggml_fp16_t h = wsp_ggml_fp32_to_fp16(scale(rng));
                std::memcpy(&blocks[i * bs + at], &h, sizeof(h));
            }
            if (c.f32_at >= 0) {
                const float v = scale(rng);
                std::memcpy(&blocks[i * bs + c.f32_at], &v, sizeof(v));
            }
            if (c.type == WSP_GGML_TYPE_IQ1_M) { // d's 16 bits in the top nibbles of the 4 scale words
                const wsp_ggml_fp16_t h = wsp_ggml_fp32_to_fp16(scale(rng));
                for (int w = 0; w < 4; ++w) {
                    uint8_t & top = blocks[i * bs + 48 + 2 * w + 1];
                    top           = (uint8_t) ((top & 0x0f) | (((h >> (4 * w)) & 0xf) << 4));
                }
            }
        }
        // the blocks were drawn in any case, so the next type's are the same with or without this one
        if (tr->to_float == nullptr) {
            std::printf("%s: no to_float\n", name.c_str());
        } else {
            std::vector<float> y((size_t) (n_blocks * tr->blck_size));
            tr->to_float(blocks.data(), y.data(), (int64_t) y.size());
            if (!write_file(dir + "/" + name, y.data(), y.size() * sizeof(float))) {
                return 1;
            }
            std::printf("%s: %zu values\n", name.c_str(), y.size());
        }

        if (c.grid) {
            continue;
        }
        // the quantizers, into zeroed buffers (Q8_K's reference leaves an all-zero block's sums)
        std::vector<float> x = input;
        if (c.type == WSP_GGML_TYPE_IQ4_NL) { // see the top: its reference's zero blocks are not defined
            std::vector<float> kept;
            for (size_t b = 0; b < zero_block.size(); ++b) {
                if (!zero_block[b]) {
                    kept.insert(kept.end(), input.begin() + (long) (b * QK), input.begin() + (long) ((b + 1) * QK));
                }
            }
            x = kept;
        }
        const size_t row_bytes = wsp_ggml_row_size(c.type, QK);
        if (tr->from_float_ref == nullptr) {
            std::printf("%s: no from_float_ref\n", name.c_str());
        } else {
            std::vector<uint8_t> q(row_bytes * (x.size() / QK), 0);
            tr->from_float_ref(x.data(), q.data(), (int64_t) x.size());
            if (!write_file(dir + "/" + name + ".ref", q.data(), q.size())) {
                return 1;
            }
            std::printf("%s.ref: %zu bytes\n", name.c_str(), q.size());
        }
        if (c.type != WSP_GGML_TYPE_Q8_K) {
            const int64_t        rows = (int64_t) (input.size() / QK);
            std::vector<uint8_t> q(row_bytes * (size_t) rows, 0);
            const size_t         n = wsp_ggml_wsp_quantize_chunk(c.type, input.data(), q.data(), 0, rows, QK, nullptr);
            if (n != q.size()) {
                std::printf("%s: quantize_chunk wrote %zu of %zu bytes\n", name.c_str(), n, q.size());
            } else if (!write_file(dir + "/" + name + ".chunk", q.data(), q.size())) {
                return 1;
            } else {
                std::printf("%s.chunk: %zu bytes\n", name.c_str(), q.size());
            }
        }
    }
    return 0;
}
