// Split buffer type and buffers (see split_buffer.h).
// tensor_split: one share per device of the reg; NULL or all zeros means the reg's default shares
// (partition::default_shares, taken when the reg's first split buffer type is made and kept, so
// that NULL names one buffer type). Rows go to the devices by Note [partition], in units of the
// row granularity; a device may get none.

#include "split_buffer.h"

#include "../core/impl.h"
#include "partition.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace wsp::split {

namespace {

constexpr size_t SLICE_ALIGN = 256; // each device slice is padded to this many bytes
constexpr size_t ALIGNMENT   = 128;

struct BuftCtx {
    wsp_ggml_backend_reg_t reg;
    int                    main;
    int                    quant_rows;
    std::vector<float>     shares; // per device, summing to 1
    std::string            name;
};

// a device buffer that slices are carved from, in order
struct Pool {
    wsp_ggml_backend_buffer_t buffer = nullptr;
    size_t                    used   = 0;
};

struct BufferCtx {
    BuftCtx *                                 buft;
    std::vector<std::unique_ptr<SplitTensor>> tensors;
    wsp_ggml_backend_buffer_usage             usage = WSP_GGML_BACKEND_BUFFER_USAGE_ANY;
    std::vector<Pool>                         pools; // [device]: from reserve()
    std::vector<wsp_ggml_backend_buffer_t>    owned; // every device buffer, pools included
};

// the handle's data pointers are never dereferenced; a fixed non-NULL base keeps them distinct
char * const FAKE_BASE = reinterpret_cast<char *>(0x1000);

BuftCtx & buft_ctx(wsp_ggml_backend_buffer_type_t buft) {
    return *static_cast<BuftCtx *>(buft->context);
}

BufferCtx & buf_ctx(wsp_ggml_backend_buffer_t b) {
    return *static_cast<BufferCtx *>(b->context);
}

size_t n_devices(const BuftCtx & c) {
    return c.shares.size();
}

size_t slice_bytes(wsp_ggml_type type, int64_t ne0, int64_t rows) {
    return WSP_GGML_PAD(wsp_ggml_row_size(type, ne0) * (size_t) rows, SLICE_ALIGN);
}

void free_owned(BufferCtx & ctx) {
    for (wsp_ggml_backend_buffer_t b : ctx.owned) {
        wsp_ggml_backend_buffer_free(b);
    }
    ctx.owned.clear();
    ctx.pools.clear();
    ctx.tensors.clear();
}

// memory for `bytes` of a slice on device d: from the device's pool where it has room, else a
// buffer of its own; NULL (logged by the device) when the device has no memory left
wsp_ggml_backend_buffer_t carve(BufferCtx & ctx, size_t d, size_t bytes, void ** data) {
    if (d < ctx.pools.size() && ctx.pools[d].buffer != nullptr &&
        ctx.pools[d].used + bytes <= wsp_ggml_backend_buffer_get_size(ctx.pools[d].buffer)) {
        Pool & p = ctx.pools[d];
        *data    = static_cast<char *>(wsp_ggml_backend_buffer_get_base(p.buffer)) + p.used;
        p.used += bytes;
        return p.buffer;
    }
    wsp_ggml_backend_dev_t    dev = wsp_ggml_backend_reg_dev_get(ctx.buft->reg, d);
    wsp_ggml_backend_buffer_t sub = wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_dev_buffer_type(dev), bytes);
    if (sub == nullptr) {
        return nullptr;
    }
    wsp_ggml_backend_buffer_set_usage(sub, ctx.usage);
    ctx.owned.push_back(sub);
    *data = wsp_ggml_backend_buffer_get_base(sub);
    return sub;
}

//
// buffer
//

void buf_free(wsp_ggml_backend_buffer_t b) {
    free_owned(buf_ctx(b));
    delete &buf_ctx(b);
}

void * buf_base(wsp_ggml_backend_buffer_t) {
    return FAKE_BASE;
}

// device d's rows [range) of t, as an ordinary tensor at data in buffer sub
Slice make_slice(const BufferCtx & ctx, const wsp_ggml_tensor * t, size_t d, std::pair<int64_t, int64_t> range,
                 wsp_ggml_backend_buffer_t sub, void * data) {
    const int64_t rows = range.second - range.first;
    Slice         s{ (int) d, range.first, range.second, sub, {} };
    s.tensor.type   = t->type;
    s.tensor.ne[0]  = t->ne[0];
    s.tensor.ne[1]  = rows;
    s.tensor.ne[2]  = 1;
    s.tensor.ne[3]  = 1;
    s.tensor.nb[0]  = wsp_ggml_type_size(t->type);
    s.tensor.nb[1]  = wsp_ggml_row_size(t->type, t->ne[0]);
    s.tensor.nb[2]  = s.tensor.nb[1] * (size_t) rows;
    s.tensor.nb[3]  = s.tensor.nb[2];
    s.tensor.op     = WSP_GGML_OP_NONE;
    s.tensor.buffer = sub;
    s.tensor.data   = data;
    std::snprintf(s.tensor.name, sizeof(s.tensor.name), "%.50s#%s", t->name,
                  wsp_ggml_backend_dev_name(wsp_ggml_backend_reg_dev_get(ctx.buft->reg, d)));
    return s;
}

wsp_ggml_status buf_init_tensor(wsp_ggml_backend_buffer_t b, wsp_ggml_tensor * t) {
    if (t->view_src != nullptr) {
        WSP_LOG_ERROR("split buffer: %s is a view; views of split tensors are not supported\n", describe(t).c_str());
        return WSP_GGML_STATUS_FAILED;
    }
    if (t->ne[2] != 1 || t->ne[3] != 1) {
        WSP_LOG_ERROR("split buffer: %s has more than 2 dimensions; only matrices can be split by rows\n",
                      describe(t).c_str());
        return WSP_GGML_STATUS_FAILED;
    }
    BufferCtx & ctx    = buf_ctx(b);
    auto        st     = std::make_unique<SplitTensor>();
    const auto  ranges = row_ranges(b->buft, t->type, t->ne[1]);
    for (size_t d = 0; d < ranges.size(); ++d) {
        const int64_t rows = ranges[d].second - ranges[d].first;
        if (rows == 0) {
            continue;
        }
        void *                    data = nullptr;
        wsp_ggml_backend_buffer_t sub  = carve(ctx, d, slice_bytes(t->type, t->ne[0], rows), &data);
        if (sub == nullptr) {
            WSP_LOG_ERROR("split buffer: cannot allocate rows [%lld, %lld) of %s on %s\n", (long long) ranges[d].first,
                          (long long) ranges[d].second, describe(t).c_str(),
                          wsp_ggml_backend_dev_name(wsp_ggml_backend_reg_dev_get(ctx.buft->reg, d)));
            return WSP_GGML_STATUS_ALLOC_FAILED;
        }
        st->slices.push_back(make_slice(ctx, t, d, ranges[d], sub, data));
    }
    t->extra = st.get();
    ctx.tensors.push_back(std::move(st));
    return WSP_GGML_STATUS_SUCCESS;
}

// calls fn(slice, offset in slice, offset in data, bytes) for the parts of [offset, offset + size)
// of the full tensor's row-major layout that each slice holds
template <typename Fn>
bool for_each_part(const wsp_ggml_tensor * t, size_t offset, size_t size, const char * what, Fn fn) {
    const SplitTensor * st  = split_of(t);
    const size_t        row = wsp_ggml_row_size(t->type, t->ne[0]);
    if (st == nullptr || offset % row != 0 || size % row != 0) {
        WSP_LOG_ERROR("split buffer: %s of %s: range [%zu, %zu) is not a whole number of rows of %zu bytes; nothing "
                      "was transferred\n",
                      what, describe(t).c_str(), offset, offset + size, row);
        return false;
    }
    const int64_t r0 = (int64_t) (offset / row), r1 = (int64_t) ((offset + size) / row);
    for (const Slice & s : st->slices) {
        const int64_t a = std::max(r0, s.row_begin), b = std::min(r1, s.row_end);
        if (a < b) {
            fn(s, (size_t) (a - s.row_begin) * row, (size_t) (a - r0) * row, (size_t) (b - a) * row);
        }
    }
    return true;
}

void buf_set(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, const void * data, size_t offset, size_t size) {
    for_each_part(t, offset, size, "set", [&](const Slice & s, size_t so, size_t doff, size_t n) {
        wsp_ggml_backend_tensor_set(const_cast<wsp_ggml_tensor *>(&s.tensor), static_cast<const char *>(data) + doff,
                                    so, n);
    });
}

void buf_get(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * t, void * data, size_t offset, size_t size) {
    for_each_part(t, offset, size, "get", [&](const Slice & s, size_t so, size_t doff, size_t n) {
        wsp_ggml_backend_tensor_get(&s.tensor, static_cast<char *>(data) + doff, so, n);
    });
}

void buf_memset(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, uint8_t v, size_t offset, size_t size) {
    for_each_part(t, offset, size, "memset", [&](const Slice & s, size_t so, size_t, size_t n) {
        wsp_ggml_backend_tensor_memset(const_cast<wsp_ggml_tensor *>(&s.tensor), v, so, n);
    });
}

void buf_clear(wsp_ggml_backend_buffer_t b, uint8_t v) {
    for (wsp_ggml_backend_buffer_t sub : buf_ctx(b).owned) {
        wsp_ggml_backend_buffer_clear(sub, v);
    }
}

// the tensors go; the device memory of a reservation stays for the tensors placed next
void buf_reset(wsp_ggml_backend_buffer_t b) {
    BufferCtx &                            ctx = buf_ctx(b);
    std::vector<wsp_ggml_backend_buffer_t> keep;
    for (Pool & p : ctx.pools) {
        p.used = 0;
        if (p.buffer != nullptr) {
            keep.push_back(p.buffer);
        }
    }
    for (wsp_ggml_backend_buffer_t sub : ctx.owned) {
        if (std::find(keep.begin(), keep.end(), sub) == keep.end()) {
            wsp_ggml_backend_buffer_free(sub);
        }
    }
    ctx.owned = keep;
    ctx.tensors.clear();
}

const wsp_ggml_backend_buffer_i split_buffer_iface = {
    /* .free_buffer   = */ buf_free,
    /* .get_base      = */ buf_base,
    /* .init_tensor   = */ buf_init_tensor,
    /* .memset_tensor = */ buf_memset,
    /* .set_tensor    = */ buf_set,
    /* .get_tensor    = */ buf_get,
    /* .cpy_tensor    = */ nullptr, // copies go through the host
    /* .clear         = */ buf_clear,
    /* .reset         = */ buf_reset,
};

//
// buffer type
//

const char * buft_name(wsp_ggml_backend_buffer_type_t buft) {
    return buft_ctx(buft).name.c_str();
}

wsp_ggml_backend_buffer_t buft_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    // the memory is allocated per tensor and device in init_tensor; this buffer only hands out handles
    return wsp_ggml_backend_buffer_init(buft, split_buffer_iface, new BufferCtx{ &buft_ctx(buft), {} }, size);
}

size_t buft_alignment(wsp_ggml_backend_buffer_type_t) {
    return ALIGNMENT;
}

size_t buft_alloc_size(wsp_ggml_backend_buffer_type_t buft, const wsp_ggml_tensor * t) {
    size_t total = 0;
    for (const auto & r : row_ranges(buft, t->type, t->ne[1] * t->ne[2] * t->ne[3])) {
        total += r.second > r.first ? slice_bytes(t->type, t->ne[0], r.second - r.first) : 0;
    }
    return std::max(total, wsp_ggml_nbytes(t));
}

bool buft_is_host(wsp_ggml_backend_buffer_type_t) {
    return false;
}

struct CacheKey {
    wsp_ggml_backend_reg_t reg;
    int                    main;
    std::vector<float>     shares;
    bool operator<(const CacheKey & o) const { return std::tie(reg, main, shares) < std::tie(o.reg, o.main, o.shares); }
};

struct CacheEntry {
    BuftCtx                      ctx;
    wsp_ggml_backend_buffer_type buft;
};

// the reg's default shares, taken once (called with the cache's mutex held)
const std::vector<float> & reg_default(wsp_ggml_backend_reg_t reg) {
    static auto & defaults = *new std::map<wsp_ggml_backend_reg_t, std::vector<float>>; // lives until exit
    auto          it       = defaults.find(reg);
    if (it == defaults.end()) {
        std::vector<wsp_ggml_backend_dev_t> devs;
        for (size_t i = 0; i < wsp_ggml_backend_reg_dev_count(reg); ++i) {
            devs.push_back(wsp_ggml_backend_reg_dev_get(reg, i));
        }
        it = defaults.emplace(reg, partition::default_shares(devs)).first;
    }
    return it->second;
}

// tensor_split as shares summing to 1 (the cache's key): NULL, all zeros or shares that
// partition::check refuses (logged) mean the reg's default
std::vector<float> normalised_split(wsp_ggml_backend_reg_t reg, const float * tensor_split) {
    const size_t       n = wsp_ggml_backend_reg_dev_count(reg);
    std::vector<float> p(n, 0.0f);
    bool               given = false;
    for (size_t i = 0; tensor_split != nullptr && i < n; ++i) {
        p[i]  = tensor_split[i];
        given = given || p[i] != 0.0f;
    }
    std::string why;
    if (given && !partition::check(p.data(), n, &why)) {
        WSP_LOG_WARN("split buffer type of %s: %s; splitting by the default shares (free memory) instead\n",
                     wsp_ggml_backend_reg_name(reg), why.c_str());
        given = false;
    }
    if (!given) {
        p = reg_default(reg);
    }
    double sum = 0.0;
    for (float v : p) {
        sum += v;
    }
    for (float & v : p) {
        v = sum > 0.0 ? (float) (v / sum) : 1.0f / (float) n;
    }
    return p;
}

} // namespace

std::vector<std::pair<int64_t, int64_t>> row_ranges(wsp_ggml_backend_buffer_type_t buft, wsp_ggml_type type,
                                                    int64_t nrows) {
    const BuftCtx & c = buft_ctx(buft);
    return partition::ranges(c.shares, nrows, wsp_ggml_is_quantized(type) ? c.quant_rows : 1); // Note [partition]
}

bool is_split_buffer_type(wsp_ggml_backend_buffer_type_t buft) {
    return buft != nullptr && buft->iface.get_name == buft_name;
}

bool is_split_buffer(wsp_ggml_backend_buffer_t buffer) {
    return buffer != nullptr && buffer->iface.init_tensor == buf_init_tensor;
}

const SplitTensor * split_of(const wsp_ggml_tensor * t) {
    return t != nullptr && t->view_src == nullptr && is_split_buffer(t->buffer)
               ? static_cast<const SplitTensor *>(t->extra)
               : nullptr;
}

wsp_ggml_backend_dev_t main_device(wsp_ggml_backend_buffer_type_t buft) {
    return buft->device;
}

void set_usage(wsp_ggml_backend_buffer_t buffer, wsp_ggml_backend_buffer_usage usage) {
    buf_ctx(buffer).usage = usage;
    for (wsp_ggml_backend_buffer_t sub : buf_ctx(buffer).owned) {
        wsp_ggml_backend_buffer_set_usage(sub, usage);
    }
}

bool reserve(wsp_ggml_backend_buffer_t buffer, wsp_ggml_context * ctx, wsp_ggml_tensor * first,
             wsp_ggml_tensor * last) {
    if (!is_split_buffer(buffer)) {
        return true;
    }
    BufferCtx &         bc = buf_ctx(buffer);
    std::vector<size_t> need(n_devices(*bc.buft), 0);
    for (wsp_ggml_tensor * t = first; t != last; t = wsp_ggml_get_next_tensor(ctx, t)) {
        if (t->data != nullptr || t->view_src != nullptr) {
            continue;
        }
        const auto ranges = row_ranges(buffer->buft, t->type, t->ne[1]);
        for (size_t d = 0; d < ranges.size(); ++d) {
            const int64_t rows = ranges[d].second - ranges[d].first;
            need[d] += rows > 0 ? slice_bytes(t->type, t->ne[0], rows) : 0;
        }
    }
    bc.pools.assign(need.size(), Pool{});
    for (size_t d = 0; d < need.size(); ++d) {
        if (need[d] == 0) {
            continue;
        }
        wsp_ggml_backend_dev_t    dev = wsp_ggml_backend_reg_dev_get(bc.buft->reg, d);
        wsp_ggml_backend_buffer_t sub =
            wsp_ggml_backend_buft_alloc_buffer(wsp_ggml_backend_dev_buffer_type(dev), need[d]);
        if (sub == nullptr) {
            WSP_LOG_ERROR("split buffer: %s cannot hold its share (%zu bytes) of the split tensors\n",
                          wsp_ggml_backend_dev_name(dev), need[d]);
            return false;
        }
        wsp_ggml_backend_buffer_set_usage(sub, bc.usage);
        bc.owned.push_back(sub);
        bc.pools[d].buffer = sub;
    }
    return true;
}

wsp_ggml_backend_buffer_type_t buffer_type(wsp_ggml_backend_reg_t reg, int main, const float * tensor_split,
                                           int quant_rows) {
    static std::mutex mutex;
    // entries live until exit, like the devices (reachable from here: not a leak to LeakSanitizer)
    static auto & cache = *new std::map<CacheKey, CacheEntry *>;
    const size_t  n     = wsp_ggml_backend_reg_dev_count(reg);
    if (main < 0 || (size_t) main >= n) {
        WSP_LOG_ERROR("split_buffer_type: main device %d is not a device of %s (%zu devices)\n", main,
                      wsp_ggml_backend_reg_name(reg), n);
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex);
    CacheKey                    key{ reg, main, normalised_split(reg, tensor_split) };
    auto                        it = cache.find(key);
    if (it != cache.end()) {
        return &it->second->buft;
    }
    auto * e = new CacheEntry;
    e->ctx   = { reg, main, quant_rows < 1 ? 1 : quant_rows, key.shares,
                 std::string(wsp_ggml_backend_reg_name(reg)) + std::to_string(main) + "_Split" };
    e->buft  = { { buft_name, buft_alloc, buft_alignment, nullptr, buft_alloc_size, buft_is_host },
                 wsp_ggml_backend_reg_dev_get(reg, (size_t) main),
                 &e->ctx };
    cache.emplace(std::move(key), e);
    return &e->buft;
}

} // namespace wsp::split
