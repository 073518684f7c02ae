// Shares of a multi-device split and the ranges they give (see partition.h, Note [partition]).

#include "partition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace wsp::partition {

namespace {

std::string trimmed(const std::string & s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) {
        return std::string();
    }
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

void set_error(std::string * error, std::string msg) {
    if (error != nullptr) {
        *error = std::move(msg);
    }
}

// "share i (v) is negative" and the like: the first share that check() refuses, or -1
int first_bad(const float * shares, size_t n, std::string * error) {
    for (size_t i = 0; i < n; ++i) {
        char msg[128];
        if (!std::isfinite(shares[i])) {
            std::snprintf(msg, sizeof(msg), "share %zu is not a finite number", i + 1);
        } else if (shares[i] < 0.0f) {
            std::snprintf(msg, sizeof(msg), "share %zu (%g) is negative", i + 1, (double) shares[i]);
        } else {
            continue;
        }
        set_error(error, msg);
        return (int) i;
    }
    return -1;
}

} // namespace

bool parse(const char * text, size_t n_devices, std::vector<float> * shares, std::string * error) {
    const std::string all   = text != nullptr ? text : "";
    const std::string quote = "\"" + all + "\"";
    if (trimmed(all).empty()) {
        set_error(error, "the split is empty; expected one share per device, A,B,...");
        return false;
    }
    std::vector<std::string> parts;
    for (size_t b = 0;;) {
        const size_t e = all.find(',', b);
        parts.push_back(all.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) {
            break;
        }
        b = e + 1;
    }
    if (parts.size() > n_devices) {
        set_error(error, quote + " has " + std::to_string(parts.size()) + " parts for " + std::to_string(n_devices) +
                             (n_devices == 1 ? " device" : " devices"));
        return false;
    }
    std::vector<float> out(n_devices, 0.0f);
    double             sum = 0.0;
    for (size_t i = 0; i < parts.size(); ++i) {
        const std::string p     = trimmed(parts[i]);
        const std::string which = "part " + std::to_string(i + 1) + " of " + quote;
        if (p.empty()) {
            set_error(error, which + " is empty");
            return false;
        }
        char *       end = nullptr;
        const double v   = std::strtod(p.c_str(), &end);
        if (end == p.c_str() || *end != '\0') {
            set_error(error, which + " (\"" + p + "\") is not a number");
            return false;
        }
        if (!std::isfinite(v) || !std::isfinite((float) v)) {
            set_error(error, which + " (" + p + ") is not a finite number");
            return false;
        }
        if (v < 0.0) {
            set_error(error, which + " (" + p + ") is negative");
            return false;
        }
        out[i] = (float) v;
        sum += out[i];
    }
    if (!(sum > 0.0)) {
        set_error(error, quote + " gives no device a share (every part is 0)");
        return false;
    }
    *shares = std::move(out);
    return true;
}

bool check(const float * shares, size_t n, std::string * error) {
    if (shares == nullptr || n == 0) {
        set_error(error, "no shares were given");
        return false;
    }
    if (first_bad(shares, n, error) >= 0) {
        return false;
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        sum += shares[i];
    }
    if (!(sum > 0.0)) {
        set_error(error, "every share is 0: no device would get any work");
        return false;
    }
    return true;
}

std::vector<float> default_shares(const std::vector<wsp_ggml_backend_dev_t> & devices) {
    std::vector<float> free_shares(devices.size(), 0.0f), total_shares(devices.size(), 0.0f);
    bool               any_free = false, any_total = false;
    for (size_t i = 0; i < devices.size(); ++i) {
        size_t free_mem = 0, total = 0;
        if (devices[i] != nullptr) {
            wsp_ggml_backend_dev_memory(devices[i], &free_mem, &total);
        }
        free_shares[i]  = (float) free_mem;
        total_shares[i] = (float) total;
        any_free        = any_free || free_mem > 0;
        any_total       = any_total || total > 0;
    }
    // a device that reports no free memory while others do is full, and gets no share; one that
    // reports none at all (a backend that does not know) leaves the choice to the next rule
    if (any_free) {
        return free_shares;
    }
    if (any_total) {
        return total_shares;
    }
    return std::vector<float>(devices.size(), 1.0f);
}

// Note [partition]
std::vector<Range> ranges(const std::vector<float> & shares, int64_t n, int64_t unit) {
    const size_t m = shares.size();
    unit           = std::max<int64_t>(unit, 1);
    n              = std::max<int64_t>(n, 0);
    std::vector<double> s(m, 1.0);
    double              total = 0.0;
    for (size_t i = 0; i < m; ++i) {
        s[i] = std::isfinite(shares[i]) ? std::max(0.0, (double) shares[i]) : 0.0;
        total += s[i];
    }
    if (!(total > 0.0)) {
        s.assign(m, 1.0);
        total = (double) m;
    }
    const double       n_units = (double) n / (double) unit; // where n itself lies, in units
    std::vector<Range> r(m, { 0, 0 });
    int64_t            begin = 0;
    double             cum   = 0.0;
    for (size_t i = 0; i < m; ++i) {
        cum += s[i];
        int64_t end = n;
        if (i + 1 < m) {
            const double  q  = n_units * cum / total; // the exact boundary, in units
            const int64_t k  = (int64_t) std::floor(q);
            const double  hi = std::min((double) (k + 1), n_units); // the next candidate: a multiple, or n
            end              = q - (double) k >= hi - q ? (hi == n_units ? n : (k + 1) * unit) : k * unit;
        }
        end   = std::min(std::max(end, begin), n);
        r[i]  = { begin, end };
        begin = end;
    }
    return r;
}

} // namespace wsp::partition
