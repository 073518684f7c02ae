// Log callback, abort, status names and wall-clock time.

#include "log.h"

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void log_to_stderr(wsp_ggml_log_level level, const char * text, void * user_data) {
    (void) level;
    (void) user_data;
    fputs(text, stderr);
    fflush(stderr);
}

struct LogSink {
    wsp_ggml_log_callback callback  = log_to_stderr;
    void *                user_data = nullptr;
};

LogSink & sink() {
    static LogSink s;
    return s;
}

std::string vformat(const char * fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    char      small[512];
    const int n = vsnprintf(small, sizeof(small), fmt, copy);
    va_end(copy);
    if (n < 0) {
        return std::string(fmt);
    }
    if ((size_t) n < sizeof(small)) {
        return std::string(small, (size_t) n);
    }
    std::vector<char> big((size_t) n + 1);
    vsnprintf(big.data(), big.size(), fmt, args);
    return std::string(big.data(), (size_t) n);
}

} // namespace

namespace wsp {

void log(wsp_ggml_log_level level, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    const std::string text = vformat(fmt, args);
    va_end(args);
    const LogSink & s = sink();
    s.callback(level, text.c_str(), s.user_data);
}

std::string describe(const wsp_ggml_tensor * t) {
    if (t == nullptr) {
        return "(null)";
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "'%s' (%s [%lld, %lld, %lld, %lld])", t->name, wsp_ggml_type_name(t->type),
             (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3]);
    return buf;
}

} // namespace wsp

extern "C" {

void wsp_ggml_log_set(wsp_ggml_log_callback log_callback, void * user_data) {
    sink().callback  = log_callback ? log_callback : log_to_stderr;
    sink().user_data = log_callback ? user_data : nullptr;
}

void wsp_ggml_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout);
    va_list args;
    va_start(args, fmt);
    const std::string text = vformat(fmt, args);
    va_end(args);
    // straight to stderr: the process is about to die and a user callback may not flush
    fprintf(stderr, "%s:%d: %s\n", file, line, text.c_str());
    fflush(stderr);
    abort();
}

const char * wsp_ggml_status_to_string(enum wsp_ggml_status status) {
    switch (status) {
        case WSP_GGML_STATUS_ALLOC_FAILED: return "GGML status: error (failed to allocate memory)";
        case WSP_GGML_STATUS_FAILED: return "GGML status: error (operation failed)";
        case WSP_GGML_STATUS_SUCCESS: return "GGML status: success";
        case WSP_GGML_STATUS_ABORTED: return "GGML status: warning (operation aborted)";
    }
    return "GGML status: unknown";
}

bool wsp_ggml_guid_matches(wsp_ggml_guid_t guid_a, wsp_ggml_guid_t guid_b) {
    for (int i = 0; i < 16; ++i) {
        if ((*guid_a)[i] != (*guid_b)[i]) {
            return false;
        }
    }
    return true;
}

static std::chrono::steady_clock::time_point g_time_origin = std::chrono::steady_clock::now();

void wsp_ggml_time_init(void) {
    // the origin is fixed at load time so that times from any thread compare
}

int64_t wsp_ggml_time_ms(void) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - g_time_origin)
        .count();
}

int64_t wsp_ggml_time_us(void) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - g_time_origin)
        .count();
}

int64_t wsp_ggml_cycles(void) {
    return (int64_t) clock();
}

int64_t wsp_ggml_cycles_per_ms(void) {
    return CLOCKS_PER_SEC / 1000;
}

} // extern "C"
