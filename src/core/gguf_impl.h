#pragma once

// Internal state of a GGUF context, shared by gguf.cpp (accessors and setters), gguf_read.cpp
// (parsing and validating a file) and gguf_write.cpp (serialising).
// Invariants: keys and tensor names are unique; every tensor offset is a multiple of the
// context's alignment and the tensors do not overlap; a "general.alignment" pair, when present,
// is a uint32 power of two equal to `alignment`.

#include "gguf.h"

#include <cstdint>
#include <string>
#include <vector>

namespace wsp::gguf {

// bytes of one element of a scalar type; 0 for STRING, ARRAY and invalid ids
size_t type_size(int type);

// a key-value pair: a scalar is stored as an array of one element
struct Kv {
    std::string              key;
    bool                     is_array = false;
    wsp_gguf_type            type     = WSP_GGUF_TYPE_UINT8; // the element type
    std::vector<uint8_t>     data;                           // n elements, packed (not STRING)
    std::vector<std::string> strs;                           // n elements (STRING)

    size_t n() const { return type == WSP_GGUF_TYPE_STRING ? strs.size() : data.size() / type_size(type); }
};

struct TensorInfo {
    wsp_ggml_tensor t;      // name, type, ne, nb; data (and buffer) are the source when writing
    uint64_t        offset; // from the start of the data section
};

// a tensor type that can be stored: a valid id with a non-zero block size
bool valid_tensor_type(int type);

// strides of a contiguous tensor of t.type and t.ne
void set_strides(wsp_ggml_tensor & t);

// the serialised metadata: header, pairs, tensor infos, zero padding up to the alignment
void write_meta(const wsp_gguf_context & ctx, std::vector<uint8_t> & out);

} // namespace wsp::gguf

struct wsp_gguf_context {
    uint32_t                           version     = WSP_GGUF_VERSION;
    size_t                             alignment   = WSP_GGUF_DEFAULT_ALIGNMENT;
    size_t                             data_offset = 0; // of the file it was read from
    std::vector<wsp::gguf::Kv>         kv;
    std::vector<wsp::gguf::TensorInfo> tensors;
};
