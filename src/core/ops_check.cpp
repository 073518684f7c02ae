// The failure path of op builders' shape and type checks.

#include "impl.h"

namespace wsp {

void op_check_failed(const char * op, const char * rule, const wsp_ggml_tensor * a, const wsp_ggml_tensor * b,
                     const wsp_ggml_tensor * c) {
    std::string tensors = "a = " + describe(a);
    if (b != nullptr) {
        tensors += ", b = " + describe(b);
    }
    if (c != nullptr) {
        tensors += ", c = " + describe(c);
    }
    WSP_GGML_ABORT("%s: invalid arguments (%s): %s", op, tensors.c_str(), rule);
}

} // namespace wsp
