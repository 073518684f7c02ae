// dequant_dump DIR: dequantizes 64 seeded random blocks of each super-block type through the public
// type traits (wsp_ggml_get_type_traits(t)->to_float) and writes the floats to DIR/<type name>, one
// file per type that has a dequantizer (a line names those without). Built against ours
// (tests/CMakeLists.txt) and against the client's ggml (bench/peers), so that tests/peers/dequant.sh
// can compare the files byte for byte. The scale fields hold finite values (random bytes there
// could be NaN or infinite, which both would pass through alike but prove nothing).

#include "ggml.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: dequant_dump DIR\n");
        return 2;
    }
    // each type, and where its scales are in a block: fp16 fields, or Q8_K's one f32
    struct Case {
        wsp_ggml_type    type;
        std::vector<int> fp16_at;
        int              f32_at;
    };
    const Case cases[] = {
        { WSP_GGML_TYPE_Q2_K, { 80, 82 }, -1 }, { WSP_GGML_TYPE_Q3_K, { 108 }, -1 },
        { WSP_GGML_TYPE_Q4_K, { 0, 2 }, -1 },   { WSP_GGML_TYPE_Q5_K, { 0, 2 }, -1 },
        { WSP_GGML_TYPE_Q6_K, { 208 }, -1 },    { WSP_GGML_TYPE_Q8_K, {}, 0 },
        { WSP_GGML_TYPE_TQ1_0, { 52 }, -1 },    { WSP_GGML_TYPE_TQ2_0, { 64 }, -1 },
        { WSP_GGML_TYPE_IQ4_NL, { 0 }, -1 },    { WSP_GGML_TYPE_IQ4_XS, { 0 }, -1 },
    };
    constexpr int                         n_blocks = 64;
    std::mt19937                          rng(42);
    std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
    for (const Case & c : cases) {
        const auto *         tr = wsp_ggml_get_type_traits(c.type);
        const size_t         bs = tr->type_size;
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
        }
        if (tr->to_float == nullptr) { // the blocks were drawn all the same: the next type's are alike
            std::printf("%s: no to_float\n", tr->type_name);
            continue;
        }
        std::vector<float> y((size_t) (n_blocks * tr->blck_size));
        tr->to_float(blocks.data(), y.data(), (int64_t) y.size());
        const std::string path = std::string(argv[1]) + "/" + tr->type_name;
        FILE *            f    = std::fopen(path.c_str(), "wb");
        if (f == nullptr || std::fwrite(y.data(), sizeof(float), y.size(), f) != y.size() || std::fclose(f) != 0) {
            std::fprintf(stderr, "dequant_dump: cannot write %s\n", path.c_str());
            return 1;
        }
        std::printf("%s: %zu values\n", tr->type_name, y.size());
    }
    return 0;
}
