// The CUDA backend: one stream (created on first use) and its cuBLAS handle. Everything it does
// is asynchronous on that stream: tensor transfers, copies to other CUDA backends (on the source
// stream, the destination waiting on an event), graph compute through the op table, and the
// all-reduce over one backend per GPU (Note [NCCL all-reduce]). synchronize reports failures of
// the queued work.

#include "kernels/kernels.cuh"
#include "nccl.cuh"

#include <string>
#include <vector>

namespace wsp::cuda {

namespace {

wsp_ggml_guid cuda_guid = { 0x2b, 0x8e, 0x41, 0xd6, 0x0c, 0x97, 0x4a, 0x53,
                            0xbe, 0x15, 0x6f, 0xa2, 0x39, 0xc0, 0x74, 0xe8 };

const char * backend_name(wsp_ggml_backend_t b) {
    return devices()[(size_t) backend_ctx(b).index].name.c_str();
}

void backend_free(wsp_ggml_backend_t b) {
    BackendCtx & ctx = backend_ctx(b);
    if (ctx.stream_owner) {
        DeviceGuard guard(ctx.physical);
        WSP_CUDA_WAIT(cudaStreamSynchronize(ctx.stream_owner.get()), ctx.index);
    }
    delete &ctx;
    delete b;
    nccl::release();
}

void set_async(wsp_ggml_backend_t b, wsp_ggml_tensor * t, const void * data, size_t off, size_t n) {
    BackendCtx & ctx = backend_ctx(b);
    DeviceGuard  guard(ctx.physical);
    if (cudaStream_t s = ctx.stream()) {
        WSP_CUDA_OK(cudaMemcpyAsync(static_cast<char *>(t->data) + off, data, n, cudaMemcpyHostToDevice, s),
                    ctx.physical);
    }
}

void get_async(wsp_ggml_backend_t b, const wsp_ggml_tensor * t, void * data, size_t off, size_t n) {
    BackendCtx & ctx = backend_ctx(b);
    DeviceGuard  guard(ctx.physical);
    if (cudaStream_t s = ctx.stream()) {
        WSP_CUDA_OK(cudaMemcpyAsync(data, static_cast<const char *>(t->data) + off, n, cudaMemcpyDeviceToHost, s),
                    ctx.physical);
    }
}

// a tensor whose rows lie at one pitch: row r at data + r * nb[1] (dims 2-3 continue the rows)
bool uniform_rows(const wsp_ggml_tensor * t) {
    return t->nb[0] == wsp_ggml_type_size(t->type) && t->nb[2] == t->nb[1] * (size_t) t->ne[1] &&
           t->nb[3] == t->nb[2] * (size_t) t->ne[2];
}

// the rows of src into the rows of dst (same shape, each at its own pitch), on stream ss
bool copy_rows(const wsp_ggml_tensor * src, int from, wsp_ggml_tensor * dst, int to, cudaStream_t ss, int on) {
    const size_t width  = wsp_ggml_row_size(src->type, src->ne[0]);
    const size_t height = (size_t) wsp_ggml_nrows(src);
#if !WSP_GPU_HAS_MEMCPY_3D_PEER
    // one address space for every device (HIP): a 2-D copy reaches the peer
    (void) from;
    (void) to;
    return WSP_CUDA_OK(
        cudaMemcpy2DAsync(dst->data, dst->nb[1], src->data, src->nb[1], width, height, cudaMemcpyDeviceToDevice, ss),
        on);
#else
    cudaMemcpy3DPeerParms p{};
    p.srcPtr    = make_cudaPitchedPtr(const_cast<void *>(src->data), src->nb[1], width, height);
    p.dstPtr    = make_cudaPitchedPtr(dst->data, dst->nb[1], width, height);
    p.srcDevice = from;
    p.dstDevice = to;
    p.extent    = make_cudaExtent(width, height, 1);
    return WSP_CUDA_OK(cudaMemcpy3DPeerAsync(&p, ss), on);
#endif
}

// device to device between CUDA backends: on the source stream after its queued work; the
// destination stream waits for it (Note [peer access] in device.cu). Layouts may differ where
// both sides are rows at a pitch (a split mul_mat's slice landing in the rows of its result):
// a 2-D peer copy.
bool cpy_async(wsp_ggml_backend_t src_b, wsp_ggml_backend_t dst_b, const wsp_ggml_tensor * src, wsp_ggml_tensor * dst) {
    if (!is_cuda_backend(src_b) || !is_cuda_backend(dst_b) || !is_cuda_buffer(storage_buffer(src)) ||
        !is_cuda_buffer(storage_buffer(dst)) || src->type != dst->type || !wsp_ggml_are_same_shape(src, dst)) {
        return false;
    }
    const bool contiguous = wsp_ggml_is_contiguous(src) && wsp_ggml_is_contiguous(dst);
    if (!contiguous && !(uniform_rows(src) && uniform_rows(dst))) {
        return false;
    }
    BackendCtx & s  = backend_ctx(src_b);
    BackendCtx & d  = backend_ctx(dst_b);
    cudaStream_t ss = s.stream(), ds = d.stream();
    if (ss == nullptr || ds == nullptr) {
        return false;
    }
    const int    from  = physical_of(buffer_device(storage_buffer(src)));
    const int    to    = physical_of(buffer_device(storage_buffer(dst)));
    const size_t bytes = wsp_ggml_nbytes(src);
    if (contiguous && nccl::preferred(from, to, bytes) && nccl::copy(from, to, src->data, dst->data, bytes, ss, ds)) {
        return true; // Note [NCCL transfers]: the receive on ds orders the destination's later work
    }
    DeviceGuard guard(s.physical);
    const bool  queued = contiguous
                             ? WSP_CUDA_OK(cudaMemcpyPeerAsync(dst->data, to, src->data, from, bytes, ss), s.physical)
                             : copy_rows(src, from, dst, to, ss, s.physical);
    if (!queued) {
        return false;
    }
    if (src_b != dst_b) {
        if (!s.copy_done) {
            s.copy_done = make_event(s.physical);
        }
        if (!s.copy_done || !WSP_CUDA_OK(cudaEventRecord(s.copy_done.get(), ss), s.physical)) {
            return false;
        }
        DeviceGuard dguard(d.physical);
        return WSP_CUDA_OK(cudaStreamWaitEvent(ds, s.copy_done.get(), 0), d.physical);
    }
    return true;
}

wsp_ggml_status synchronize(wsp_ggml_backend_t b) {
    BackendCtx & ctx = backend_ctx(b);
    if (!ctx.stream_owner) {
        return WSP_GGML_STATUS_SUCCESS;
    }
    DeviceGuard guard(ctx.physical);
    ctx.graphs->evaluation_ended(); // Note [CUDA graphs]
    return WSP_CUDA_WAIT(cudaStreamSynchronize(ctx.stream_owner.get()), ctx.index) ? WSP_GGML_STATUS_SUCCESS
                                                                                   : WSP_GGML_STATUS_FAILED;
}

bool launch_nodes(wsp_ggml_backend_t b, LaunchCtx & lc, wsp_ggml_cgraph * graph) {
    const int n = wsp_ggml_graph_n_nodes(graph);
    for (int i = 0; i < n; ++i) {
        wsp_ggml_tensor * node = wsp_ggml_graph_node(graph, i);
        if (is_noop(node) || wsp_ggml_is_empty(node)) {
            continue;
        }
        const OpEntry * e = op_entry(node);
        if (e == nullptr || !e->supported(node)) {
            WSP_LOG_ERROR("%s: op %s is not supported for %s\n", backend_name(b), wsp_ggml_op_desc(node),
                          describe(node).c_str());
            return false;
        }
        if (!gpu::note_accesses(lc.stream, node)) {
            WSP_LOG_ERROR("%s: %s reads or writes memory the device cannot reach: %s\n", backend_name(b),
                          wsp_ggml_op_desc(node), describe(node).c_str());
            return false;
        }
        if (!e->launch(lc, node)) {
            if (lc.scratch().short_by() == 0) { // else a recording waits for the arena (Note [CUDA graphs])
                WSP_LOG_ERROR("%s: %s failed for %s\n", backend_name(b), wsp_ggml_op_desc(node),
                              describe(node).c_str());
            }
            return false;
        }
    }
    return true;
}

wsp_ggml_status graph_compute(wsp_ggml_backend_t b, wsp_ggml_cgraph * graph) {
    BackendCtx & ctx = backend_ctx(b);
    ++counters(ctx.index).graph_computes;
    CountFor     count_for(ctx.index);
    DeviceGuard  guard(ctx.physical);
    cudaStream_t stream = ctx.stream();
    if (stream == nullptr) {
        return WSP_GGML_STATUS_FAILED;
    }
#if WSP_GPU_HAS_BLAS
    if (ctx.blas() == nullptr) { // made before a graph capture can begin
        return WSP_GGML_STATUS_FAILED;
    }
#endif
    LaunchCtx lc{ ctx.index, ctx.physical, stream, ctx };
    switch (ctx.graphs->run(stream, graph, *ctx.scratch, [&] { return launch_nodes(b, lc, graph); })) {
        case GraphCache::Result::REPLAYED:
        case GraphCache::Result::RECORDED: return WSP_GGML_STATUS_SUCCESS;
        case GraphCache::Result::FAILED: return WSP_GGML_STATUS_FAILED;
        case GraphCache::Result::OFF: break;
    }
    return launch_nodes(b, lc, graph) ? WSP_GGML_STATUS_SUCCESS : WSP_GGML_STATUS_FAILED;
}

void event_record(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    BackendCtx & ctx = backend_ctx(b);
    DeviceGuard  guard(ctx.physical);
    if (cudaStream_t s = ctx.stream()) {
        WSP_CUDA_OK(cudaEventRecord(static_cast<Event *>(e->context)->get(), s), ctx.physical);
    }
}

void event_wait(wsp_ggml_backend_t b, wsp_ggml_backend_event_t e) {
    if (e->device == nullptr || wsp_ggml_backend_dev_backend_reg(e->device) != reg()) {
        // not a CUDA event (a sim device's, say): the stream cannot wait on it, the host does (a
        // host wait of this device's call, counted here too: Note [counters])
        ++counters(backend_ctx(b).index).host_syncs;
        wsp_ggml_backend_event_synchronize(e);
        return;
    }
    BackendCtx & ctx = backend_ctx(b);
    DeviceGuard  guard(ctx.physical);
    if (cudaStream_t s = ctx.stream()) {
        WSP_CUDA_OK(cudaStreamWaitEvent(s, static_cast<Event *>(e->context)->get(), 0), ctx.physical);
    }
}

const wsp_ggml_backend_i backend_iface = {
    /* .get_name           = */ backend_name,
    /* .free               = */ backend_free,
    /* .set_tensor_async   = */ set_async,
    /* .get_tensor_async   = */ get_async,
    /* .cpy_tensor_async   = */ cpy_async,
    /* .synchronize        = */ synchronize,
    /* .graph_plan_create  = */ nullptr,
    /* .graph_plan_free    = */ nullptr,
    /* .graph_plan_update  = */ nullptr,
    /* .graph_plan_compute = */ nullptr,
    /* .graph_compute      = */ graph_compute,
    /* .event_record       = */ event_record,
    /* .event_wait         = */ event_wait,
};

} // namespace

cudaStream_t BackendCtx::stream() {
    if (!stream_owner) {
        stream_owner = make_stream(physical);
    }
    return stream_owner.get();
}

#if WSP_GPU_HAS_BLAS
cublasHandle_t BackendCtx::blas() {
    if (!blas_owner && stream() != nullptr) {
        BlasHandle h = make_blas(physical, stream());
#    if WSP_GPU_BLAS_SET_WORKSPACE
        // a workspace of our own: cuBLAS then allocates nothing during a CUDA graph capture
        constexpr size_t WORKSPACE = (size_t) 32 << 20;
        blas_workspace             = alloc_device(index, WORKSPACE, "the cuBLAS workspace");
        DeviceGuard guard(physical);
        if (h && (!blas_workspace ||
                  !WSP_CUBLAS_OK(cublasSetWorkspace(h.get(), blas_workspace.get(), WORKSPACE), physical))) {
            h = BlasHandle{};
        }
#    endif
        blas_owner = std::move(h);
    }
    return blas_owner.get();
}
#endif

bool is_cuda_backend(wsp_ggml_backend_t backend) {
    return backend != nullptr && wsp_ggml_guid_matches(backend->guid, &cuda_guid);
}

BackendCtx & backend_ctx(wsp_ggml_backend_t backend) {
    return *static_cast<BackendCtx *>(backend->context);
}

// the tensor side of Note [NCCL all-reduce]: each an F32 contiguous tensor of one shape, in the
// memory of its backend's GPU; the devices' side is nccl::all_reduce's
bool all_reduce(wsp_ggml_backend_t * backends, wsp_ggml_tensor ** tensors, int n) {
    if (backends == nullptr || tensors == nullptr || n < 1 || tensors[0] == nullptr) {
        return false;
    }
    for (int i = 0; i < n; ++i) {
        const wsp_ggml_tensor *         t   = tensors[i];
        const wsp_ggml_backend_buffer_t buf = t ? storage_buffer(t) : nullptr;
        if (!is_cuda_backend(backends[i]) || t == nullptr || t->type != WSP_GGML_TYPE_F32 ||
            !wsp_ggml_is_contiguous(t) || !wsp_ggml_are_same_shape(t, tensors[0]) || !is_cuda_buffer(buf) ||
            physical_of(buffer_device(buf)) != backend_ctx(backends[i]).physical) {
            return false;
        }
    }
    const int64_t count = wsp_ggml_nelements(tensors[0]);
    if (n == 1 || count == 0) {
        return true; // a sum of one tensor, or of empty ones: nothing to do
    }
    std::vector<int>          devices((size_t) n);
    std::vector<float *>      bufs((size_t) n);
    std::vector<cudaStream_t> streams((size_t) n);
    for (int i = 0; i < n; ++i) {
        BackendCtx & ctx    = backend_ctx(backends[i]);
        devices[(size_t) i] = ctx.physical;
        bufs[(size_t) i]    = static_cast<float *>(tensors[i]->data);
        streams[(size_t) i] = ctx.stream();
        if (streams[(size_t) i] == nullptr) {
            return false;
        }
    }
    return nccl::all_reduce(n, devices.data(), bufs.data(), (size_t) count, streams.data());
}

wsp_ggml_backend_t backend_init(int index) {
    if (index < 0 || (size_t) index >= devices().size()) {
        WSP_LOG_ERROR(WSP_GGML_CUDA_NAME ": device %d does not exist (%zu devices)\n", index, devices().size());
        return nullptr;
    }
    nccl::acquire();
    auto * ctx    = new BackendCtx{};
    ctx->index    = index;
    ctx->physical = physical_of(index);
    ctx->scratch  = std::make_unique<ScratchArena>(index, ctx->physical);
    ctx->graphs   = std::make_unique<GraphCache>(index, ctx->physical);
    return new wsp_ggml_backend{ &cuda_guid, backend_iface, device(index), ctx };
}

} // namespace wsp::cuda
