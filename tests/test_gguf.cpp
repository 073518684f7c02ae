// GGUF reading and writing: every key-value type and array round trips through a file, tensors
// with and without their data, alignment and the metadata bytes; each kind of malformed file is
// refused with a logged error; and a seeded fuzz over mutated files (truncations, byte flips,
// huge counts) where every case either loads consistently or is refused, never crashes.

#include "ggml.h"
#include "gguf.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace {

using Bytes = std::vector<uint8_t>;

// files in memory where the system has /dev/shm: the fuzz writes thousands of them, and a disk
// under load makes that seconds instead of milliseconds
std::string temp_path(const std::string & tag) {
    static const std::string dir     = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : ::testing::TempDir();
    static int               counter = 0;
    return dir + "wsp_gguf_" + std::to_string((long) ::getpid()) + "_" + tag + "_" + std::to_string(counter++) +
           ".gguf";
}

void write_bytes(const std::string & path, const Bytes & b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(b.data()), (std::streamsize) b.size());
}

Bytes read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// little-endian builder for hand-made files
struct Builder {
    Bytes b;

    template <typename T>
    Builder & val(T v) {
        const auto * p = reinterpret_cast<const uint8_t *>(&v);
        b.insert(b.end(), p, p + sizeof v);
        return *this;
    }
    Builder & u32(uint32_t v) { return val(v); }
    Builder & i32(int32_t v) { return val(v); }
    Builder & u64(uint64_t v) { return val(v); }
    Builder & i64(int64_t v) { return val(v); }
    Builder & str(const std::string & s) {
        u64(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Builder & header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        b.insert(b.end(), { 'G', 'G', 'U', 'F' });
        return u32(version).u64(n_tensors).u64(n_kv);
    }
    Builder & kv_u32(const std::string & key, uint32_t v) { return str(key).i32(WSP_GGUF_TYPE_UINT32).u32(v); }
    // an f32 tensor info
    Builder & tensor(const std::string & name, std::vector<int64_t> ne, uint64_t offset,
                     int32_t type = WSP_GGML_TYPE_F32) {
        str(name).u32((uint32_t) ne.size());
        for (int64_t n : ne) {
            i64(n);
        }
        return i32(type).u64(offset);
    }
    Builder & pad(size_t a) {
        b.resize((b.size() + a - 1) / a * a, 0);
        return *this;
    }
    Builder & zeros(size_t n) {
        b.resize(b.size() + n, 0);
        return *this;
    }
};

struct Loaded {
    wsp_gguf_context * gguf = nullptr;
    wsp_ggml_context * ggml = nullptr;
    ~Loaded() {
        wsp_gguf_free(gguf);
        if (ggml) {
            wsp_ggml_free(ggml);
        }
    }
};

void load(const std::string & path, Loaded & out, bool with_ctx, bool no_alloc) {
    wsp_gguf_init_params params = { no_alloc, with_ctx ? &out.ggml : nullptr };
    out.gguf                    = wsp_gguf_init_from_file(path.c_str(), params);
}

// a file refused: NULL, an error logged, no ggml context handed out
void expect_refused(const Bytes & bytes, const std::string & why) {
    const std::string path = temp_path("bad");
    write_bytes(path, bytes);
    wsp::test::LogCapture log;
    wsp_ggml_context *    ggml   = nullptr;
    wsp_gguf_context *    ctx    = wsp_gguf_init_from_file(path.c_str(), { false, &ggml });
    const std::string     logged = log.text();
    EXPECT_EQ(ctx, nullptr) << why;
    EXPECT_EQ(ggml, nullptr) << why;
    EXPECT_GE(log.count(WSP_GGML_LOG_LEVEL_ERROR), 1) << why;
    if (!why.empty()) {
        EXPECT_NE(logged.find(why), std::string::npos) << "expected \"" << why << "\" in: " << logged;
    }
    wsp_gguf_free(ctx);
    std::remove(path.c_str());
}

const char * const kStrs[] = { "alpha", "", "gamma with spaces", "\xce\xb4" };

// every scalar type, a string, and arrays of every element type
void fill_every_type(wsp_gguf_context * ctx) {
    wsp_gguf_set_val_u8(ctx, "u8", 200);
    wsp_gguf_set_val_i8(ctx, "i8", -100);
    wsp_gguf_set_val_u16(ctx, "u16", 60000);
    wsp_gguf_set_val_i16(ctx, "i16", -30000);
    wsp_gguf_set_val_u32(ctx, "u32", 4000000000u);
    wsp_gguf_set_val_i32(ctx, "i32", -2000000000);
    wsp_gguf_set_val_f32(ctx, "f32", 3.25f);
    wsp_gguf_set_val_u64(ctx, "u64", 0xFEDCBA9876543210ull);
    wsp_gguf_set_val_i64(ctx, "i64", -0x123456789ABCll);
    wsp_gguf_set_val_f64(ctx, "f64", -1.0e300);
    wsp_gguf_set_val_bool(ctx, "bool", true);
    wsp_gguf_set_val_str(ctx, "str", "hello gguf");
    const uint8_t  a_u8[]   = { 1, 2, 255 };
    const int8_t   a_i8[]   = { -1, 0, 127 };
    const uint16_t a_u16[]  = { 1, 65535 };
    const int16_t  a_i16[]  = { -32768, 7 };
    const uint32_t a_u32[]  = { 0, 1, 0xFFFFFFFFu };
    const int32_t  a_i32[]  = { -5, 5 };
    const float    a_f32[]  = { 0.5f, -2.0f, 1e-30f };
    const uint64_t a_u64[]  = { 1ull << 63 };
    const int64_t  a_i64[]  = { -1, 1ll << 40 };
    const double   a_f64[]  = { 3.14159, -0.0 };
    const uint8_t  a_bool[] = { 1, 0, 1 };
    wsp_gguf_set_arr_data(ctx, "a.u8", WSP_GGUF_TYPE_UINT8, a_u8, 3);
    wsp_gguf_set_arr_data(ctx, "a.i8", WSP_GGUF_TYPE_INT8, a_i8, 3);
    wsp_gguf_set_arr_data(ctx, "a.u16", WSP_GGUF_TYPE_UINT16, a_u16, 2);
    wsp_gguf_set_arr_data(ctx, "a.i16", WSP_GGUF_TYPE_INT16, a_i16, 2);
    wsp_gguf_set_arr_data(ctx, "a.u32", WSP_GGUF_TYPE_UINT32, a_u32, 3);
    wsp_gguf_set_arr_data(ctx, "a.i32", WSP_GGUF_TYPE_INT32, a_i32, 2);
    wsp_gguf_set_arr_data(ctx, "a.f32", WSP_GGUF_TYPE_FLOAT32, a_f32, 3);
    wsp_gguf_set_arr_data(ctx, "a.u64", WSP_GGUF_TYPE_UINT64, a_u64, 1);
    wsp_gguf_set_arr_data(ctx, "a.i64", WSP_GGUF_TYPE_INT64, a_i64, 2);
    wsp_gguf_set_arr_data(ctx, "a.f64", WSP_GGUF_TYPE_FLOAT64, a_f64, 2);
    wsp_gguf_set_arr_data(ctx, "a.bool", WSP_GGUF_TYPE_BOOL, a_bool, 3);
    wsp_gguf_set_arr_data(ctx, "a.empty", WSP_GGUF_TYPE_INT32, nullptr, 0);
    wsp_gguf_set_arr_str(ctx, "a.str", const_cast<const char **>(kStrs), 4);
}

template <typename T>
void expect_array(const wsp_gguf_context * ctx, const char * key, wsp_gguf_type type, std::vector<T> want) {
    const int64_t id = wsp_gguf_find_key(ctx, key);
    ASSERT_GE(id, 0) << key;
    EXPECT_EQ(wsp_gguf_get_kv_type(ctx, id), WSP_GGUF_TYPE_ARRAY) << key;
    EXPECT_EQ(wsp_gguf_get_arr_type(ctx, id), type) << key;
    ASSERT_EQ(wsp_gguf_get_arr_n(ctx, id), want.size()) << key;
    if (!want.empty()) {
        EXPECT_EQ(std::memcmp(wsp_gguf_get_arr_data(ctx, id), want.data(), want.size() * sizeof(T)), 0) << key;
    }
}

void expect_every_type(const wsp_gguf_context * ctx) {
    auto id = [&](const char * k) { return wsp_gguf_find_key(ctx, k); };
    EXPECT_EQ(wsp_gguf_get_val_u8(ctx, id("u8")), 200);
    EXPECT_EQ(wsp_gguf_get_val_i8(ctx, id("i8")), -100);
    EXPECT_EQ(wsp_gguf_get_val_u16(ctx, id("u16")), 60000);
    EXPECT_EQ(wsp_gguf_get_val_i16(ctx, id("i16")), -30000);
    EXPECT_EQ(wsp_gguf_get_val_u32(ctx, id("u32")), 4000000000u);
    EXPECT_EQ(wsp_gguf_get_val_i32(ctx, id("i32")), -2000000000);
    EXPECT_EQ(wsp_gguf_get_val_f32(ctx, id("f32")), 3.25f);
    EXPECT_EQ(wsp_gguf_get_val_u64(ctx, id("u64")), 0xFEDCBA9876543210ull);
    EXPECT_EQ(wsp_gguf_get_val_i64(ctx, id("i64")), -0x123456789ABCll);
    EXPECT_EQ(wsp_gguf_get_val_f64(ctx, id("f64")), -1.0e300);
    EXPECT_TRUE(wsp_gguf_get_val_bool(ctx, id("bool")));
    EXPECT_STREQ(wsp_gguf_get_val_str(ctx, id("str")), "hello gguf");
    EXPECT_EQ(*static_cast<const uint32_t *>(wsp_gguf_get_val_data(ctx, id("u32"))), 4000000000u);
    const wsp_gguf_type scalar_types[] = { WSP_GGUF_TYPE_UINT8,   WSP_GGUF_TYPE_INT8,   WSP_GGUF_TYPE_UINT16,
                                           WSP_GGUF_TYPE_INT16,   WSP_GGUF_TYPE_UINT32, WSP_GGUF_TYPE_INT32,
                                           WSP_GGUF_TYPE_FLOAT32, WSP_GGUF_TYPE_UINT64, WSP_GGUF_TYPE_INT64,
                                           WSP_GGUF_TYPE_FLOAT64, WSP_GGUF_TYPE_BOOL,   WSP_GGUF_TYPE_STRING };
    const char * const  scalar_keys[]  = { "u8",  "i8",  "u16", "i16", "u32",  "i32",
                                           "f32", "u64", "i64", "f64", "bool", "str" };
    for (size_t i = 0; i < 12; ++i) {
        EXPECT_EQ(wsp_gguf_get_kv_type(ctx, id(scalar_keys[i])), scalar_types[i]) << scalar_keys[i];
    }
    expect_array<uint8_t>(ctx, "a.u8", WSP_GGUF_TYPE_UINT8, { 1, 2, 255 });
    expect_array<int8_t>(ctx, "a.i8", WSP_GGUF_TYPE_INT8, { -1, 0, 127 });
    expect_array<uint16_t>(ctx, "a.u16", WSP_GGUF_TYPE_UINT16, { 1, 65535 });
    expect_array<int16_t>(ctx, "a.i16", WSP_GGUF_TYPE_INT16, { -32768, 7 });
    expect_array<uint32_t>(ctx, "a.u32", WSP_GGUF_TYPE_UINT32, { 0, 1, 0xFFFFFFFFu });
    expect_array<int32_t>(ctx, "a.i32", WSP_GGUF_TYPE_INT32, { -5, 5 });
    expect_array<float>(ctx, "a.f32", WSP_GGUF_TYPE_FLOAT32, { 0.5f, -2.0f, 1e-30f });
    expect_array<uint64_t>(ctx, "a.u64", WSP_GGUF_TYPE_UINT64, { 1ull << 63 });
    expect_array<int64_t>(ctx, "a.i64", WSP_GGUF_TYPE_INT64, { -1, 1ll << 40 });
    expect_array<double>(ctx, "a.f64", WSP_GGUF_TYPE_FLOAT64, { 3.14159, -0.0 });
    expect_array<uint8_t>(ctx, "a.bool", WSP_GGUF_TYPE_BOOL, { 1, 0, 1 });
    expect_array<int32_t>(ctx, "a.empty", WSP_GGUF_TYPE_INT32, {});
    const int64_t s = id("a.str");
    ASSERT_GE(s, 0);
    EXPECT_EQ(wsp_gguf_get_arr_type(ctx, s), WSP_GGUF_TYPE_STRING);
    ASSERT_EQ(wsp_gguf_get_arr_n(ctx, s), 4u);
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_STREQ(wsp_gguf_get_arr_str(ctx, s, i), kStrs[i]);
    }
}

// a ggml context with tensors of several types and shapes, filled with a byte pattern
struct TensorSet {
    wsp_ggml_context * ggml = nullptr;
    TensorSet() {
        ggml = wsp_ggml_init({ 1 << 20, nullptr, false });
        add(WSP_GGML_TYPE_F32, { 5, 3 }, "w.f32");
        add(WSP_GGML_TYPE_F16, { 7 }, "w.f16");
        add(WSP_GGML_TYPE_Q8_0, { 64, 2 }, "w.q8_0");
        add(WSP_GGML_TYPE_I32, { 3, 2, 2 }, "w.i32");
    }
    ~TensorSet() { wsp_ggml_free(ggml); }
    void add(wsp_ggml_type type, std::vector<int64_t> ne, const char * name) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor(ggml, type, (int) ne.size(), ne.data());
        wsp_ggml_set_name(t, name);
        auto * p = static_cast<uint8_t *>(t->data);
        for (size_t i = 0; i < wsp_ggml_nbytes(t); ++i) {
            p[i] = (uint8_t) (i * 31 + ne[0]);
        }
    }
    void add_to(wsp_gguf_context * ctx) const {
        for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(ggml); t; t = wsp_ggml_get_next_tensor(ggml, t)) {
            wsp_gguf_add_tensor(ctx, t);
        }
    }
};

TEST(Gguf, EmptyContextDefaults) {
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(wsp_gguf_get_version(ctx), 3u);
    EXPECT_EQ(wsp_gguf_get_alignment(ctx), 32u);
    EXPECT_EQ(wsp_gguf_get_n_kv(ctx), 0);
    EXPECT_EQ(wsp_gguf_get_n_tensors(ctx), 0);
    EXPECT_EQ(wsp_gguf_get_data_offset(ctx), 0u);
    EXPECT_EQ(wsp_gguf_find_key(ctx, "x"), -1);
    EXPECT_EQ(wsp_gguf_find_tensor(ctx, "x"), -1);
    EXPECT_STREQ(wsp_gguf_type_name(WSP_GGUF_TYPE_UINT8), "u8");
    EXPECT_STREQ(wsp_gguf_type_name(WSP_GGUF_TYPE_STRING), "str");
    EXPECT_STREQ(wsp_gguf_type_name(WSP_GGUF_TYPE_ARRAY), "arr");
    EXPECT_STREQ(wsp_gguf_type_name(WSP_GGUF_TYPE_FLOAT64), "f64");
    EXPECT_EQ(wsp_gguf_type_name(WSP_GGUF_TYPE_COUNT), nullptr);
    EXPECT_EQ(wsp_gguf_get_meta_size(ctx), 32u); // 24 header bytes padded to 32
    wsp_gguf_free(ctx);
}

TEST(Gguf, EveryKvTypeRoundTrips) {
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    fill_every_type(ctx);
    expect_every_type(ctx);
    const std::string path = temp_path("kv");
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, path.c_str(), false));
    Loaded in;
    load(path, in, false, false);
    ASSERT_NE(in.gguf, nullptr);
    EXPECT_EQ(wsp_gguf_get_n_kv(in.gguf), wsp_gguf_get_n_kv(ctx));
    for (int64_t i = 0; i < wsp_gguf_get_n_kv(ctx); ++i) {
        EXPECT_STREQ(wsp_gguf_get_key(in.gguf, i), wsp_gguf_get_key(ctx, i)); // order kept
    }
    expect_every_type(in.gguf);
    wsp_gguf_free(ctx);
    std::remove(path.c_str());
}

TEST(Gguf, GettersRefuseTheWrongTypeWithAMessage) {
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    fill_every_type(ctx);
    wsp::test::LogCapture log;
    const int64_t         f32 = wsp_gguf_find_key(ctx, "f32");
    const int64_t         arr = wsp_gguf_find_key(ctx, "a.i32");
    EXPECT_EQ(wsp_gguf_get_val_u32(ctx, f32), 0u);
    EXPECT_EQ(wsp_gguf_get_val_i32(ctx, arr), 0);
    EXPECT_EQ(wsp_gguf_get_val_str(ctx, f32), nullptr);
    EXPECT_EQ(wsp_gguf_get_val_data(ctx, arr), nullptr);
    EXPECT_EQ(wsp_gguf_get_arr_type(ctx, f32), WSP_GGUF_TYPE_COUNT);
    EXPECT_EQ(wsp_gguf_get_arr_str(ctx, arr, 0), nullptr);
    EXPECT_EQ(wsp_gguf_get_arr_str(ctx, wsp_gguf_find_key(ctx, "a.str"), 4), nullptr);
    EXPECT_EQ(wsp_gguf_get_arr_data(ctx, wsp_gguf_find_key(ctx, "a.str")), nullptr);
    EXPECT_EQ(wsp_gguf_get_val_f64(ctx, -1), 0.0);
    EXPECT_EQ(wsp_gguf_get_key(ctx, 1000), nullptr);
    EXPECT_EQ(wsp_gguf_get_kv_type(ctx, 1000), WSP_GGUF_TYPE_COUNT);
    EXPECT_EQ(wsp_gguf_get_tensor_name(ctx, 0), nullptr);
    EXPECT_EQ(wsp_gguf_get_tensor_type(ctx, 0), WSP_GGML_TYPE_COUNT);
    EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 13);
    EXPECT_TRUE(log.contains("holds f32, not u32"));
    wsp_gguf_free(ctx);
}

TEST(Gguf, SetReplacesRemoveAndSetKv) {
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    wsp_gguf_set_val_i32(ctx, "a", 1);
    wsp_gguf_set_val_i32(ctx, "b", 2);
    wsp_gguf_set_val_str(ctx, "a", "now a string"); // replaces, goes last
    ASSERT_EQ(wsp_gguf_get_n_kv(ctx), 2);
    EXPECT_STREQ(wsp_gguf_get_key(ctx, 0), "b");
    EXPECT_STREQ(wsp_gguf_get_key(ctx, 1), "a");
    EXPECT_STREQ(wsp_gguf_get_val_str(ctx, 1), "now a string");
    EXPECT_EQ(wsp_gguf_remove_key(ctx, "b"), 0);
    EXPECT_EQ(wsp_gguf_remove_key(ctx, "b"), -1);
    EXPECT_EQ(wsp_gguf_get_n_kv(ctx), 1);

    wsp_gguf_context * src = wsp_gguf_init_empty();
    fill_every_type(src);
    wsp_gguf_set_val_u32(src, WSP_GGUF_KEY_GENERAL_ALIGNMENT, 128);
    wsp_gguf_set_kv(ctx, src);
    EXPECT_EQ(wsp_gguf_get_n_kv(ctx), wsp_gguf_get_n_kv(src) + 1);
    expect_every_type(ctx);
    EXPECT_EQ(wsp_gguf_get_alignment(ctx), 128u);
    wsp_gguf_free(src);
    wsp_gguf_free(ctx);
}

TEST(Gguf, TensorsRoundTripWithAndWithoutData) {
    TensorSet          set;
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    wsp_gguf_set_val_str(ctx, "general.name", "tensors");
    set.add_to(ctx);
    ASSERT_EQ(wsp_gguf_get_n_tensors(ctx), 4);
    uint64_t expect_offset = 0;
    for (int64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, i), expect_offset);
        expect_offset += (wsp_gguf_get_tensor_size(ctx, i) + 31) / 32 * 32;
    }
    const std::string path = temp_path("tensors");
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, path.c_str(), false));
    const Bytes file = read_bytes(path);
    EXPECT_EQ(file.size(), wsp_gguf_get_meta_size(ctx) + expect_offset);

    Loaded with_data;
    load(path, with_data, true, false);
    ASSERT_NE(with_data.gguf, nullptr);
    ASSERT_NE(with_data.ggml, nullptr);
    EXPECT_EQ(wsp_gguf_get_data_offset(with_data.gguf), wsp_gguf_get_meta_size(ctx));
    for (wsp_ggml_tensor * t = wsp_ggml_get_first_tensor(set.ggml); t; t = wsp_ggml_get_next_tensor(set.ggml, t)) {
        const int64_t id = wsp_gguf_find_tensor(with_data.gguf, t->name);
        ASSERT_GE(id, 0) << t->name;
        EXPECT_EQ(wsp_gguf_get_tensor_type(with_data.gguf, id), t->type);
        EXPECT_EQ(wsp_gguf_get_tensor_size(with_data.gguf, id), wsp_ggml_nbytes(t));
        EXPECT_EQ(wsp_gguf_get_tensor_offset(with_data.gguf, id), wsp_gguf_get_tensor_offset(ctx, id));
        wsp_ggml_tensor * r = wsp_ggml_get_tensor(with_data.ggml, t->name);
        ASSERT_NE(r, nullptr) << t->name;
        ASSERT_NE(r->data, nullptr);
        for (int j = 0; j < WSP_GGML_MAX_DIMS; ++j) {
            EXPECT_EQ(r->ne[j], t->ne[j]) << t->name;
        }
        EXPECT_EQ(std::memcmp(r->data, t->data, wsp_ggml_nbytes(t)), 0) << t->name;
    }
    // a context read with its data writes the same file again
    const std::string again = temp_path("again");
    ASSERT_TRUE(wsp_gguf_write_to_file(with_data.gguf, again.c_str(), false));
    EXPECT_EQ(read_bytes(again), file);

    Loaded meta_only;
    load(path, meta_only, true, true);
    ASSERT_NE(meta_only.gguf, nullptr);
    ASSERT_NE(meta_only.ggml, nullptr);
    wsp_ggml_tensor * r = wsp_ggml_get_tensor(meta_only.ggml, "w.q8_0");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->data, nullptr);
    EXPECT_EQ(r->type, WSP_GGML_TYPE_Q8_0);

    Loaded no_ctx;
    load(path, no_ctx, false, false);
    ASSERT_NE(no_ctx.gguf, nullptr);
    EXPECT_EQ(wsp_gguf_get_n_tensors(no_ctx.gguf), 4);
    EXPECT_STREQ(wsp_gguf_get_tensor_name(no_ctx.gguf, 3), "w.i32");
    wsp_gguf_free(ctx);
    std::remove(path.c_str());
    std::remove(again.c_str());
}

TEST(Gguf, AlignmentKeyMovesOffsetsAndIsValidated) {
    TensorSet          set;
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    set.add_to(ctx);
    wsp_gguf_set_val_u32(ctx, WSP_GGUF_KEY_GENERAL_ALIGNMENT, 256);
    EXPECT_EQ(wsp_gguf_get_alignment(ctx), 256u);
    for (int64_t i = 0; i < 4; ++i) {
        EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, i) % 256, 0u);
    }
    EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, 1), 256u);
    {
        wsp::test::LogCapture log;
        wsp_gguf_set_val_u32(ctx, WSP_GGUF_KEY_GENERAL_ALIGNMENT, 48);
        wsp_gguf_set_val_i32(ctx, WSP_GGUF_KEY_GENERAL_ALIGNMENT, 64);
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 2);
        EXPECT_EQ(wsp_gguf_get_alignment(ctx), 256u);
    }
    const std::string path = temp_path("align");
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, path.c_str(), false));
    Loaded in;
    load(path, in, true, false);
    ASSERT_NE(in.gguf, nullptr);
    EXPECT_EQ(wsp_gguf_get_alignment(in.gguf), 256u);
    EXPECT_EQ(wsp_gguf_get_data_offset(in.gguf) % 256, 0u);
    EXPECT_EQ(wsp_gguf_get_tensor_offset(in.gguf, 3), wsp_gguf_get_tensor_offset(ctx, 3));
    EXPECT_EQ(
        std::memcmp(wsp_ggml_get_tensor(in.ggml, "w.i32")->data, wsp_ggml_get_tensor(set.ggml, "w.i32")->data, 48), 0);
    wsp_gguf_remove_key(ctx, WSP_GGUF_KEY_GENERAL_ALIGNMENT);
    EXPECT_EQ(wsp_gguf_get_alignment(ctx), 32u);
    EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, 1), 64u); // 60 bytes of w.f32 padded to 32
    wsp_gguf_free(ctx);
    std::remove(path.c_str());
}

TEST(Gguf, MetaSizeAndMetaDataMatchTheFile) {
    TensorSet          set;
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    fill_every_type(ctx);
    set.add_to(ctx);
    const size_t meta_size = wsp_gguf_get_meta_size(ctx);
    EXPECT_EQ(meta_size % 32, 0u);
    Bytes meta(meta_size);
    wsp_gguf_get_meta_data(ctx, meta.data());
    const std::string full = temp_path("full");
    const std::string only = temp_path("meta");
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, full.c_str(), false));
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, only.c_str(), true));
    const Bytes file = read_bytes(full);
    ASSERT_GE(file.size(), meta_size);
    EXPECT_TRUE(std::equal(meta.begin(), meta.end(), file.begin()));
    EXPECT_EQ(read_bytes(only), meta);
    // meta first, the data appended by the caller: the same file
    {
        std::ofstream f(only, std::ios::binary | std::ios::app);
        f.write(reinterpret_cast<const char *>(file.data() + meta_size), (std::streamsize)(file.size() - meta_size));
    }
    EXPECT_EQ(read_bytes(only), file);
    {
        Loaded appended;
        load(only, appended, true, false);
        ASSERT_NE(appended.gguf, nullptr);
        EXPECT_EQ(std::memcmp(wsp_ggml_get_tensor(appended.ggml, "w.f16")->data,
                              wsp_ggml_get_tensor(set.ggml, "w.f16")->data, 14),
                  0);
    }
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, only.c_str(), true));
    // meta alone: the tensors run past the end of the file
    {
        wsp::test::LogCapture log;
        Loaded                in;
        load(only, in, false, true);
        EXPECT_EQ(in.gguf, nullptr);
        EXPECT_TRUE(log.contains("past the end"));
    }
    wsp_gguf_free(ctx);
    std::remove(full.c_str());
    std::remove(only.c_str());
}

TEST(Gguf, SetTensorTypeAndData) {
    wsp_gguf_context * ctx   = wsp_gguf_init_empty();
    wsp_ggml_context * g     = wsp_ggml_init({ 1 << 16, nullptr, true });
    const int64_t      ne[2] = { 64, 4 };
    wsp_ggml_tensor *  a     = wsp_ggml_new_tensor(g, WSP_GGML_TYPE_F32, 2, ne);
    wsp_ggml_tensor *  b     = wsp_ggml_new_tensor(g, WSP_GGML_TYPE_F32, 2, ne);
    wsp_ggml_set_name(a, "a");
    wsp_ggml_set_name(b, "b");
    wsp_gguf_add_tensor(ctx, a);
    wsp_gguf_add_tensor(ctx, b);
    {
        wsp::test::LogCapture log;
        wsp_gguf_add_tensor(ctx, a); // duplicate name
        EXPECT_EQ(wsp_gguf_get_n_tensors(ctx), 2);
        const std::string path = temp_path("nodata");
        EXPECT_FALSE(wsp_gguf_write_to_file(ctx, path.c_str(), false)); // no data anywhere
        EXPECT_TRUE(log.contains("has no data"));
        wsp_gguf_set_tensor_type(ctx, "missing", WSP_GGML_TYPE_F16);
        EXPECT_EQ(log.count(WSP_GGML_LOG_LEVEL_ERROR), 4);
    }
    EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, 1), 1024u);
    wsp_gguf_set_tensor_type(ctx, "a", WSP_GGML_TYPE_Q8_0);
    EXPECT_EQ(wsp_gguf_get_tensor_type(ctx, 0), WSP_GGML_TYPE_Q8_0);
    EXPECT_EQ(wsp_gguf_get_tensor_size(ctx, 0), 4u * 2 * 34);
    EXPECT_EQ(wsp_gguf_get_tensor_offset(ctx, 1), 288u); // 272 padded to 32
    std::vector<uint8_t> da(272, 0xA5), db(1024, 0x5A);
    wsp_gguf_set_tensor_data(ctx, "a", da.data());
    wsp_gguf_set_tensor_data(ctx, "b", db.data());
    const std::string path = temp_path("typed");
    ASSERT_TRUE(wsp_gguf_write_to_file(ctx, path.c_str(), false));
    Loaded in;
    load(path, in, true, false);
    ASSERT_NE(in.gguf, nullptr);
    wsp_ggml_tensor * ra = wsp_ggml_get_tensor(in.ggml, "a");
    wsp_ggml_tensor * rb = wsp_ggml_get_tensor(in.ggml, "b");
    ASSERT_TRUE(ra && rb);
    EXPECT_EQ(ra->type, WSP_GGML_TYPE_Q8_0);
    EXPECT_EQ(std::memcmp(ra->data, da.data(), da.size()), 0);
    EXPECT_EQ(std::memcmp(rb->data, db.data(), db.size()), 0);
    wsp_ggml_free(g);
    wsp_gguf_free(ctx);
    std::remove(path.c_str());
}

// a minimal valid file: one key, one f32 tensor [4] at offset 0, data padded
Builder valid_file() {
    Builder b;
    b.header(1, 1).kv_u32("k", 7).tensor("t", { 4 }, 0).pad(32).zeros(32);
    return b;
}

TEST(Gguf, HandMadeFileLoads) {
    const std::string path = temp_path("hand");
    write_bytes(path, valid_file().b);
    Loaded in;
    load(path, in, true, false);
    ASSERT_NE(in.gguf, nullptr);
    EXPECT_EQ(wsp_gguf_get_val_u32(in.gguf, 0), 7u);
    EXPECT_EQ(wsp_gguf_get_data_offset(in.gguf), 96u); // 74 bytes of metadata padded to 32
    // version 2 has the same layout
    Builder v2;
    v2.header(0, 1, 2).kv_u32("k", 9);
    write_bytes(path, v2.b);
    Loaded in2;
    load(path, in2, false, false);
    ASSERT_NE(in2.gguf, nullptr);
    EXPECT_EQ(wsp_gguf_get_version(in2.gguf), 2u);
    std::remove(path.c_str());
}

TEST(Gguf, RefusesBadHeaders) {
    Bytes magic = valid_file().b;
    magic[0]    = 'X';
    expect_refused(magic, "bad magic");
    expect_refused(Builder().header(0, 0, 1).b, "version 1 is not supported");
    expect_refused(Builder().header(0, 0, 4).b, "version 4 is not supported");
    expect_refused(Builder().header(0, 0, 0x03000000).b, "big-endian");
    expect_refused(Bytes{ 'G', 'G' }, "truncated");
    expect_refused(Builder().header(0, 1ull << 60).b, "cannot fit");
    expect_refused(Builder().header(1ull << 58, 0).b, "cannot fit");
    expect_refused(Builder().header(1, 1).zeros(20).b, "cannot fit");
}

TEST(Gguf, RefusesBadPairs) {
    expect_refused(Builder().header(0, 1).u64(1ull << 62).zeros(16).b, "has length");
    expect_refused(Builder().header(0, 1).str("k").i32(13).zeros(8).b, "invalid value type 13");
    expect_refused(Builder().header(0, 1).str("k").i32(-1).zeros(8).b, "invalid value type -1");
    expect_refused(Builder().header(0, 1).str("k").i32(WSP_GGUF_TYPE_ARRAY).i32(WSP_GGUF_TYPE_ARRAY).u64(1).zeros(16).b,
                   "nested arrays");
    expect_refused(Builder().header(0, 1).str("k").i32(WSP_GGUF_TYPE_ARRAY).i32(99).u64(1).zeros(16).b,
                   "invalid array element type 99");
    expect_refused(
        Builder().header(0, 1).str("k").i32(WSP_GGUF_TYPE_ARRAY).i32(WSP_GGUF_TYPE_UINT32).u64(1ull << 61).zeros(16).b,
        "cannot fit");
    expect_refused(
        Builder().header(0, 1).str("k").i32(WSP_GGUF_TYPE_ARRAY).i32(WSP_GGUF_TYPE_STRING).u64(1ull << 40).zeros(16).b,
        "cannot fit");
    expect_refused(Builder().header(0, 1).str("k").i32(WSP_GGUF_TYPE_STRING).u64(~0ull).zeros(16).b, "has length");
    expect_refused(Builder().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).b, "duplicate key");
    expect_refused(Builder().header(0, 1).kv_u32(WSP_GGUF_KEY_GENERAL_ALIGNMENT, 0).b, "power of two");
    expect_refused(Builder().header(0, 1).kv_u32(WSP_GGUF_KEY_GENERAL_ALIGNMENT, 24).b, "power of two");
    expect_refused(Builder().header(0, 1).str(WSP_GGUF_KEY_GENERAL_ALIGNMENT).i32(WSP_GGUF_TYPE_INT32).i32(32).b,
                   "power of two");
    expect_refused(Builder().header(0, 1).str("k").i32(WSP_GGUF_TYPE_UINT64).u32(1).b, "cannot fit");
}

TEST(Gguf, RefusesBadTensorInfos) {
    auto one = [](std::vector<int64_t> ne, uint64_t offset, int32_t type = WSP_GGML_TYPE_F32) {
        return Builder().header(1, 0).tensor("t", ne, offset, type).pad(32).zeros(256).b;
    };
    expect_refused(one({ 1, 1, 1, 1, 1 }, 0), "5 dimensions");
    expect_refused(one({ 4, 0 }, 0), "not positive");
    expect_refused(one({ -4 }, 0), "not positive");
    expect_refused(one({ 1ll << 40, 1ll << 40 }, 0), "element count overflows");
    expect_refused(one({ INT64_MAX / 2 }, 0), "byte size overflows");
    expect_refused(one({ 4 }, 0, 4), "invalid type 4");
    expect_refused(one({ 4 }, 0, 1000), "invalid type 1000");
    expect_refused(one({ 33 }, 0, WSP_GGML_TYPE_Q8_0), "whole blocks");
    expect_refused(one({ 4 }, 16), "not a multiple of the alignment");
    expect_refused(one({ 4 }, 256), "past the end");
    expect_refused(one({ 128 }, 0), "past the end");
    expect_refused(Builder().header(1, 0).str(std::string(80, 'n')).u32(1).i64(4).i32(0).u64(0).pad(32).zeros(32).b,
                   "the limit is 63");
    expect_refused(Builder().header(0, 1).str(std::string("a\0b", 3)).i32(WSP_GGUF_TYPE_UINT8).val<uint8_t>(1).b,
                   "NUL byte");
    expect_refused(Builder().header(1, 0).tensor(std::string("t\0x", 3), { 4 }, 0).pad(32).zeros(32).b, "NUL byte");
    expect_refused(Builder().header(2, 0).tensor("t", { 4 }, 0).tensor("t", { 4 }, 32).pad(32).zeros(64).b,
                   "duplicate tensor name");
    expect_refused(Builder().header(2, 0).tensor("a", { 16 }, 0).tensor("b", { 4 }, 32).pad(32).zeros(96).b, "overlap");
    expect_refused(Builder().header(1, 0).tensor("t", { 4 }, 0).b, "past the end");
}

// A loaded mutation reads back consistently: keys, values, tensor infos and data.
void check_loaded(const Loaded & in, const std::string & path, size_t file_size) {
    for (int64_t i = 0; i < wsp_gguf_get_n_kv(in.gguf); ++i) {
        ASSERT_NE(wsp_gguf_get_key(in.gguf, i), nullptr);
        EXPECT_EQ(wsp_gguf_find_key(in.gguf, wsp_gguf_get_key(in.gguf, i)), i);
        const wsp_gguf_type type = wsp_gguf_get_kv_type(in.gguf, i);
        ASSERT_LT(type, WSP_GGUF_TYPE_COUNT);
        if (type == WSP_GGUF_TYPE_ARRAY) {
            const wsp_gguf_type et = wsp_gguf_get_arr_type(in.gguf, i);
            ASSERT_NE(et, WSP_GGUF_TYPE_ARRAY);
            const size_t n = wsp_gguf_get_arr_n(in.gguf, i);
            ASSERT_LE(n, file_size);
            if (et == WSP_GGUF_TYPE_STRING) {
                for (size_t j = 0; j < n; ++j) {
                    ASSERT_NE(wsp_gguf_get_arr_str(in.gguf, i, j), nullptr);
                }
            } else if (n > 0) {
                ASSERT_NE(wsp_gguf_get_arr_data(in.gguf, i), nullptr);
            }
        } else if (type == WSP_GGUF_TYPE_STRING) {
            ASSERT_NE(wsp_gguf_get_val_str(in.gguf, i), nullptr);
        } else {
            ASSERT_NE(wsp_gguf_get_val_data(in.gguf, i), nullptr);
        }
    }
    const size_t data_offset = wsp_gguf_get_data_offset(in.gguf);
    const Bytes  file        = read_bytes(path);
    for (int64_t i = 0; i < wsp_gguf_get_n_tensors(in.gguf); ++i) {
        const char * name = wsp_gguf_get_tensor_name(in.gguf, i);
        EXPECT_EQ(wsp_gguf_find_tensor(in.gguf, name), i);
        const size_t offset = wsp_gguf_get_tensor_offset(in.gguf, i);
        const size_t size   = wsp_gguf_get_tensor_size(in.gguf, i);
        ASSERT_LE(data_offset + offset + size, file_size);
        wsp_ggml_tensor * t = wsp_ggml_get_tensor(in.ggml, name);
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(wsp_ggml_nbytes(t), size);
        EXPECT_EQ(std::memcmp(t->data, file.data() + data_offset + offset, size), 0);
    }
}

// Every mutation either loads and reads back consistently, or is refused with a message.
// Returns whether the file loaded.
bool check_consistent(const std::string & path, size_t file_size) {
    Loaded in;
    load(path, in, true, false);
    if (in.gguf == nullptr) {
        EXPECT_EQ(in.ggml, nullptr);
        return false;
    }
    check_loaded(in, path, file_size);
    return true;
}

Bytes fuzz_base() {
    TensorSet          set;
    wsp_gguf_context * ctx = wsp_gguf_init_empty();
    wsp_gguf_set_val_u32(ctx, "n", 3);
    wsp_gguf_set_val_str(ctx, "s", "abc");
    const char * strs[] = { "x", "yz" };
    wsp_gguf_set_arr_str(ctx, "as", strs, 2);
    const int16_t vals[] = { 1, -2, 3 };
    wsp_gguf_set_arr_data(ctx, "ai", WSP_GGUF_TYPE_INT16, vals, 3);
    wsp_gguf_add_tensor(ctx, wsp_ggml_get_tensor(set.ggml, "w.f16"));
    wsp_gguf_add_tensor(ctx, wsp_ggml_get_tensor(set.ggml, "w.i32"));
    const std::string path = temp_path("base");
    EXPECT_TRUE(wsp_gguf_write_to_file(ctx, path.c_str(), false));
    wsp_gguf_free(ctx);
    Bytes b = read_bytes(path);
    std::remove(path.c_str());
    return b;
}

TEST(Gguf, FuzzMutatedFilesLoadOrAreRefused) {
    const Bytes base = fuzz_base();
    ASSERT_GT(base.size(), 100u);
    const std::string     path   = temp_path("fuzz");
    int                   loaded = 0, refused = 0;
    wsp::test::LogCapture log; // thousands of refusals: keep them off the console
    auto                  run = [&](const Bytes & b) {
        write_bytes(path, b);
        (check_consistent(path, b.size()) ? loaded : refused)++;
        log.clear();
    };
    run(base);
    for (size_t len = 0; len < base.size(); ++len) { // every truncation
        run(Bytes(base.begin(), base.begin() + (std::ptrdiff_t) len));
    }
    std::mt19937 rng(1234);
    for (int i = 0; i < 3000; ++i) { // byte flips
        Bytes     b     = base;
        const int flips = 1 + (int) (rng() % 4);
        for (int k = 0; k < flips; ++k) {
            b[rng() % b.size()] ^= (uint8_t) (1u << (rng() % 8));
        }
        run(b);
    }
    const uint64_t huge[] = { ~0ull, 1ull << 63, 1ull << 62, 1ull << 32, 0xFFFFFFFFull, 0x7FFFFFFFFFFFFFFFull };
    for (size_t pos = 4; pos + 8 <= base.size(); ++pos) { // counts and lengths, everywhere
        for (uint64_t v : huge) {
            Bytes b = base;
            std::memcpy(b.data() + pos, &v, 8);
            run(b);
        }
    }
    for (int i = 0; i < 500; ++i) { // random overwrites of random lengths
        Bytes        b   = base;
        const size_t pos = rng() % b.size();
        const size_t n   = std::min<size_t>(1 + rng() % 16, b.size() - pos);
        for (size_t k = 0; k < n; ++k) {
            b[pos + k] = (uint8_t) rng();
        }
        if (rng() % 4 == 0) {
            b.resize(rng() % b.size());
        }
        run(b);
    }
    std::remove(path.c_str());
    // both outcomes occur: flips inside values and tensor data load, the rest is refused
    EXPECT_GT(loaded, 100);
    EXPECT_GT(refused, 1000);
    std::printf("fuzz: %d mutations loaded, %d refused\n", loaded, refused);
}

} // namespace
