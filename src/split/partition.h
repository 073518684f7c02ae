#pragma once

// One partition of work over devices: the shares of a multi-device split ("3,1" is 75% and 25%),
// parsed, checked and defaulted in one place, and one rule that cuts n elements (a weight's rows,
// a tensor-parallel plan's ranges) into per-device ranges by those shares (Note [partition]).
// The split buffer type, the all-GPU device, the tensor-parallel planner and the CLI all use it,
// so a split given once means the same rows everywhere.

#include "ggml-backend.h"

#include "../core/log.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wsp::partition {

using Range = std::pair<int64_t, int64_t>; // [begin, end)

// Parses "A,B,..." (one share per device, in device order) into *shares, n_devices entries.
// Each part is a finite number >= 0 (spaces around it are allowed); at least one is above 0.
// Fewer parts than devices: the devices without a part get share 0 (no rows), so "1" on two
// devices puts everything on the first. Refused, with one message in *error and *shares left as
// it was: an empty part, a part that is not a number, a negative or non-finite one, more parts
// than devices, every part 0.
WSP_INTERNAL_API bool parse(const char * text, size_t n_devices, std::vector<float> * shares, std::string * error);

// The same checks for the C API's arrays of n shares: each finite and >= 0, one above 0.
// false with the reason in *error (which may be NULL).
WSP_INTERNAL_API bool check(const float * shares, size_t n, std::string * error);

// The default shares of these devices: their free memory; where no device reports free memory,
// their total memory; where none reports that either, equal shares.
WSP_INTERNAL_API std::vector<float> default_shares(const std::vector<wsp_ggml_backend_dev_t> & devices);

// Note [partition]: n elements cut into one range [begin, end) per share, in order, contiguous,
// covering [0, n). The boundary after device i sits at the candidate nearest to the exact
// cumulative share n * (s_0 + ... + s_i) / (s_0 + ... + s_last); the candidates are the multiples
// of unit below n, and n itself. A tie goes to the larger candidate. The last range ends at n.
// So every boundary but n is a multiple of unit (whole quantization blocks, whole heads), a share
// of 0 gets an empty range, and no device is more than half a unit away from its exact share at
// either end. Shares that fail check() are not expected; defensively, negative ones count as 0
// and all zeros as equal shares. unit < 1 counts as 1.
WSP_INTERNAL_API std::vector<Range> ranges(const std::vector<float> & shares, int64_t n, int64_t unit);

} // namespace wsp::partition
