#pragma once

// The row spread of a split buffer by Note [partition] (src/split/partition.h), written out
// independently for checking the split buffer type: the boundary after device d is, among the
// multiples of the granularity below n and n itself, the one nearest to n times the cumulative
// share (a tie goes to the larger); the last device ends at n.

#include <algorithm>
#include <cmath>
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
    std::vector<int64_t> candidates;
    for (int64_t c = 0; c < n; c += granularity) {
        candidates.push_back(c);
    }
    candidates.push_back(n);
    std::vector<int64_t> rows;
    double               acc   = 0;
    int64_t              begin = 0;
    for (size_t d = 0; d < p.size(); ++d) {
        acc += p[d];
        int64_t end = n;
        if (d + 1 < p.size()) {
            const double exact = (double) n * acc / sum;
            end                = candidates[0];
            for (int64_t c : candidates) { // ascending: a later one at the same distance wins the tie
                if (std::fabs((double) c - exact) <= std::fabs((double) end - exact)) {
                    end = c;
                }
            }
        }
        end = std::max(begin, end);
        rows.push_back(end - begin);
        begin = end;
    }
    return rows;
}

} // namespace wsp::test
