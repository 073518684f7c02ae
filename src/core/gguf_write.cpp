// Serialising a GGUF context: the metadata (header, pairs, tensor infos, zero padding to the
// alignment) into a byte vector, and whole files where the tensor data follows at the offsets of
// the infos, each tensor padded with zeros to the alignment. Tensor data comes from the pointer
// given by add_tensor / set_tensor_data, through the backend when it lives in a device buffer.

#include "gguf_impl.h"

#include "ggml-backend.h"
#include "impl.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

namespace {

using wsp::gguf::Kv;
using wsp::gguf::TensorInfo;

class Writer {
public:
    explicit Writer(std::vector<uint8_t> & out) : out_(out) {}

    void raw(const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        out_.insert(out_.end(), b, b + n);
    }

    template <typename T>
    void value(T v) {
        raw(&v, sizeof v);
    }

    void string(const std::string & s) {
        value<uint64_t>(s.size());
        raw(s.data(), s.size());
    }

    void pad(size_t alignment) { out_.resize(WSP_GGML_PAD(out_.size(), alignment), 0); }

private:
    std::vector<uint8_t> & out_;
};

void write_pair(Writer & w, const Kv & kv) {
    w.string(kv.key);
    if (kv.is_array) {
        w.value<int32_t>(WSP_GGUF_TYPE_ARRAY);
        w.value<int32_t>(kv.type);
        w.value<uint64_t>(kv.n());
    } else {
        w.value<int32_t>(kv.type);
    }
    if (kv.type == WSP_GGUF_TYPE_STRING) {
        for (const std::string & s : kv.strs) {
            w.string(s);
        }
    } else {
        w.raw(kv.data.data(), kv.data.size());
    }
}

void write_tensor_info(Writer & w, const TensorInfo & ti) {
    const int n_dims = wsp_ggml_n_dims(&ti.t);
    w.string(ti.t.name);
    w.value<uint32_t>((uint32_t) n_dims);
    for (int j = 0; j < n_dims; ++j) {
        w.value<int64_t>(ti.t.ne[j]);
    }
    w.value<int32_t>(ti.t.type);
    w.value<uint64_t>(ti.offset);
}

bool put(FILE * f, const void * p, size_t n) {
    return n == 0 || std::fwrite(p, 1, n, f) == n;
}

bool put_zeros(FILE * f, uint64_t n) {
    static const uint8_t zeros[4096] = {};
    while (n > 0) {
        const size_t k = (size_t) std::min<uint64_t>(n, sizeof zeros);
        if (!put(f, zeros, k)) {
            return false;
        }
        n -= k;
    }
    return true;
}

// the tensor's bytes, from host memory or through its backend buffer in chunks
bool put_tensor(FILE * f, const TensorInfo & ti, const char * fname) {
    const size_t size = wsp_ggml_nbytes(&ti.t);
    if (ti.t.data == nullptr) {
        WSP_LOG_ERROR("wsp_gguf_write_to_file: %s: tensor \"%s\" has no data (set it with wsp_gguf_set_tensor_data)\n",
                      fname, ti.t.name);
        return false;
    }
    if (ti.t.buffer == nullptr || wsp_ggml_backend_buffer_is_host(ti.t.buffer)) {
        return put(f, ti.t.data, size);
    }
    std::vector<uint8_t> chunk(std::min<size_t>(size, (size_t) 1 << 22));
    for (size_t done = 0; done < size; done += chunk.size()) {
        const size_t n = std::min(chunk.size(), size - done);
        wsp_ggml_backend_tensor_get(&ti.t, chunk.data(), done, n);
        if (!put(f, chunk.data(), n)) {
            return false;
        }
    }
    return true;
}

struct FileCloser {
    void operator()(FILE * f) const { std::fclose(f); }
};

bool write_file(const wsp_gguf_context & ctx, const char * fname, bool only_meta) {
    std::vector<uint8_t> meta;
    wsp::gguf::write_meta(ctx, meta);
    std::unique_ptr<FILE, FileCloser> f(std::fopen(fname, "wb"));
    if (!f) {
        WSP_LOG_ERROR("wsp_gguf_write_to_file: cannot open %s for writing\n", fname);
        return false;
    }
    bool ok = put(f.get(), meta.data(), meta.size());
    if (ok && !only_meta) {
        std::vector<const TensorInfo *> order;
        for (const TensorInfo & ti : ctx.tensors) {
            order.push_back(&ti);
        }
        std::sort(order.begin(), order.end(),
                  [](const TensorInfo * a, const TensorInfo * b) { return a->offset < b->offset; });
        uint64_t pos = 0; // within the data section
        for (const TensorInfo * ti : order) {
            if (ti->offset < pos) { // never so (gguf_impl.h): refuse rather than write a wrong file
                WSP_LOG_ERROR("wsp_gguf_write_to_file: tensor \"%s\" overlaps the one before it\n", ti->t.name);
                ok = false;
            }
            ok  = ok && put_zeros(f.get(), ti->offset - pos) && put_tensor(f.get(), *ti, fname);
            pos = ti->offset + wsp_ggml_nbytes(&ti->t);
        }
        ok = ok && put_zeros(f.get(), WSP_GGML_PAD(pos, (uint64_t) ctx.alignment) - pos);
    }
    ok = (std::fclose(f.release()) == 0) && ok;
    if (!ok) {
        WSP_LOG_ERROR("wsp_gguf_write_to_file: writing %s failed; the file was removed\n", fname);
        std::remove(fname);
    }
    return ok;
}

} // namespace

namespace wsp::gguf {

void write_meta(const wsp_gguf_context & ctx, std::vector<uint8_t> & out) {
    Writer w(out);
    w.raw(WSP_GGUF_MAGIC, 4);
    w.value<uint32_t>(WSP_GGUF_VERSION);
    w.value<uint64_t>(ctx.tensors.size());
    w.value<uint64_t>(ctx.kv.size());
    for (const Kv & kv : ctx.kv) {
        write_pair(w, kv);
    }
    for (const TensorInfo & ti : ctx.tensors) {
        write_tensor_info(w, ti);
    }
    w.pad(ctx.alignment);
}

} // namespace wsp::gguf

extern "C" {

bool wsp_gguf_write_to_file(const struct wsp_gguf_context * ctx, const char * fname, bool only_meta) {
    if (ctx == nullptr || fname == nullptr) {
        WSP_LOG_ERROR("%s: the context or the file name is NULL\n", __func__);
        return false;
    }
    try {
        return write_file(*ctx, fname, only_meta);
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: %s: out of memory\n", __func__, fname);
        return false;
    }
}

size_t wsp_gguf_get_meta_size(const struct wsp_gguf_context * ctx) {
    if (ctx == nullptr) {
        return 0;
    }
    try {
        std::vector<uint8_t> meta;
        wsp::gguf::write_meta(*ctx, meta);
        return meta.size();
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
        return 0;
    }
}

void wsp_gguf_get_meta_data(const struct wsp_gguf_context * ctx, void * data) {
    if (ctx == nullptr || data == nullptr) {
        WSP_LOG_ERROR("%s: the context or the destination is NULL\n", __func__);
        return;
    }
    try {
        std::vector<uint8_t> meta;
        wsp::gguf::write_meta(*ctx, meta);
        std::memcpy(data, meta.data(), meta.size());
    } catch (const std::bad_alloc &) {
        WSP_LOG_ERROR("%s: out of memory\n", __func__);
    }
}

} // extern "C"
