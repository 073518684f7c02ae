// cuBLAS on the host target: handles bound to a device, and the GEMMs as host work queued on the
// handle's stream. Arguments are validated at the call as cuBLAS documents; the matrices are
// checked against the handle's device when the call is made (and, for pointer arrays, when the
// work runs), and the numerics follow the compute type (Note [host cuBLAS]).

#include "cublas.h"
#include "cublas_gemm.h"

#include "runtime.h"
#include "target.h"

#include "../core/fp16.h"
#include "../core/log.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

// Note [host cuBLAS]: what the emulation computes and checks.
//
// Numerics. op(A) and op(B) are converted to float once per matrix (a GEMM of the backend reads
// each element of A n times), rounded as the compute type asks: TF32 (10 explicit mantissa bits,
// nearest even) for CUBLAS_COMPUTE_32F_FAST_TF32 and for CUBLAS_COMPUTE_32F under
// CUBLAS_TF32_TENSOR_OP_MATH; half or bfloat16 for the FAST_16F / FAST_16BF types; nothing
// otherwise (F16 and BF16 are exact in float). Every output element accumulates its k products
// in float in k order, whatever the blocking, so results do not depend on the shape of the call;
// CUBLAS_COMPUTE_16F rounds each product and each partial sum to half. Then
// C = alpha * acc + beta * C, with C not read when beta is 0 (cuBLAS's rule: C may hold NaNs).
//
// Checks. Every matrix must be reachable from the handle's device (check_access: its own memory,
// or a peer's whose access it enabled); the stream must belong to that device; a workspace given
// by cublasSetWorkspace must still be allocated when a GEMM runs and when the handle is destroyed
// (freeing it first is a bug that a GPU may not show: cuBLAS uses it only for some shapes). These
// failures return CUBLAS_STATUS_EXECUTION_FAILED (INVALID_VALUE for cublasDestroy), are logged,
// and a failing command on the stream makes its next synchronize report them, as a faulting
// kernel would. A freed allocation is seen through device_of, so a workspace whose bytes were
// handed out again to a new allocation of the same device is not detected.

struct cublasContext {
    int          device;
    cudaStream_t stream         = nullptr;
    void *       workspace      = nullptr;
    size_t       workspace_size = 0;
    cublasMath_t math           = CUBLAS_DEFAULT_MATH;
};

namespace wsp::host_target::blas {
namespace {

// ---- handles

std::mutex & handles_mutex() {
    static std::mutex m;
    return m;
}

std::unordered_set<cublasContext *> & live_handles() {
    static std::unordered_set<cublasContext *> s;
    return s;
}

bool is_live(cublasContext * h) {
    std::lock_guard<std::mutex> lock(handles_mutex());
    return h != nullptr && live_handles().count(h) != 0;
}

cublasStatus_t not_initialized(const char * call, const void * h) {
    WSP_LOG_ERROR("cuBLAS (host target): %s: handle %p was not made by cublasCreate, or was destroyed\n", call, h);
    return CUBLAS_STATUS_NOT_INITIALIZED;
}

const char * type_name(cudaDataType_t t) {
    switch (t) {
        case CUDA_R_32F: return "CUDA_R_32F";
        case CUDA_R_16F: return "CUDA_R_16F";
        case CUDA_R_16BF: return "CUDA_R_16BF";
        case CUDA_R_64F: return "CUDA_R_64F";
        case CUDA_R_8I: return "CUDA_R_8I";
        case CUDA_R_32I: return "CUDA_R_32I";
        default: return "an unknown cudaDataType";
    }
}

char op_name(cublasOperation_t op) {
    return op == CUBLAS_OP_N ? 'N' : op == CUBLAS_OP_T ? 'T' : 'C';
}

// ---- validation

bool algo_known(cublasGemmAlgo_t algo) {
    const int a = (int) algo;
    return (a >= -1 && a <= 23) || (a >= 99 && a <= 115);
}

struct Scalars {
    const void * alpha;
    const void * beta;
};

// the checks of cuBLAS's documentation, in its order; fills g
cublasStatus_t validate(cublasContext * h, const char * call, cublasOperation_t transa, cublasOperation_t transb, int m,
                        int n, int k, Scalars s, cudaDataType_t at, int lda, cudaDataType_t bt, int ldb,
                        cudaDataType_t ct, int ldc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo,
                        Gemm & g) {
    auto invalid = [&](const std::string & what) {
        WSP_LOG_ERROR("cuBLAS (host target): %s: %s: CUBLAS_STATUS_INVALID_VALUE\n", call, what.c_str());
        return CUBLAS_STATUS_INVALID_VALUE;
    };
    auto valid_op = [](cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
    if (m < 0 || n < 0 || k < 0) {
        return invalid("m = " + std::to_string(m) + ", n = " + std::to_string(n) + ", k = " + std::to_string(k) +
                       ": a dimension is negative");
    }
    if (!valid_op(transa) || !valid_op(transb)) {
        return invalid("transa = " + std::to_string((int) transa) + ", transb = " + std::to_string((int) transb) +
                       ": an operation is not CUBLAS_OP_N, CUBLAS_OP_T or CUBLAS_OP_C");
    }
    const int a_rows = transa == CUBLAS_OP_N ? m : k;
    if (lda < std::max(1, a_rows)) {
        return invalid("lda = " + std::to_string(lda) + " < max(1, " + (transa == CUBLAS_OP_N ? "m" : "k") + " = " +
                       std::to_string(a_rows) + ") for transa = " + op_name(transa));
    }
    const int b_rows = transb == CUBLAS_OP_N ? k : n;
    if (ldb < std::max(1, b_rows)) {
        return invalid("ldb = " + std::to_string(ldb) + " < max(1, " + (transb == CUBLAS_OP_N ? "k" : "n") + " = " +
                       std::to_string(b_rows) + ") for transb = " + op_name(transb));
    }
    if (ldc < std::max(1, m)) {
        return invalid("ldc = " + std::to_string(ldc) + " < max(1, m = " + std::to_string(m) + ")");
    }
    if (batch < 0) {
        return invalid("batchCount = " + std::to_string(batch) + " is negative");
    }
    if (s.alpha == nullptr || s.beta == nullptr) {
        return invalid(std::string(s.alpha == nullptr ? "alpha" : "beta") + " is null");
    }

    const bool c16 = compute == CUBLAS_COMPUTE_16F || compute == CUBLAS_COMPUTE_16F_PEDANTIC;
    const bool c32 = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                     compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    const bool c32_down = compute == CUBLAS_COMPUTE_32F_FAST_16F || compute == CUBLAS_COMPUTE_32F_FAST_16BF;
    bool       supported;
    if (c16) {
        supported = at == CUDA_R_16F && bt == CUDA_R_16F && ct == CUDA_R_16F;
    } else if (c32) {
        supported = at == bt && ((at == CUDA_R_32F && ct == CUDA_R_32F) ||
                                 ((at == CUDA_R_16F || at == CUDA_R_16BF) && (ct == at || ct == CUDA_R_32F)));
    } else {
        supported = c32_down && at == CUDA_R_32F && bt == CUDA_R_32F && ct == CUDA_R_32F;
    }
    if (!supported || !algo_known(algo)) {
        WSP_LOG_ERROR("cuBLAS (host target): %s: Atype %s, Btype %s, Ctype %s with compute type %d and algo %d: "
                      "CUBLAS_STATUS_NOT_SUPPORTED\n",
                      call, type_name(at), type_name(bt), type_name(ct), (int) compute, (int) algo);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (machine().cc_major < 5) {
        WSP_LOG_ERROR("cuBLAS (host target): %s needs compute capability 5.0: CUBLAS_STATUS_ARCH_MISMATCH\n", call);
        return CUBLAS_STATUS_ARCH_MISMATCH;
    }
    // BF16 tensor cores start with compute capability 8.0; whatever a cuBLAS version does below
    // that (refuse, or run slowly without them), the backend must not count on it: refused here
    if ((at == CUDA_R_16BF || bt == CUDA_R_16BF) && machine().cc_major < 8) {
        WSP_LOG_ERROR("cuBLAS (host target): %s: BF16 operands need compute capability 8.0, the device has %d.%d: "
                      "CUBLAS_STATUS_ARCH_MISMATCH\n",
                      call, machine().cc_major, machine().cc_minor);
        return CUBLAS_STATUS_ARCH_MISMATCH;
    }

    g.call    = call;
    g.device  = h->device;
    g.ta      = transa != CUBLAS_OP_N;
    g.tb      = transb != CUBLAS_OP_N;
    g.m       = m;
    g.n       = n;
    g.k       = k;
    g.ab_type = at;
    g.c_type  = ct;
    g.lda     = lda;
    g.ldb     = ldb;
    g.ldc     = ldc;
    const bool tf32_mode =
        (h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH && compute == CUBLAS_COMPUTE_32F && at == CUDA_R_32F;
    g.rounding       = compute == CUBLAS_COMPUTE_32F_FAST_TF32 || tf32_mode ? Rounding::TF32
                       : compute == CUBLAS_COMPUTE_32F_FAST_16F             ? Rounding::F16
                       : compute == CUBLAS_COMPUTE_32F_FAST_16BF            ? Rounding::BF16
                                                                            : Rounding::NONE;
    g.f16_accumulate = c16;
    if (c16) { // __half scalars
        g.alpha = fp16_to_fp32(*static_cast<const uint16_t *>(s.alpha));
        g.beta  = fp16_to_fp32(*static_cast<const uint16_t *>(s.beta));
    } else {
        g.alpha = *static_cast<const float *>(s.alpha);
        g.beta  = *static_cast<const float *>(s.beta);
    }
    g.workspace      = h->workspace;
    g.workspace_size = h->workspace_size;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- checks when the call is made and when the work runs

std::string hex(const void * p) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", p);
    return buf;
}

// "" when the handle's workspace is still allocated (or there is none)
std::string workspace_gone(const void * workspace, size_t size) {
    if (workspace == nullptr || device_of(workspace) != -1) {
        return "";
    }
    return "the workspace " + hex(workspace) + " (" + std::to_string(size) +
           " bytes) given by cublasSetWorkspace has been freed; it must outlive the handle's GEMMs and the handle";
}

// "" when the device reaches every byte of the matrix
std::string unreachable(const Gemm & g, const char * name, const void * p, size_t bytes) {
    if (bytes == 0) {
        return "";
    }
    std::string why;
    if (check_access(g.device, p, bytes, &why) == cudaSuccess) {
        return "";
    }
    return "matrix " + std::string(name) + " at " + hex(p) + " (" + std::to_string(bytes) +
           " bytes) is not reachable from the handle's device " + std::to_string(g.device) + ": " + why;
}

std::string check_matrices(const Gemm & g, const void * A, const void * B, const void * C) {
    std::string why;
    if (g.empty()) {
        return why;
    }
    if (g.reads_ab()) {
        why = unreachable(g, "A", A, g.a_bytes());
        if (why.empty()) {
            why = unreachable(g, "B", B, g.b_bytes());
        }
    }
    return why.empty() ? unreachable(g, "C", C, g.c_bytes()) : why;
}

// the bytes a matrix occupies: a range per column while it has at most max_columns of them (a
// view's columns interleave with other writers' rows: a split mat-mul's result), else one range
void matrix_ranges(const void * p, int rows, int cols, int ld, size_t es, int64_t max_columns,
                   std::vector<race::Range> & out) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(p);
    if (rows == 0 || cols == 0) {
        return;
    }
    if (cols > max_columns || ld == rows) {
        out.push_back({ base, base + Gemm::extent(rows, cols, ld, es) });
        return;
    }
    for (int c = 0; c < cols; ++c) {
        const uintptr_t b = base + (uintptr_t) c * (uintptr_t) ld * es;
        out.push_back({ b, b + (uintptr_t) rows * es });
    }
}

struct Accesses {
    std::vector<race::Range> reads, writes;
};

void add_gemm_ranges(const Gemm & g, const void * A, const void * B, const void * C, int64_t max_columns,
                     Accesses & acc) {
    if (g.empty()) {
        return;
    }
    if (g.reads_ab()) {
        matrix_ranges(A, g.a_rows(), g.a_cols(), g.lda, type_size(g.ab_type), max_columns, acc.reads);
        matrix_ranges(B, g.b_rows(), g.b_cols(), g.ldb, type_size(g.ab_type), max_columns, acc.reads);
    }
    if (g.beta != 0.0f) {
        matrix_ranges(C, g.m, g.n, g.ldc, type_size(g.c_type), max_columns, acc.reads);
    }
    matrix_ranges(C, g.m, g.n, g.ldc, type_size(g.c_type), max_columns, acc.writes);
}

void add_workspace(const Gemm & g, Accesses & acc) {
    if (g.workspace != nullptr && g.workspace_size > 0) { // cuBLAS may use it: a write, for the race checker
        const uintptr_t w = reinterpret_cast<uintptr_t>(g.workspace);
        acc.writes.push_back({ w, w + g.workspace_size });
    }
}

std::string describe_call(const Gemm & g, int batch) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s (%c%c, m %d, n %d, k %d, batch %d)", g.call.c_str(), g.ta ? 'T' : 'N',
                  g.tb ? 'T' : 'N', g.m, g.n, g.k, batch);
    return buf;
}

// A failure found at the call: logged, returned, and put on the stream as a failed command (the
// kernel that would have faulted), so that its next synchronize reports it too.
cublasStatus_t fail_on_stream(cublasContext * h, const Gemm & g, int batch, const std::string & why) {
    WSP_LOG_ERROR("cuBLAS (host target): %s on device %d: %s: CUBLAS_STATUS_EXECUTION_FAILED\n",
                  describe_call(g, batch).c_str(), g.device, why.c_str());
    (void) enqueue(h->stream, describe_call(g, batch), [why](std::string & message) {
        message = why;
        return cudaErrorIllegalAddress;
    });
    return CUBLAS_STATUS_EXECUTION_FAILED;
}

// the handle's stream must be of its device (the legacy stream: the current device)
cublasStatus_t check_stream(cublasContext * h, const char * call) {
    const int dev = stream_device(h->stream);
    if (dev != h->device) {
        WSP_LOG_ERROR("cuBLAS (host target): %s: the handle belongs to device %d but its stream %p is %s%d: "
                      "CUBLAS_STATUS_EXECUTION_FAILED\n",
                      call, h->device, (void *) h->stream, dev < 0 ? "invalid " : "of device ", dev);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t submit(cublasContext * h, const Gemm & g, int batch, Work work, Accesses acc) {
    add_workspace(g, acc);
    race::normalize(acc.reads);
    race::normalize(acc.writes);
    const cudaError_t err =
        enqueue(h->stream, describe_call(g, batch), std::move(work), std::move(acc.reads), std::move(acc.writes));
    if (err != cudaSuccess) {
        WSP_LOG_ERROR("cuBLAS (host target): %s: the stream refused the work (CUDA error %d): "
                      "CUBLAS_STATUS_EXECUTION_FAILED\n",
                      g.call.c_str(), (int) err);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

// checks common to the three GEMM calls before their matrices are looked at
cublasStatus_t prepare(cublasContext * h, const char * call, int batch, const Gemm & g) {
    if (const cublasStatus_t st = check_stream(h, call); st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    if (const std::string gone = workspace_gone(g.workspace, g.workspace_size); !gone.empty()) {
        return fail_on_stream(h, g, batch, gone);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// strided batches (one GEMM: batch 1, strides 0)
cublasStatus_t gemm_strided(cublasContext * h, const Gemm & g, const void * A, long long sa, const void * B,
                            long long sb, void * C, long long sc, int batch) {
    if (const cublasStatus_t st = prepare(h, g.call.c_str(), batch, g); st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    const long long ea = (long long) type_size(g.ab_type), ec = (long long) type_size(g.c_type);
    auto            a_of = [=](int b) { return static_cast<const char *>(A) + (long long) b * sa * ea; };
    auto            b_of = [=](int b) { return static_cast<const char *>(B) + (long long) b * sb * ea; };
    auto            c_of = [=](int b) { return static_cast<char *>(C) + (long long) b * sc * ec; };

    // per-column ranges for each matrix while the four of every batch entry stay within the budget
    const int64_t max_columns = race::MAX_PIECES / (4 * (int64_t) batch);
    Accesses      acc;
    for (int b = 0; b < batch; ++b) {
        if (const std::string why = check_matrices(g, a_of(b), b_of(b), c_of(b)); !why.empty()) {
            return fail_on_stream(h, g, batch, "batch entry " + std::to_string(b) + ": " + why);
        }
        if (batch <= race::MAX_PIECES) {
            add_gemm_ranges(g, a_of(b), b_of(b), c_of(b), max_columns, acc);
        }
    }
    if (batch > race::MAX_PIECES && !g.empty()) { // the bounding ranges: more races reported, never fewer
        auto span = [&](const char * first, const char * last, size_t bytes) {
            const uintptr_t lo = reinterpret_cast<uintptr_t>(std::min(first, last));
            const uintptr_t hi = reinterpret_cast<uintptr_t>(std::max(first, last)) + bytes;
            return race::Range{ lo, hi };
        };
        if (g.reads_ab()) {
            acc.reads.push_back(span(a_of(0), a_of(batch - 1), g.a_bytes()));
            acc.reads.push_back(span(b_of(0), b_of(batch - 1), g.b_bytes()));
        }
        acc.writes.push_back(span(c_of(0), c_of(batch - 1), g.c_bytes()));
        if (g.beta != 0.0f) {
            acc.reads.push_back(acc.writes.back());
        }
    }
    Work work = [=](std::string & message) {
        if (std::string gone = workspace_gone(g.workspace, g.workspace_size); !gone.empty()) {
            message = g.call + ": " + gone;
            return cudaErrorIllegalAddress;
        }
        Packs packs;
        for (int b = 0; b < batch; ++b) {
            run_one(g, a_of(b), b_of(b), c_of(b), packs);
        }
        return cudaSuccess;
    };
    return submit(h, g, batch, std::move(work), std::move(acc));
}

} // namespace
} // namespace wsp::host_target::blas

using namespace wsp::host_target;
using namespace wsp::host_target::blas;

cublasStatus_t cublasCreate(cublasHandle_t * handle) {
    if (handle == nullptr) {
        WSP_LOG_ERROR("cuBLAS (host target): cublasCreate: handle is null: CUBLAS_STATUS_INVALID_VALUE\n");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *handle    = nullptr;
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0) {
        (void) cudaGetLastError();
        WSP_LOG_ERROR("cuBLAS (host target): cublasCreate: no current device: CUBLAS_STATUS_NOT_INITIALIZED\n");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    auto * h  = new cublasContext;
    h->device = device;
    std::lock_guard<std::mutex> lock(handles_mutex());
    live_handles().insert(h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    {
        std::lock_guard<std::mutex> lock(handles_mutex());
        if (handle == nullptr || live_handles().erase(handle) == 0) {
            return not_initialized("cublasDestroy", handle);
        }
    }
    const std::unique_ptr<cublasContext> h(handle);
    if (const std::string gone = workspace_gone(h->workspace, h->workspace_size); !gone.empty()) {
        WSP_LOG_ERROR("cuBLAS (host target): cublasDestroy of the handle of device %d: %s (free it after "
                      "cublasDestroy): CUBLAS_STATUS_INVALID_VALUE\n",
                      h->device, gone.c_str());
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!is_live(handle)) {
        return not_initialized("cublasSetStream", handle);
    }
    // the legacy stream (0) is the current device's when a GEMM is called: checked then
    if (stream != nullptr) {
        const int dev = stream_device(stream);
        if (dev != handle->device) {
            WSP_LOG_ERROR("cuBLAS (host target): cublasSetStream: stream %p is %s%d, the handle belongs to device "
                          "%d: CUBLAS_STATUS_INVALID_VALUE\n",
                          (void *) stream, dev < 0 ? "invalid " : "of device ", dev, handle->device);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t * stream) {
    if (!is_live(handle)) {
        return not_initialized("cublasGetStream", handle);
    }
    if (stream == nullptr) {
        WSP_LOG_ERROR("cuBLAS (host target): cublasGetStream: streamId is null: CUBLAS_STATUS_INVALID_VALUE\n");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *stream = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void * workspace, size_t workspace_size) {
    if (!is_live(handle)) {
        return not_initialized("cublasSetWorkspace", handle);
    }
    if (workspace != nullptr) {
        std::string why;
        if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
            why = "is not 256-byte aligned";
        } else if (device_of(workspace) != handle->device) {
            why = device_of(workspace) < 0 ? "is not device memory"
                                           : "is memory of device " + std::to_string(device_of(workspace));
        } else if (workspace_size > 0 && check_access(handle->device, workspace, workspace_size, &why) != cudaSuccess) {
            why = "does not hold " + std::to_string(workspace_size) + " bytes: " + why;
        }
        if (!why.empty()) {
            WSP_LOG_ERROR("cuBLAS (host target): cublasSetWorkspace: the workspace %p %s; the handle belongs to "
                          "device %d: CUBLAS_STATUS_INVALID_VALUE\n",
                          workspace, why.c_str(), handle->device);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    handle->workspace      = workspace;
    handle->workspace_size = workspace == nullptr ? 0 : workspace_size;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!is_live(handle)) {
        return not_initialized("cublasSetMathMode", handle);
    }
    const int base = (int) mode & ~(int) CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base < 0 || base > 3) {
        WSP_LOG_ERROR("cuBLAS (host target): cublasSetMathMode: mode %d: CUBLAS_STATUS_INVALID_VALUE\n", (int) mode);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t * mode) {
    if (!is_live(handle)) {
        return not_initialized("cublasGetMathMode", handle);
    }
    if (mode == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    *mode = handle->math;
    return CUBLAS_STATUS_SUCCESS;
}

const char * cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void * alpha, const void * A, cudaDataType Atype, int lda, const void * B,
                            cudaDataType Btype, int ldb, const void * beta, void * C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!is_live(handle)) {
        return not_initialized("cublasGemmEx", handle);
    }
    Gemm g;
    if (const cublasStatus_t st = validate(handle, "cublasGemmEx", transa, transb, m, n, k, { alpha, beta }, Atype, lda,
                                           Btype, ldb, Ctype, ldc, 1, computeType, algo, g);
        st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    return gemm_strided(handle, g, A, 0, B, 0, C, 0, 1);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void * alpha, const void * A, cudaDataType Atype,
                                          int lda, long long int strideA, const void * B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void * beta, void * C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!is_live(handle)) {
        return not_initialized("cublasGemmStridedBatchedEx", handle);
    }
    Gemm g;
    if (const cublasStatus_t st =
            validate(handle, "cublasGemmStridedBatchedEx", transa, transb, m, n, k, { alpha, beta }, Atype, lda, Btype,
                     ldb, Ctype, ldc, batchCount, computeType, algo, g);
        st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    return gemm_strided(handle, g, A, strideA, B, strideB, C, strideC, batchCount);
}

cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void * alpha, const void * const Aarray[], cudaDataType Atype,
                                   int lda, const void * const Barray[], cudaDataType Btype, int ldb, const void * beta,
                                   void * const Carray[], cudaDataType Ctype, int ldc, int batchCount,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!is_live(handle)) {
        return not_initialized("cublasGemmBatchedEx", handle);
    }
    Gemm g;
    if (const cublasStatus_t st = validate(handle, "cublasGemmBatchedEx", transa, transb, m, n, k, { alpha, beta },
                                           Atype, lda, Btype, ldb, Ctype, ldc, batchCount, computeType, algo, g);
        st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    if (const cublasStatus_t st = prepare(handle, g.call.c_str(), batchCount, g); st != CUBLAS_STATUS_SUCCESS) {
        return st;
    }
    if (batchCount == 0 || g.empty()) {
        return CUBLAS_STATUS_SUCCESS;
    }
    // The pointer arrays are device memory that the device reads; the matrices they name are
    // known only when the work runs (a kernel queued before usually writes them), so they are
    // checked then, and only the arrays are named to the race checker.
    const size_t array_bytes = (size_t) batchCount * sizeof(void *);
    const bool   ab          = g.reads_ab();
    Accesses     acc;
    const struct {
        const char * name;
        const void * p;
        bool         used;
    } arrays[] = { { "Aarray", Aarray, ab }, { "Barray", Barray, ab }, { "Carray", Carray, true } };
    for (const auto & a : arrays) {
        if (!a.used) {
            continue;
        }
        if (const std::string why = unreachable(g, a.name, a.p, array_bytes); !why.empty()) {
            return fail_on_stream(handle, g, batchCount, why);
        }
        const uintptr_t p = reinterpret_cast<uintptr_t>(a.p);
        acc.reads.push_back({ p, p + array_bytes });
    }
    Work work = [=](std::string & message) {
        if (std::string gone = workspace_gone(g.workspace, g.workspace_size); !gone.empty()) {
            message = g.call + ": " + gone;
            return cudaErrorIllegalAddress;
        }
        Packs packs;
        for (int b = 0; b < batchCount; ++b) {
            const void * a  = ab ? Aarray[b] : nullptr;
            const void * bm = ab ? Barray[b] : nullptr;
            if (std::string why = check_matrices(g, a, bm, Carray[b]); !why.empty()) {
                message = g.call + ": batch entry " + std::to_string(b) + ": " + why;
                return cudaErrorIllegalAddress;
            }
            run_one(g, a, bm, Carray[b], packs);
        }
        return cudaSuccess;
    };
    return submit(handle, g, batchCount, std::move(work), std::move(acc));
}
