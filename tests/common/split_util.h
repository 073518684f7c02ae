#pragma once

// The row spread of a split buffer as SPEC.md defines it, for checking the split buffer type:
// proportions become cumulative fractions, each device's first row is the fraction times the
// row count rounded down to the granularity, the last device takes the rest.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace wsp::test {

// p: one proportion per device (all zeros: equal, as the sim devices have equal memory)
inline std::vector<int64_t> expected_rows(std::vector<float> p, int64_t n, int64_t granularity) {
    double sum = 0;
    for (float x : p) {
        sum += x;
    }
    if (sum == 0) {
        p.assign(p.size(), 1.0f);
        sum = (double) p.size();
    }
    std::vector<int64_t> rows;
    double               acc   = 0;
    int64_t              begin = 0;
    for (size_t d = 0; d < p.size(); ++d) {
        acc += p[d];
        int64_t end = d + 1 == p.size() ? n : (int64_t) (acc / sum * (double) n) / granularity * granularity;
        end         = std::max(begin, std::min(end, n));
        rows.push_back(end - begin);
        begin = end;
    }
    return rows;
}

} // namespace wsp::test
