// The CUDA reg and its devices (one per GPU, or virtual devices on GPU 0), their properties and
// capabilities, events, and the public functions of ggml-cuda.h.

#include "ops.cuh"

#include "../split/split_buffer.h"

#include <cstring>
#include <string>
#include <vector>

namespace wsp::cuda {

namespace {

// quantized split weights are cut at multiples of this many rows (the tile height of the kernels)
constexpr int SPLIT_QUANT_ROWS = 64;

int index_of(wsp_ggml_backend_dev_t dev) {
    return (int) (intptr_t) dev->context;
}

const DeviceInfo & info_of(wsp_ggml_backend_dev_t dev) {
    return devices()[(size_t) index_of(dev)];
}

const char * dev_name(wsp_ggml_backend_dev_t dev) {
    return info_of(dev).name.c_str();
}

const char * dev_description(wsp_ggml_backend_dev_t dev) {
    return info_of(dev).description.c_str();
}

void dev_memory(wsp_ggml_backend_dev_t dev, size_t * free_mem, size_t * total) {
    const DeviceInfo & d = info_of(dev);
    DeviceGuard        guard(d.physical);
    if (!WSP_CUDA_OK(cudaMemGetInfo(free_mem, total), d.physical)) {
        *free_mem = 0;
        *total    = d.total_memory;
    }
}

enum wsp_ggml_backend_dev_type dev_type(wsp_ggml_backend_dev_t) {
    return WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_props(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_dev_props * props) {
    props->name        = dev_name(dev);
    props->description = dev_description(dev);
    props->type        = WSP_GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_memory(dev, &props->memory_free, &props->memory_total);
    props->caps = { /* async */ true, /* host_buffer */ true, /* buffer_from_host_ptr */ false, /* events */ true };
}

wsp_ggml_backend_t dev_init(wsp_ggml_backend_dev_t dev, const char *) {
    return backend_init(index_of(dev));
}

wsp_ggml_backend_buffer_type_t dev_buffer_type(wsp_ggml_backend_dev_t dev) {
    return buffer_type_of(index_of(dev));
}

wsp_ggml_backend_buffer_type_t dev_host_buffer_type(wsp_ggml_backend_dev_t) {
    return host_buffer_type();
}

bool reads_split_tensor(const wsp_ggml_tensor * op) {
    for (const wsp_ggml_tensor * s : op->src) {
        if (s != nullptr && wsp::split::is_split_buffer(storage_buffer(s))) {
            static bool logged = false;
            if (!logged) {
                logged = true;
                WSP_LOG_WARN(WSP_GGML_CUDA_NAME
                             ": %s reads the split tensor %s; only mul_mat uses split weights, and the scheduler "
                             "computes it per device\n",
                             wsp_ggml_op_desc(op), describe(s).c_str());
            }
            return true;
        }
    }
    return false;
}

// cuBLAS has BF16 GEMMs from compute capability 8.0 on (earlier devices refuse them at compute)
bool needs_bf16_gemm(const wsp_ggml_tensor * op) {
    return op->op == WSP_GGML_OP_MUL_MAT && op->src[0]->type == WSP_GGML_TYPE_BF16;
}

bool dev_supports_op(wsp_ggml_backend_dev_t dev, const wsp_ggml_tensor * op) {
    if (needs_bf16_gemm(op) && info_of(dev).cc_major < 8) {
        return false;
    }
    return !reads_split_tensor(op) && op_supported(op);
}

bool dev_supports_buft(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_buffer_type_t buft) {
    if (is_cuda_buffer_type(buft)) {
        return buft->device == dev;
    }
    // split weights are leafs whose users the scheduler keeps on the main device
    return wsp::split::is_split_buffer_type(buft) && wsp::split::main_device(buft) == dev;
}

// a batch this large pays for moving host weights to the GPU
bool dev_offload_op(wsp_ggml_backend_dev_t, const wsp_ggml_tensor * op) {
    return op->op == WSP_GGML_OP_MUL_MAT && op->ne[1] >= 32;
}

wsp_ggml_backend_event_t dev_event_new(wsp_ggml_backend_dev_t dev) {
    Event e = make_event(info_of(dev).physical);
    if (!e) {
        return nullptr;
    }
    return new wsp_ggml_backend_event{ dev, new Event(std::move(e)) };
}

void dev_event_free(wsp_ggml_backend_dev_t, wsp_ggml_backend_event_t e) {
    delete static_cast<Event *>(e->context);
    delete e;
}

void dev_event_sync(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_event_t e) {
    DeviceGuard guard(info_of(dev).physical);
    WSP_CUDA_WAIT(cudaEventSynchronize(static_cast<Event *>(e->context)->get()), index_of(dev));
}

const wsp_ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_name,
    /* .get_description      = */ dev_description,
    /* .get_memory           = */ dev_memory,
    /* .get_type             = */ dev_type,
    /* .get_props            = */ dev_props,
    /* .init_backend         = */ dev_init,
    /* .get_buffer_type      = */ dev_buffer_type,
    /* .get_host_buffer_type = */ dev_host_buffer_type,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ dev_event_new,
    /* .event_free           = */ dev_event_free,
    /* .event_synchronize    = */ dev_event_sync,
};

const char * reg_name(wsp_ggml_backend_reg_t) {
    return WSP_GGML_CUDA_NAME;
}

size_t reg_count(wsp_ggml_backend_reg_t) {
    return devices().size();
}

std::vector<wsp_ggml_backend_device> & device_objects() {
    static std::vector<wsp_ggml_backend_device> objs = [] {
        std::vector<wsp_ggml_backend_device> v;
        for (const DeviceInfo & d : devices()) {
            v.push_back({ device_iface, reg(), (void *) (intptr_t) d.index });
        }
        return v;
    }();
    return objs;
}

wsp_ggml_backend_dev_t reg_get(wsp_ggml_backend_reg_t, size_t i) {
    return i < device_objects().size() ? &device_objects()[i] : nullptr;
}

wsp_ggml_backend_buffer_type_t split_buffer_type(int main_device, const float * tensor_split) {
    return wsp::split::buffer_type(reg(), main_device, tensor_split, SPLIT_QUANT_ROWS);
}

wsp_ggml_backend_feature * features(wsp_ggml_backend_reg_t) {
#ifdef WSP_GGML_USE_NCCL
    static const char * nccl = "1";
#else
    static const char * nccl = "0";
#endif
    // the library float mat-muls run on: the vendor's BLAS, or our own GEMM where there is none
    static const char *                          blas  = WSP_GPU_HAS_BLAS ? WSP_GGML_CUBLAS_NAME : "own GEMM";
    static std::string                           archs = WSP_GGML_CUDA_ARCHS;
    static std::vector<wsp_ggml_backend_feature> f     = [] {
        std::vector<wsp_ggml_backend_feature> v = { { "ARCHS", archs.c_str() }, { "NCCL", nccl }, { "BLAS", blas } };
        if (!no_devices_reason().empty()) { // why the reg has no devices, for a reader of its features
            v.push_back({ "NO_DEVICES", no_devices_reason().c_str() });
        }
        v.push_back({ nullptr, nullptr });
        return v;
    }();
    return f.data();
}

// Note [counters]: what the device was asked to do
void read_counters(wsp_ggml_backend_dev_t dev, wsp_ggml_backend_counters * out) {
    *out = counters(index_of(dev)).read();
}

void * reg_proc(wsp_ggml_backend_reg_t, const char * name) {
    if (std::strcmp(name, "wsp_ggml_backend_split_buffer_type") == 0) {
        return reinterpret_cast<void *>(&split_buffer_type);
    }
    if (std::strcmp(name, "wsp_ggml_backend_register_host_buffer") == 0) {
        return reinterpret_cast<void *>(&wsp_ggml_backend_cuda_register_host_buffer);
    }
    if (std::strcmp(name, "wsp_ggml_backend_unregister_host_buffer") == 0) {
        return reinterpret_cast<void *>(&wsp_ggml_backend_cuda_unregister_host_buffer);
    }
    if (std::strcmp(name, "wsp_ggml_backend_get_features") == 0) {
        return reinterpret_cast<void *>(&features);
    }
    if (std::strcmp(name, COUNTERS_PROC) == 0) {
        GetCountersFn fn = &read_counters;
        return reinterpret_cast<void *>(fn);
    }
    if (std::strcmp(name, "wsp_ggml_backend_all_reduce") == 0) {
        wsp_ggml_backend_all_reduce_t fn = &all_reduce; // the signature the header promises
        return reinterpret_cast<void *>(fn);
    }
    return nullptr;
}

wsp_ggml_backend_reg cuda_reg = { WSP_GGML_BACKEND_API_VERSION, { reg_name, reg_count, reg_get, reg_proc }, nullptr };

} // namespace

wsp_ggml_backend_reg_t reg() {
    return &cuda_reg;
}

wsp_ggml_backend_dev_t device(int index) {
    return reg_get(&cuda_reg, (size_t) index);
}

} // namespace wsp::cuda

extern "C" {

wsp_ggml_backend_t wsp_ggml_backend_cuda_init(int device) {
    return wsp::cuda::backend_init(device);
}

bool wsp_ggml_backend_is_cuda(wsp_ggml_backend_t backend) {
    return wsp::cuda::is_cuda_backend(backend);
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cuda_buffer_type(int device) {
    return wsp::cuda::buffer_type_of(device);
}

wsp_ggml_backend_buffer_type_t wsp_ggml_backend_cuda_split_buffer_type(int main_device, const float * tensor_split) {
    if (wsp::cuda::devices().empty()) {
        WSP_LOG_ERROR("%s: no CUDA devices\n", __func__);
        return nullptr;
    }
    return wsp::cuda::split_buffer_type(main_device, tensor_split);
}

int wsp_ggml_backend_cuda_get_device_count(void) {
    return (int) wsp::cuda::devices().size();
}

void wsp_ggml_backend_cuda_get_device_description(int device, char * description, size_t description_size) {
    if (description == nullptr || description_size == 0) {
        return;
    }
    const auto & d = wsp::cuda::devices();
    std::snprintf(description, description_size, "%s",
                  device >= 0 && (size_t) device < d.size() ? d[(size_t) device].description.c_str() : "");
}

void wsp_ggml_backend_cuda_get_device_memory(int device, size_t * free_mem, size_t * total) {
    *free_mem = 0;
    *total    = 0;
    if (wsp_ggml_backend_dev_t dev = wsp::cuda::device(device)) {
        wsp_ggml_backend_dev_memory(dev, free_mem, total);
    }
}

wsp_ggml_backend_reg_t wsp_ggml_backend_cuda_reg(void) {
    return wsp::cuda::reg();
}

} // extern "C"
