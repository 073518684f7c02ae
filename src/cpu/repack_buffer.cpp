// The CPU_REPACK buffer type (Note [Q4_0x8 repack], repack.h): host allocations whose Q4_0, Q4_1,
// Q5_0, Q5_1 and Q8_0 tensors are converted to the 8-row layout on the way in and back on the way out.

#include "repack.h"

#include "../core/impl.h"
#include "../core/quants.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace wsp::cpu {

namespace {

constexpr size_t TENSOR_ALIGNMENT = 64;
static_assert(repack_layout(WSP_GGML_TYPE_Q4_0).block == REPACK_ROWS * sizeof(block_q4_0), "a group's plain bytes");
static_assert(repack_layout(WSP_GGML_TYPE_Q4_1).block == REPACK_ROWS * sizeof(block_q4_1), "a group's plain bytes");
static_assert(repack_layout(WSP_GGML_TYPE_Q5_0).block == REPACK_ROWS * sizeof(block_q5_0), "a group's plain bytes");
static_assert(repack_layout(WSP_GGML_TYPE_Q5_1).block == REPACK_ROWS * sizeof(block_q5_1), "a group's plain bytes");
static_assert(repack_layout(WSP_GGML_TYPE_Q8_0).block == REPACK_ROWS * sizeof(block_q8_0), "a group's plain bytes");

size_t group_bytes(const wsp_ggml_tensor * t) {
    return (size_t) REPACK_ROWS * t->nb[1];
}

// Bytes [offset, offset + size) of a repacked tensor, through a plain copy of the groups they
// touch: set writes them (read-modify-write where a group is covered in part), get reads them.
void convert_range(const wsp_ggml_tensor * t, const void * in, void * out, size_t offset, size_t size, bool set) {
    const size_t  gb    = group_bytes(t);
    const int64_t nb    = t->ne[0] / QK4_0; // 32 columns a block in every repacked type
    const size_t  g0    = offset / gb;
    const size_t  g1    = (offset + size + gb - 1) / gb;
    char *        base  = static_cast<char *>(t->data) + g0 * gb;
    const size_t  skip  = offset - g0 * gb;
    const bool    whole = set && skip == 0 && size == (g1 - g0) * gb;
    if (whole) {
        pack_x8(t->type, in, base, (int64_t) (g1 - g0), nb);
        return;
    }
    std::vector<char> plain((g1 - g0) * gb);
    unpack_x8(t->type, base, plain.data(), (int64_t) (g1 - g0), nb);
    if (set) {
        std::memcpy(plain.data() + skip, in, size);
        pack_x8(t->type, plain.data(), base, (int64_t) (g1 - g0), nb);
    } else {
        std::memcpy(out, plain.data() + skip, size);
    }
}

void * buf_base(wsp_ggml_backend_buffer_t buffer) {
    return buffer->context;
}

void buf_free(wsp_ggml_backend_buffer_t buffer) {
    std::free(buffer->context);
}

// a repacked tensor's bytes are the plain ones set to value, converted
void buf_memset(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    if (stored_repacked(t) && t->view_src == nullptr) {
        const std::vector<uint8_t> plain(size, value);
        convert_range(t, plain.data(), nullptr, offset, size, true);
    } else if (stored_repacked(t)) {
        WSP_GGML_ABORT("CPU_REPACK: cannot memset %s, a view of the repacked weight %s; set the weight itself",
                       describe(t).c_str(), describe(t->view_src).c_str());
    } else {
        std::memset(static_cast<char *>(t->data) + offset, value, size);
    }
}

void buf_set(wsp_ggml_backend_buffer_t, wsp_ggml_tensor * t, const void * data, size_t offset, size_t size) {
    if (stored_repacked(t) && t->view_src == nullptr) {
        convert_range(t, data, nullptr, offset, size, true);
    } else if (stored_repacked(t)) {
        WSP_GGML_ABORT("CPU_REPACK: cannot write %s, a view of the repacked weight %s; write the weight itself",
                       describe(t).c_str(), describe(t->view_src).c_str());
    } else {
        std::memcpy(static_cast<char *>(t->data) + offset, data, size);
    }
}

void buf_get(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * t, void * data, size_t offset, size_t size) {
    if (stored_repacked(t) && t->view_src == nullptr) {
        convert_range(t, nullptr, data, offset, size, false);
    } else if (stored_repacked(t)) {
        WSP_GGML_ABORT("CPU_REPACK: cannot read %s, a view of the repacked weight %s; read the weight itself",
                       describe(t).c_str(), describe(t->view_src).c_str());
    } else {
        std::memcpy(data, static_cast<const char *>(t->data) + offset, size);
    }
}

// from host memory only (plain bytes); anything else goes through get/set
bool buf_cpy(wsp_ggml_backend_buffer_t, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    const wsp_ggml_tensor * s = storage_of(src);
    if (s->buffer == nullptr || !wsp_ggml_backend_buffer_is_host(s->buffer) || !wsp_ggml_is_contiguous(src)) {
        return false;
    }
    buf_set(nullptr, dst, src->data, 0, wsp_ggml_nbytes(dst));
    return true;
}

void buf_clear(wsp_ggml_backend_buffer_t buffer, uint8_t value) {
    std::memset(buffer->context, value, buffer->size);
}

const wsp_ggml_backend_buffer_i repack_buffer_iface = {
    /* .free_buffer   = */ buf_free,
    /* .get_base      = */ buf_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ buf_memset,
    /* .set_tensor    = */ buf_set,
    /* .get_tensor    = */ buf_get,
    /* .cpy_tensor    = */ buf_cpy,
    /* .clear         = */ buf_clear,
    /* .reset         = */ nullptr,
};

const char * buft_name(wsp_ggml_backend_buffer_type_t) {
    return "CPU_REPACK";
}

wsp_ggml_backend_buffer_t buft_alloc(wsp_ggml_backend_buffer_type_t buft, size_t size) {
    void * data = wsp::host_buffer_alloc(size == 0 ? 1 : size);
    if (data == nullptr) {
        WSP_LOG_ERROR("CPU_REPACK: failed to allocate %zu bytes (%.1f MiB)\n", size, (double) size / (1024.0 * 1024.0));
        return nullptr;
    }
    wsp_ggml_backend_buffer_t b = wsp_ggml_backend_buffer_init(buft, repack_buffer_iface, data, size);
    if (b == nullptr) {
        std::free(data);
    }
    return b;
}

size_t buft_alignment(wsp_ggml_backend_buffer_type_t) {
    return TENSOR_ALIGNMENT;
}

// not host memory: nobody but the CPU kernels may read the bytes where they lie
bool buft_is_host(wsp_ggml_backend_buffer_type_t) {
    return false;
}

wsp_ggml_backend_buffer_type repack_buft = {
    /* .iface = */ {
        /* .get_name       = */ buft_name,
        /* .alloc_buffer   = */ buft_alloc,
        /* .get_alignment  = */ buft_alignment,
        /* .get_max_size   = */ nullptr,
        /* .get_alloc_size = */ nullptr,
        /* .is_host        = */ buft_is_host,
    },
    /* .device  = */ nullptr, // the CPU device, linked by backend.cpp
    /* .context = */ nullptr,
};

} // namespace

wsp_ggml_backend_buffer_type_t repack_buffer_type() {
    return &repack_buft;
}

bool fits_repack(const wsp_ggml_tensor * t) {
    const bool type = t->type == WSP_GGML_TYPE_Q4_0 || t->type == WSP_GGML_TYPE_Q4_1 || t->type == WSP_GGML_TYPE_Q5_0 ||
                      t->type == WSP_GGML_TYPE_Q5_1 || t->type == WSP_GGML_TYPE_Q8_0;
    return type && t->ne[0] % QK4_0 == 0 && t->ne[1] % REPACK_ROWS == 0 && wsp_ggml_is_contiguous(t);
}

bool stored_repacked(const wsp_ggml_tensor * t) {
    const wsp_ggml_tensor * s = storage_of(t);
    return s->buffer != nullptr && s->buffer->buft == &repack_buft && fits_repack(s);
}

bool repack_allows(const wsp_ggml_tensor * node) {
    for (int i = 0; i < WSP_GGML_MAX_SRC; ++i) {
        const wsp_ggml_tensor * src = node->src[i];
        if (src == nullptr || !stored_repacked(src)) {
            continue;
        }
        const bool weight = i == 0 && node->op == WSP_GGML_OP_MUL_MAT && src->view_src == nullptr;
        if (!weight || node->type != WSP_GGML_TYPE_F32 || node->src[1]->type != WSP_GGML_TYPE_F32) {
            return false;
        }
    }
    return true;
}

// A plain block of bb bytes: d at 0, m at 2 (Q4_1, Q5_1), the fifth bits as a little-endian
// uint32 just before qs (Q5), qs in the last 16 bytes (Q8_0: 32, each stored plus 128).
void pack_x8(wsp_ggml_type type, const void * plain, void * packed, int64_t groups, int64_t blocks_per_row) {
    const RepackLayout L   = repack_layout(type);
    const size_t       bb  = L.block / REPACK_ROWS;
    const auto *       in  = static_cast<const uint8_t *>(plain);
    auto *             out = static_cast<uint8_t *>(packed);
    for (int64_t g = 0; g < groups; ++g) {
        for (int64_t b = 0; b < blocks_per_row; ++b, out += L.block) {
            uint32_t masks[8] = {};
            for (int64_t r = 0; r < REPACK_ROWS; ++r) {
                const uint8_t * blk = in + ((g * REPACK_ROWS + r) * blocks_per_row + b) * bb;
                std::memcpy(out + 2 * r, blk, 2);
                if (L.m >= 0) {
                    std::memcpy(out + L.m + 2 * r, blk + 2, 2);
                }
                if (type == WSP_GGML_TYPE_Q8_0) {
                    for (int t = 0; t < 8; ++t) {
                        for (int i = 0; i < 4; ++i) {
                            out[L.qs + 32 * t + 4 * r + i] = (uint8_t) (blk[bb - 32 + 4 * t + i] ^ 0x80);
                        }
                    }
                } else {
                    for (int t = 0; t < 4; ++t) {
                        std::memcpy(out + L.qs + 32 * t + 4 * r, blk + bb - 16 + 4 * t, 4);
                    }
                }
                if (L.qh >= 0) {
                    uint32_t qh;
                    std::memcpy(&qh, blk + bb - 20, 4);
                    for (int t = 0; t < 4; ++t) {
                        for (int i = 0; i < 4; ++i) {
                            masks[t] |= (qh >> (4 * t + i) & 1u) << (4 * r + i);
                            masks[4 + t] |= (qh >> (16 + 4 * t + i) & 1u) << (4 * r + i);
                        }
                    }
                }
            }
            if (L.qh >= 0) {
                std::memcpy(out + L.qh, masks, sizeof masks);
            }
        }
    }
}

void unpack_x8(wsp_ggml_type type, const void * packed, void * plain, int64_t groups, int64_t blocks_per_row) {
    const RepackLayout L   = repack_layout(type);
    const size_t       bb  = L.block / REPACK_ROWS;
    const auto *       in  = static_cast<const uint8_t *>(packed);
    auto *             out = static_cast<uint8_t *>(plain);
    for (int64_t g = 0; g < groups; ++g) {
        for (int64_t b = 0; b < blocks_per_row; ++b, in += L.block) {
            uint32_t masks[8] = {};
            if (L.qh >= 0) {
                std::memcpy(masks, in + L.qh, sizeof masks);
            }
            for (int64_t r = 0; r < REPACK_ROWS; ++r) {
                uint8_t * blk = out + ((g * REPACK_ROWS + r) * blocks_per_row + b) * bb;
                std::memcpy(blk, in + 2 * r, 2);
                if (L.m >= 0) {
                    std::memcpy(blk + 2, in + L.m + 2 * r, 2);
                }
                if (type == WSP_GGML_TYPE_Q8_0) {
                    for (int t = 0; t < 8; ++t) {
                        for (int i = 0; i < 4; ++i) {
                            blk[bb - 32 + 4 * t + i] = (uint8_t) (in[L.qs + 32 * t + 4 * r + i] ^ 0x80);
                        }
                    }
                } else {
                    for (int t = 0; t < 4; ++t) {
                        std::memcpy(blk + bb - 16 + 4 * t, in + L.qs + 32 * t + 4 * r, 4);
                    }
                }
                if (L.qh >= 0) {
                    uint32_t qh = 0;
                    for (int t = 0; t < 4; ++t) {
                        for (int i = 0; i < 4; ++i) {
                            qh |= (masks[t] >> (4 * r + i) & 1u) << (4 * t + i);
                            qh |= (masks[4 + t] >> (4 * r + i) & 1u) << (16 + 4 * t + i);
                        }
                    }
                    std::memcpy(blk + bb - 20, &qh, 4);
                }
            }
        }
    }
}

} // namespace wsp::cpu
