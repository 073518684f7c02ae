// Copies and fills in stream order: 1-D, pitched 2-D and 3-D (peer) copies and memsets. Both
// sides are checked when the call is made (inside one live allocation, or host memory; the kind
// must match the pointers) and again when the stream reaches the command (the memory may have
// been freed in between, or by a graph replay's time). Copies between devices need no peer
// access: CUDA stages them through the host. Each command reports its device bytes to the
// happens-before checker: the source read, the destination written.

#include "runtime_impl.h"

#include <cstring>

namespace wsp::host_target {

namespace {

// a pitched box of bytes: depth slices of height rows of width bytes
struct Box {
    uintptr_t base;
    size_t    pitch, slice;
};

struct Copy {
    Box    dst, src;
    size_t width, height, depth;
};

size_t span_of(const Box & b, size_t width, size_t height, size_t depth) {
    return (depth - 1) * b.slice + (height - 1) * b.pitch + width;
}

// the rows of a box that lie in device memory, for the checker
void rows_of(const Box & b, size_t width, size_t height, size_t depth, int device, std::vector<race::Range> & out) {
    if (device < 0) {
        return;
    }
    if (b.pitch == width && (depth == 1 || b.slice == b.pitch * height)) {
        out.push_back({ b.base, b.base + width * height * depth });
        return;
    }
    for (size_t z = 0; z < depth; ++z) {
        for (size_t y = 0; y < height; ++y) {
            const uintptr_t row = b.base + z * b.slice + y * b.pitch;
            out.push_back({ row, row + width });
        }
    }
    race::normalize(out);
}

const char * kind_text(cudaMemcpyKind kind) {
    switch (kind) {
        case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
        case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
        case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
        case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
        case cudaMemcpyDefault: return "cudaMemcpyDefault";
    }
    return "?";
}

// CUDA leaves a kind that contradicts the pointers undefined; here it is an error
cudaError_t check_kind(cudaMemcpyKind kind, int src_device, int dst_device, const char * call) {
    bool src_dev = true, dst_dev = true;
    switch (kind) {
        case cudaMemcpyDefault: return cudaSuccess;
        case cudaMemcpyHostToHost: src_dev = dst_dev = false; break;
        case cudaMemcpyHostToDevice: src_dev = false; break;
        case cudaMemcpyDeviceToHost: dst_dev = false; break;
        case cudaMemcpyDeviceToDevice: break;
        default: return set_last(cudaErrorInvalidMemcpyDirection);
    }
    if ((src_device >= 0) != src_dev || (dst_device >= 0) != dst_dev) {
        return fail(cudaErrorInvalidValue, "%s: %s, but the source is %s and the destination %s", call, kind_text(kind),
                    src_device >= 0 ? "device memory" : "host memory",
                    dst_device >= 0 ? "device memory" : "host memory");
    }
    return cudaSuccess;
}

// the copy itself, on the stream's worker
cudaError_t run_copy(const Copy & c, const std::shared_ptr<std::vector<char>> & staged, const std::string & what,
                     const Exec & exec, std::string & message) {
    Place        src, dst;
    const size_t src_span = span_of(c.src, c.width, c.height, c.depth);
    const size_t dst_span = span_of(c.dst, c.width, c.height, c.depth);
    if (locate((const void *) c.src.base, src_span, "source", &src, &message) != cudaSuccess ||
        locate((const void *) c.dst.base, dst_span, "destination", &dst, &message) != cudaSuccess) {
        return cudaErrorIllegalAddress;
    }
    std::vector<race::Range> reads, writes;
    rows_of(c.src, c.width, c.height, c.depth, src.device, reads);
    rows_of(c.dst, c.width, c.height, c.depth, dst.device, writes);
    const bool   ordered = report_accesses(exec.agent, reads, writes, race::text_label(what), message);
    const char * from    = staged != nullptr ? staged->data() : (const char *) c.src.base;
    for (size_t z = 0; z < c.depth; ++z) {
        for (size_t y = 0; y < c.height; ++y) {
            std::memmove((char *) c.dst.base + z * c.dst.slice + y * c.dst.pitch,
                         from + z * c.src.slice + y * c.src.pitch, c.width);
        }
    }
    return ordered ? cudaSuccess : cudaErrorLaunchFailure;
}

// devices: the ones a peer copy names (-2: any)
cudaError_t submit_copy(cudaStream_t stream, const Copy & c, cudaMemcpyKind kind, const char * call,
                        int src_device = -2, int dst_device = -2) {
    if (c.width == 0 || c.height == 0 || c.depth == 0) {
        return cudaSuccess;
    }
    if ((c.height > 1 || c.depth > 1) && (c.src.pitch < c.width || c.dst.pitch < c.width)) {
        return fail(cudaErrorInvalidPitchValue, "%s: pitch (source %zu, destination %zu) below the width %zu", call,
                    c.src.pitch, c.dst.pitch, c.width);
    }
    if (c.depth > 1 && (c.src.slice < c.src.pitch * c.height || c.dst.slice < c.dst.pitch * c.height)) {
        return fail(cudaErrorInvalidValue, "%s: slices overlap (height %zu)", call, c.height);
    }
    Place       src, dst;
    std::string message;
    if (locate((const void *) c.src.base, span_of(c.src, c.width, c.height, c.depth), "source", &src, &message) !=
            cudaSuccess ||
        locate((const void *) c.dst.base, span_of(c.dst, c.width, c.height, c.depth), "destination", &dst, &message) !=
            cudaSuccess) {
        return fail(cudaErrorInvalidValue, "%s: %s", call, message.c_str());
    }
    if (const cudaError_t e = check_kind(kind, src.device, dst.device, call); e != cudaSuccess) {
        return e;
    }
    if ((src_device != -2 && src.device != src_device) || (dst_device != -2 && dst.device != dst_device)) {
        return fail(cudaErrorInvalidValue, "%s: the pointers are on devices %d -> %d, the call names %d -> %d", call,
                    src.device, dst.device, src_device, dst_device);
    }
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    bool capturing = false;
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        capturing = s->capture != nullptr;
    }
    // CUDA stages pageable host memory: a source is read before the call returns, a destination
    // is written before it returns (a replay reads and writes the memory as it is then)
    std::shared_ptr<std::vector<char>> staged;
    const size_t                       src_span = span_of(c.src, c.width, c.height, c.depth);
    if (!capturing && src.device < 0 && dst.device >= 0 && !is_pinned((const void *) c.src.base, src_span)) {
        staged = std::make_shared<std::vector<char>>((const char *) c.src.base, (const char *) c.src.base + src_span);
    }
    const bool wait = !capturing && dst.device < 0 && src.device >= 0 &&
                      !is_pinned((const void *) c.dst.base, span_of(c.dst, c.width, c.height, c.depth));
    auto        done = wait ? std::make_shared<Slot>() : nullptr;
    std::string what = s->name + ": " + call + " (" + kind_text(kind) + ")";
    Run         run  = [c, staged, what, done](const Exec & exec, std::string & msg) {
        const cudaError_t e = run_copy(c, staged, what, exec, msg);
        if (done != nullptr) {
            done->complete(race::checker().clock_of(exec.agent));
        }
        return e;
    };
    if (const cudaError_t e = s->submit({ call, std::move(run) }); e != cudaSuccess) {
        return set_last(e);
    }
    if (done != nullptr) {
        race::checker().acquire(race::checker().host_agent(), done->wait(false));
    }
    return cudaSuccess;
}

Copy linear(void * dst, const void * src, size_t count) {
    return Copy{ { (uintptr_t) dst, count, count }, { (uintptr_t) src, count, count }, count, 1, 1 };
}

// the synchronous calls: on the legacy stream, then wait for it
cudaError_t finish_on_legacy(cudaError_t queued) {
    if (queued != cudaSuccess) {
        return queued;
    }
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(nullptr, &err);
    return set_last(s->wait_idle(true));
}

} // namespace

} // namespace wsp::host_target

using namespace wsp::host_target;
namespace race = wsp::race;

cudaError_t cudaMemcpyAsync(void * dst, const void * src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
    return submit_copy(stream, linear(dst, src, count), kind, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void * dst, const void * src, size_t count, enum cudaMemcpyKind kind) {
    if (const cudaError_t e = check_capture_safe("cudaMemcpy"); e != cudaSuccess) {
        return e;
    }
    return finish_on_legacy(submit_copy(nullptr, linear(dst, src, count), kind, "cudaMemcpy"));
}

cudaError_t cudaMemcpy2DAsync(void * dst, size_t dpitch, const void * src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream) {
    const Copy c{
        { (uintptr_t) dst, dpitch, dpitch * height }, { (uintptr_t) src, spitch, spitch * height }, width, height, 1
    };
    return submit_copy(stream, c, kind, "cudaMemcpy2DAsync");
}

cudaError_t cudaMemcpyPeerAsync(void * dst, int dst_device, const void * src, int src_device, size_t count,
                                cudaStream_t stream) {
    if (!valid_device(dst_device) || !valid_device(src_device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    return submit_copy(stream, linear(dst, src, count), cudaMemcpyDeviceToDevice, "cudaMemcpyPeerAsync", src_device,
                       dst_device);
}

cudaError_t cudaMemcpyPeer(void * dst, int dst_device, const void * src, int src_device, size_t count) {
    if (!valid_device(dst_device) || !valid_device(src_device)) {
        return set_last(cudaErrorInvalidDevice);
    }
    if (const cudaError_t e = check_capture_safe("cudaMemcpyPeer"); e != cudaSuccess) {
        return e;
    }
    return finish_on_legacy(submit_copy(nullptr, linear(dst, src, count), cudaMemcpyDeviceToDevice, "cudaMemcpyPeer",
                                        src_device, dst_device));
}

cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms * p, cudaStream_t stream) {
    if (p == nullptr || p->srcArray != nullptr || p->dstArray != nullptr) {
        return fail(cudaErrorInvalidValue, "cudaMemcpy3DPeerAsync: %s",
                    p == nullptr ? "no parameters" : "CUDA arrays are not supported");
    }
    if (!valid_device(p->srcDevice) || !valid_device(p->dstDevice)) {
        return set_last(cudaErrorInvalidDevice);
    }
    const cudaExtent & e = p->extent;
    if (e.depth > 1 && (p->srcPtr.ysize < p->srcPos.y + e.height || p->dstPtr.ysize < p->dstPos.y + e.height)) {
        return fail(cudaErrorInvalidValue,
                    "cudaMemcpy3DPeerAsync: %zu rows from row %zu/%zu do not fit slices of %zu/%zu", e.height,
                    p->srcPos.y, p->dstPos.y, p->srcPtr.ysize, p->dstPtr.ysize);
    }
    if (p->srcPtr.pitch < p->srcPos.x + e.width || p->dstPtr.pitch < p->dstPos.x + e.width) {
        return fail(cudaErrorInvalidPitchValue, "cudaMemcpy3DPeerAsync: pitch (%zu, %zu) below the row end (%zu, %zu)",
                    p->srcPtr.pitch, p->dstPtr.pitch, p->srcPos.x + e.width, p->dstPos.x + e.width);
    }
    auto box = [](const cudaPitchedPtr & ptr, const cudaPos & pos) {
        const size_t slice = ptr.pitch * ptr.ysize;
        return Box{ (uintptr_t) ptr.ptr + pos.z * slice + pos.y * ptr.pitch + pos.x, ptr.pitch, slice };
    };
    const Copy c{ box(p->dstPtr, p->dstPos), box(p->srcPtr, p->srcPos), e.width, e.height, e.depth };
    return submit_copy(stream, c, cudaMemcpyDeviceToDevice, "cudaMemcpy3DPeerAsync", p->srcDevice, p->dstDevice);
}

cudaError_t cudaMemsetAsync(void * ptr, int value, size_t count, cudaStream_t stream) {
    if (count == 0) {
        return cudaSuccess;
    }
    Place       place;
    std::string message;
    if (locate(ptr, count, "destination", &place, &message) != cudaSuccess || place.device < 0) {
        return fail(cudaErrorInvalidValue, "cudaMemsetAsync: %s",
                    place.device < 0 && message.empty() ? "not device memory" : message.c_str());
    }
    cudaError_t err = cudaSuccess;
    auto        s   = resolve(stream, &err);
    if (s == nullptr) {
        return set_last(err);
    }
    const race::What what = race::text_label(s->name + ": cudaMemsetAsync");
    Run              run  = [ptr, value, count, what](const Exec & exec, std::string & msg) {
        Place at;
        if (locate(ptr, count, "destination", &at, &msg) != cudaSuccess) {
            return cudaErrorIllegalAddress;
        }
        const bool ordered =
            report_accesses(exec.agent, {}, { { (uintptr_t) ptr, (uintptr_t) ptr + count } }, what, msg);
        std::memset(ptr, value, count);
        return ordered ? cudaSuccess : cudaErrorLaunchFailure;
    };
    return set_last(s->submit({ "cudaMemsetAsync", std::move(run) }));
}

cudaError_t cudaMemset(void * ptr, int value, size_t count) {
    if (const cudaError_t e = check_capture_safe("cudaMemset"); e != cudaSuccess) {
        return e;
    }
    return finish_on_legacy(cudaMemsetAsync(ptr, value, count, nullptr));
}
