#pragma once

// Internal logging through the callback set by wsp_ggml_log_set (stderr by default), and the
// helpers that format tensors for error messages.

#include "ggml.h"

#include <string>

// internal functions shared between the project's libraries (exported, but not part of the API)
#if defined(_WIN32)
#    define WSP_INTERNAL_API
#else
#    define WSP_INTERNAL_API __attribute__((visibility("default")))
#endif

namespace wsp {

WSP_GGML_ATTRIBUTE_FORMAT(2, 3)
WSP_INTERNAL_API void log(wsp_ggml_log_level level, const char * fmt, ...);

// "name (f32 [4, 3, 1, 1])" for messages
WSP_INTERNAL_API std::string describe(const wsp_ggml_tensor * t);

} // namespace wsp

#define WSP_LOG_DEBUG(...) ::wsp::log(WSP_GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define WSP_LOG_INFO(...)  ::wsp::log(WSP_GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define WSP_LOG_WARN(...)  ::wsp::log(WSP_GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define WSP_LOG_ERROR(...) ::wsp::log(WSP_GGML_LOG_LEVEL_ERROR, __VA_ARGS__)
