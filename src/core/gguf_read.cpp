// Reading a GGUF file: the header, key-value pairs and tensor infos are parsed with every count
// and length checked against the bytes left in the file before anything is allocated, so a
// malformed file is refused with a logged message and never costs more memory than its size.
// Tensor data is read (into a new wsp_ggml_context) only when the caller asks for it.

#include "gguf_impl.h"

#include "impl.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <unordered_set>

namespace {

using wsp::gguf::Kv;
using wsp::gguf::TensorInfo;

// smallest encodings: a pair (empty key, type, a one-byte value) and a tensor info (empty name,
// n_dims 0, type, offset); counts beyond remaining / these cannot be real
constexpr uint64_t MIN_KV_BYTES     = 8 + 4 + 1;
constexpr uint64_t MIN_TENSOR_BYTES = 8 + 4 + 4 + 8;

struct FileCloser {
    void operator()(FILE * f) const { std::fclose(f); }
};

bool seek(FILE * f, uint64_t pos) {
#if defined(_WIN32)
    return _fseeki64(f, (__int64) pos, SEEK_SET) == 0;
#else
    return fseeko(f, (off_t) pos, SEEK_SET) == 0;
#endif
}

bool file_size(FILE * f, uint64_t & size) {
#if defined(_WIN32)
    if (_fseeki64(f, 0, SEEK_END) != 0) {
        return false;
    }
    const __int64 end = _ftelli64(f);
#else
    if (fseeko(f, 0, SEEK_END) != 0) {
        return false;
    }
    const off_t end = ftello(f);
#endif
    if (end < 0) {
        return false;
    }
    size = (uint64_t) end;
    return seek(f, 0);
}

// Sequential reader over the metadata; every failure is logged once with the file name.
class Parser {
public:
    Parser(FILE * f, uint64_t size, const char * fname) : f_(f), size_(size), fname_(fname) {}

    uint64_t remaining() const { return size_ - pos_; }
    uint64_t pos() const { return pos_; }

    WSP_GGML_ATTRIBUTE_FORMAT(2, 3)
    bool fail(const char * fmt, ...) const {
        char    msg[512];
        va_list args;
        va_start(args, fmt);
        std::vsnprintf(msg, sizeof msg, fmt, args);
        va_end(args);
        WSP_LOG_ERROR("wsp_gguf_init: %s: %s\n", fname_, msg);
        return false;
    }

    bool bytes(void * dst, uint64_t n, const char * what) {
        if (n > remaining()) {
            return fail("truncated: %s needs %" PRIu64 " bytes at offset %" PRIu64 ", %" PRIu64 " are left", what, n,
                        pos_, remaining());
        }
        if (n > 0 && std::fread(dst, 1, (size_t) n, f_) != (size_t) n) {
            return fail("read error at offset %" PRIu64 " (%s)", pos_, what);
        }
        pos_ += n;
        return true;
    }

    template <typename T>
    bool value(T & v, const char * what) {
        return bytes(&v, sizeof v, what);
    }

    bool string(std::string & s, const char * what) {
        uint64_t len = 0;
        if (!value(len, what)) {
            return false;
        }
        if (len > remaining()) {
            return fail("%s has length %" PRIu64 ", more than the %" PRIu64 " bytes left in the file", what, len,
                        remaining());
        }
        s.resize((size_t) len);
        return bytes(s.data(), len, what);
    }

private:
    FILE *       f_;
    uint64_t     size_;
    uint64_t     pos_ = 0;
    const char * fname_;
};

bool read_elements(Parser & p, Kv & kv, uint64_t n) {
    const char * key = kv.key.c_str();
    if (kv.type == WSP_GGUF_TYPE_STRING) {
        if (n > p.remaining() / 8) {
            return p.fail("key \"%s\": %" PRIu64 " strings cannot fit in the %" PRIu64 " bytes left", key, n,
                          p.remaining());
        }
        // grown as strings arrive: a count that lies costs no more than the bytes really read
        for (uint64_t i = 0; i < n; ++i) {
            kv.strs.emplace_back();
            if (!p.string(kv.strs.back(), "a string value")) {
                return false;
            }
        }
        return true;
    }
    const uint64_t esize = wsp::gguf::type_size(kv.type);
    if (n > p.remaining() / esize) {
        return p.fail("key \"%s\": %" PRIu64 " elements of %s cannot fit in the %" PRIu64 " bytes left", key, n,
                      wsp_gguf_type_name(kv.type), p.remaining());
    }
    kv.data.resize((size_t) (n * esize));
    return p.bytes(kv.data.data(), n * esize, "a value");
}

bool read_type(Parser & p, wsp_gguf_type & type, const Kv & kv, const char * what) {
    int32_t t = 0;
    if (!p.value(t, what)) {
        return false;
    }
    if (t < 0 || t >= WSP_GGUF_TYPE_COUNT) {
        return p.fail("key \"%s\": invalid %s %d", kv.key.c_str(), what, t);
    }
    type = (wsp_gguf_type) t;
    return true;
}

bool read_pairs(Parser & p, wsp_gguf_context & ctx, uint64_t n_kv) {
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_kv; ++i) {
        Kv kv;
        if (!p.string(kv.key, "a key")) {
            return false;
        }
        if (kv.key.find('\0') != std::string::npos) {
            return p.fail("key \"%s\" has a NUL byte inside", kv.key.c_str());
        }
        if (!seen.insert(kv.key).second) {
            return p.fail("duplicate key \"%s\"", kv.key.c_str());
        }
        if (!read_type(p, kv.type, kv, "value type")) {
            return false;
        }
        uint64_t n = 1;
        if (kv.type == WSP_GGUF_TYPE_ARRAY) {
            kv.is_array = true;
            if (!read_type(p, kv.type, kv, "array element type") || !p.value(n, "an array length")) {
                return false;
            }
            if (kv.type == WSP_GGUF_TYPE_ARRAY) {
                return p.fail("key \"%s\": nested arrays are not supported", kv.key.c_str());
            }
        }
        if (!read_elements(p, kv, n)) {
            return false;
        }
        ctx.kv.push_back(std::move(kv));
    }
    const int64_t align_id = wsp_gguf_find_key(&ctx, WSP_GGUF_KEY_GENERAL_ALIGNMENT);
    if (align_id >= 0) {
        const Kv & kv = ctx.kv[(size_t) align_id];
        uint32_t   a  = 0;
        if (!kv.is_array && kv.type == WSP_GGUF_TYPE_UINT32) {
            std::memcpy(&a, kv.data.data(), sizeof a);
        }
        if (a == 0 || (a & (a - 1)) != 0) {
            return p.fail("\"%s\" must be a uint32 power of two", WSP_GGUF_KEY_GENERAL_ALIGNMENT);
        }
        ctx.alignment = a;
    }
    return true;
}

// the shape of one tensor info of a valid type: positive extents whose element and byte counts fit
bool check_shape(Parser & p, const wsp_ggml_tensor & t) {
    int64_t n = 1;
    for (int j = 0; j < WSP_GGML_MAX_DIMS; ++j) {
        if (t.ne[j] <= 0) {
            return p.fail("tensor \"%s\": extent %d is %" PRId64 ", not positive", t.name, j, t.ne[j]);
        }
        if (__builtin_mul_overflow(n, t.ne[j], &n)) {
            return p.fail("tensor \"%s\": the element count overflows", t.name);
        }
    }
    const int64_t blck = wsp_ggml_blck_size(t.type);
    if (t.ne[0] % blck != 0) {
        return p.fail("tensor \"%s\": %" PRId64 " elements per row are not whole blocks of %" PRId64 " (%s)", t.name,
                      t.ne[0], blck, wsp_ggml_type_name(t.type));
    }
    uint64_t bytes = wsp_ggml_type_size(t.type);
    if (__builtin_mul_overflow(bytes, (uint64_t) (n / blck), &bytes) || bytes > (uint64_t) INT64_MAX) {
        return p.fail("tensor \"%s\": the byte size overflows", t.name);
    }
    return true;
}

bool read_tensor_infos(Parser & p, wsp_gguf_context & ctx, uint64_t n_tensors) {
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo  ti{};
        std::string name;
        if (!p.string(name, "a tensor name")) {
            return false;
        }
        if (name.find('\0') != std::string::npos) {
            return p.fail("tensor name \"%s\" has a NUL byte inside", name.c_str());
        }
        if (name.size() >= WSP_GGML_MAX_NAME) {
            return p.fail("tensor name \"%.32s...\" is %zu bytes long, the limit is %d", name.c_str(), name.size(),
                          WSP_GGML_MAX_NAME - 1);
        }
        if (!seen.insert(name).second) {
            return p.fail("duplicate tensor name \"%s\"", name.c_str());
        }
        std::memcpy(ti.t.name, name.c_str(), name.size() + 1);
        uint32_t n_dims = 0;
        if (!p.value(n_dims, "n_dims")) {
            return false;
        }
        if (n_dims > WSP_GGML_MAX_DIMS) {
            return p.fail("tensor \"%s\" has %u dimensions, at most %d are supported", ti.t.name, n_dims,
                          WSP_GGML_MAX_DIMS);
        }
        for (int j = 0; j < WSP_GGML_MAX_DIMS; ++j) {
            ti.t.ne[j] = 1;
            if ((uint32_t) j < n_dims && !p.value(ti.t.ne[j], "an extent")) {
                return false;
            }
        }
        int32_t type = 0;
        if (!p.value(type, "a tensor type") || !p.value(ti.offset, "a tensor offset")) {
            return false;
        }
        if (!wsp::gguf::valid_tensor_type(type)) { // before it becomes an enum value
            return p.fail("tensor \"%s\": invalid type %d", ti.t.name, type);
        }
        ti.t.type = (wsp_ggml_type) type;
        if (!check_shape(p, ti.t)) {
            return false;
        }
        wsp::gguf::set_strides(ti.t);
        ctx.tensors.push_back(ti);
    }
    return true;
}

// offsets aligned, tensors disjoint and inside the data section
bool check_layout(Parser & p, const wsp_gguf_context & ctx, uint64_t data_size) {
    std::vector<const TensorInfo *> order;
    order.reserve(ctx.tensors.size());
    for (const TensorInfo & ti : ctx.tensors) {
        if (ti.offset % ctx.alignment != 0) {
            return p.fail("tensor \"%s\": offset %" PRIu64 " is not a multiple of the alignment %zu", ti.t.name,
                          ti.offset, ctx.alignment);
        }
        const uint64_t size = wsp_ggml_nbytes(&ti.t);
        if (ti.offset > data_size || size > data_size - ti.offset) {
            return p.fail("tensor \"%s\": bytes [%" PRIu64 ", +%" PRIu64
                          ") run past the end of the data section (%" PRIu64 " bytes)",
                          ti.t.name, ti.offset, size, data_size);
        }
        order.push_back(&ti);
    }
    std::sort(order.begin(), order.end(),
              [](const TensorInfo * a, const TensorInfo * b) { return a->offset < b->offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const TensorInfo * prev = order[i - 1];
        if (prev->offset + wsp_ggml_nbytes(&prev->t) > order[i]->offset) {
            return p.fail("tensors \"%s\" and \"%s\" overlap", prev->t.name, order[i]->t.name);
        }
    }
    return true;
}

// a context holding every tensor, with its data read from the file unless no_alloc
wsp_ggml_context * load_tensors(Parser & p, FILE * f, wsp_gguf_context & ctx, bool no_alloc) {
    size_t mem_size = ctx.tensors.size() * (wsp_ggml_tensor_overhead() + WSP_GGML_MEM_ALIGN);
    if (!no_alloc) {
        for (const TensorInfo & ti : ctx.tensors) {
            mem_size += wsp_ggml_nbytes(&ti.t); // bounded by the file size (check_layout)
        }
    }
    wsp_ggml_context * gctx = wsp_ggml_init({ mem_size, nullptr, no_alloc });
    if (gctx == nullptr) {
        p.fail("cannot create a context of %zu bytes for the tensors", mem_size);
        return nullptr;
    }
    for (TensorInfo & ti : ctx.tensors) {
        wsp_ggml_tensor * t = wsp_ggml_new_tensor(gctx, ti.t.type, WSP_GGML_MAX_DIMS, ti.t.ne);
        wsp_ggml_set_name(t, ti.t.name);
        if (no_alloc) {
            continue;
        }
        const size_t size = wsp_ggml_nbytes(t);
        if (!seek(f, ctx.data_offset + ti.offset) || std::fread(t->data, 1, size, f) != size) {
            p.fail("cannot read the %zu bytes of tensor \"%s\"", size, ti.t.name);
            wsp_ggml_free(gctx);
            return nullptr;
        }
        ti.t.data = t->data; // the source when this context is written again
    }
    return gctx;
}

bool read_header(Parser & p, wsp_gguf_context & ctx, uint64_t & n_tensors, uint64_t & n_kv) {
    char magic[4];
    if (!p.bytes(magic, 4, "the magic")) {
        return false;
    }
    if (std::memcmp(magic, WSP_GGUF_MAGIC, 4) != 0) {
        return p.fail("bad magic %02x %02x %02x %02x: not a GGUF file", (unsigned char) magic[0],
                      (unsigned char) magic[1], (unsigned char) magic[2], (unsigned char) magic[3]);
    }
    if (!p.value(ctx.version, "the version")) {
        return false;
    }
    if (ctx.version != 2 && ctx.version != 3) {
        if ((ctx.version & 0xFFFF) == 0 && ctx.version != 0) {
            return p.fail("version %08x looks big-endian; only little-endian files are supported", ctx.version);
        }
        return p.fail("version %u is not supported (2 and 3 are)", ctx.version);
    }
    if (!p.value(n_tensors, "the tensor count") || !p.value(n_kv, "the key-value count")) {
        return false;
    }
    if (n_kv > p.remaining() / MIN_KV_BYTES || n_tensors > p.remaining() / MIN_TENSOR_BYTES ||
        n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_BYTES > p.remaining()) {
        return p.fail("%" PRIu64 " keys and %" PRIu64 " tensors cannot fit in the %" PRIu64 " bytes left", n_kv,
                      n_tensors, p.remaining());
    }
    return true;
}

// reads a whole GGUF stream of `size` bytes; `name` (a file name, or "<buffer>") goes into messages
wsp_gguf_context * read_stream(FILE * f, uint64_t size, const char * name, wsp_gguf_init_params params) {
    Parser                            p(f, size, name);
    std::unique_ptr<wsp_gguf_context> ctx(new wsp_gguf_context);
    uint64_t                          n_tensors = 0;
    uint64_t                          n_kv      = 0;
    if (!read_header(p, *ctx, n_tensors, n_kv) || !read_pairs(p, *ctx, n_kv) ||
        !read_tensor_infos(p, *ctx, n_tensors)) {
        return nullptr;
    }
    ctx->data_offset         = WSP_GGML_PAD(p.pos(), (uint64_t) ctx->alignment);
    const uint64_t data_size = size > ctx->data_offset ? size - ctx->data_offset : 0;
    if (!check_layout(p, *ctx, data_size)) {
        return nullptr;
    }
    if (params.ctx != nullptr) {
        wsp_ggml_context * gctx = load_tensors(p, f, *ctx, params.no_alloc);
        if (gctx == nullptr) {
            return nullptr;
        }
        *params.ctx = gctx;
    }
    return ctx.release();
}

wsp_gguf_context * read_file(const char * fname, wsp_gguf_init_params params) {
    std::unique_ptr<FILE, FileCloser> f(std::fopen(fname, "rb"));
    if (!f) {
        WSP_LOG_ERROR("wsp_gguf_init_from_file: cannot open %s\n", fname);
        return nullptr;
    }
    uint64_t size = 0;
    if (!file_size(f.get(), size)) {
        WSP_LOG_ERROR("wsp_gguf_init_from_file: cannot find the size of %s\n", fname);
        return nullptr;
    }
    return read_stream(f.get(), size, fname, params);
}

} // namespace

extern "C" struct wsp_gguf_context * wsp_gguf_init_from_file(const char * fname, struct wsp_gguf_init_params params) {
    if (fname == nullptr) {
        WSP_LOG_ERROR("%s: the file name is NULL\n", __func__);
        return nullptr;
    }
    try {
        return read_file(fname, params);
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: %s: out of memory\n", __func__, fname);
        return nullptr;
    }
}

// the same parser over a memory stream: the bytes are read, never written, and must outlive the call
// only (tensor data is copied into the new context unless no_alloc)
extern "C" struct wsp_gguf_context * wsp_gguf_init_from_buffer(const void * data, size_t size,
                                                               struct wsp_gguf_init_params params) {
    if (data == nullptr || size == 0) {
        WSP_LOG_ERROR("%s: the buffer is %s\n", __func__, data == nullptr ? "NULL" : "empty");
        return nullptr;
    }
    std::unique_ptr<FILE, FileCloser> f(fmemopen(const_cast<void *>(data), size, "rb"));
    if (!f) {
        WSP_LOG_ERROR("%s: cannot open a stream over %zu bytes\n", __func__, size);
        return nullptr;
    }
    try {
        return read_stream(f.get(), size, "<buffer>", params);
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
        return nullptr;
    }
}
