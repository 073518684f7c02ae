#pragma once

// The CUDA runtime names the CUDA backend uses, for the host target: CUDA's types, numeric codes
// and signatures, implemented on host threads (Note [host target] in runtime.cpp). Only the
// subset this project calls is here; each call behaves as documented for CUDA 12, including the
// errors, and is stricter where CUDA leaves the outcome undefined (a copy against its kind).

#include "grid.h"

#include <cstddef>
#include <cstdint>

// CUDA's numeric values: code that logs or compares them sees what a GPU build sees
enum cudaError : int {
    cudaSuccess                          = 0,
    cudaErrorInvalidValue                = 1,
    cudaErrorMemoryAllocation            = 2,
    cudaErrorInitializationError         = 3,
    cudaErrorInvalidConfiguration        = 9,
    cudaErrorInvalidPitchValue           = 12,
    cudaErrorInvalidDevicePointer        = 17,
    cudaErrorInvalidMemcpyDirection      = 21,
    cudaErrorNoDevice                    = 100,
    cudaErrorInvalidDevice               = 101,
    cudaErrorPeerAccessUnsupported       = 217,
    cudaErrorInvalidResourceHandle       = 400,
    cudaErrorIllegalState                = 401,
    cudaErrorNotReady                    = 600,
    cudaErrorIllegalAddress              = 700,
    cudaErrorPeerAccessAlreadyEnabled    = 704,
    cudaErrorPeerAccessNotEnabled        = 705,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered     = 713,
    cudaErrorLaunchFailure               = 719,
    cudaErrorNotSupported                = 801,
    cudaErrorStreamCaptureUnsupported    = 900,
    cudaErrorStreamCaptureInvalidated    = 901,
    cudaErrorStreamCaptureMerge          = 902,
    cudaErrorStreamCaptureUnmatched      = 903,
    cudaErrorStreamCaptureUnjoined       = 904,
    cudaErrorStreamCaptureIsolation      = 905,
    cudaErrorStreamCaptureImplicit       = 906,
    cudaErrorCapturedEvent               = 907,
    cudaErrorStreamCaptureWrongThread    = 908,
    cudaErrorGraphExecUpdateFailure      = 910,
    cudaErrorUnknown                     = 999,
};
typedef enum cudaError cudaError_t;

// handles: pointers to the runtime's objects
typedef struct CUstream_st *        cudaStream_t;
typedef struct CUevent_st *         cudaEvent_t;
typedef struct CUgraph_st *         cudaGraph_t;
typedef struct CUgraphExec_st *     cudaGraphExec_t;
typedef struct CUgraphNode_st *     cudaGraphNode_t; // never made here: update results name no node
typedef struct CUmemPoolHandle_st * cudaMemPool_t;
typedef struct cudaArray *          cudaArray_t; // never created here; copies require it null
typedef void (*cudaHostFn_t)(void * user_data);

// the legacy default stream is also spelled 0; the per-thread one is per host thread and device
#define cudaStreamLegacy    ((cudaStream_t) 0x1)
#define cudaStreamPerThread ((cudaStream_t) 0x2)

#define cudaStreamDefault        0x00
#define cudaStreamNonBlocking    0x01
#define cudaEventDefault         0x00
#define cudaEventBlockingSync    0x01
#define cudaEventDisableTiming   0x02
#define cudaHostAllocDefault     0x00
#define cudaHostAllocPortable    0x01
#define cudaHostRegisterDefault  0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped   0x02

enum cudaMemcpyKind {
    cudaMemcpyHostToHost     = 0,
    cudaMemcpyHostToDevice   = 1,
    cudaMemcpyDeviceToHost   = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault        = 4, // inferred from the pointers (unified addressing)
};

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal      = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed     = 2,
};

enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone        = 0,
    cudaStreamCaptureStatusActive      = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaGraphExecUpdateResult {
    cudaGraphExecUpdateSuccess                        = 0,
    cudaGraphExecUpdateError                          = 1,
    cudaGraphExecUpdateErrorTopologyChanged           = 2,
    cudaGraphExecUpdateErrorNodeTypeChanged           = 3,
    cudaGraphExecUpdateErrorFunctionChanged           = 4,
    cudaGraphExecUpdateErrorParametersChanged         = 5,
    cudaGraphExecUpdateErrorNotSupported              = 6,
    cudaGraphExecUpdateErrorUnsupportedFunctionChange = 7,
    cudaGraphExecUpdateErrorAttributesChanged         = 8,
};

struct cudaGraphExecUpdateResultInfo {
    enum cudaGraphExecUpdateResult result;
    cudaGraphNode_t                errorNode;
    cudaGraphNode_t                errorFromNode;
};

enum cudaMemPoolAttr {
    cudaMemPoolAttrReleaseThreshold   = 0x4,
    cudaMemPoolAttrReservedMemCurrent = 0x5,
    cudaMemPoolAttrUsedMemCurrent     = 0x7,
};

enum cudaMemLocationType {
    cudaMemLocationTypeInvalid = 0,
    cudaMemLocationTypeDevice  = 1,
};

// the attributes cudaDeviceGetAttribute answers here (CUDA's values)
enum cudaDeviceAttr {
    cudaDevAttrMaxThreadsPerBlock     = 1,
    cudaDevAttrWarpSize               = 10,
    cudaDevAttrMultiProcessorCount    = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMemoryPoolsSupported   = 115,
};

enum cudaMemAccessFlags {
    cudaMemAccessFlagsProtNone      = 0,
    cudaMemAccessFlagsProtRead      = 1,
    cudaMemAccessFlagsProtReadWrite = 3,
};

struct cudaMemLocation {
    enum cudaMemLocationType type;
    int                      id;
};

struct cudaMemAccessDesc {
    struct cudaMemLocation  location;
    enum cudaMemAccessFlags flags;
};

struct cudaDeviceProp {
    char   name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    size_t totalConstMem;
    int    regsPerBlock;
    int    warpSize;
    int    maxThreadsPerBlock;
    int    maxThreadsDim[3];
    int    maxGridSize[3];
    int    maxThreadsPerMultiProcessor;
    int    major;
    int    minor;
    int    multiProcessorCount;
    int    l2CacheSize;
    int    concurrentKernels;
    int    asyncEngineCount;
    int    unifiedAddressing;
    int    canMapHostMemory;
    int    managedMemory;
    int    integrated;
    int    memoryPoolsSupported;
    int    pciDomainID;
    int    pciBusID;
    int    pciDeviceID;
};

struct cudaPos {
    size_t x, y, z; // x in bytes for linear memory
};

struct cudaExtent {
    size_t width, height, depth; // width in bytes for linear memory
};

struct cudaPitchedPtr {
    void * ptr;
    size_t pitch; // bytes between rows
    size_t xsize; // logical width in bytes
    size_t ysize; // logical height: rows per slice
};

struct cudaMemcpy3DPeerParms {
    cudaArray_t           srcArray;
    struct cudaPos        srcPos;
    struct cudaPitchedPtr srcPtr;
    int                   srcDevice;
    cudaArray_t           dstArray;
    struct cudaPos        dstPos;
    struct cudaPitchedPtr dstPtr;
    int                   dstDevice;
    struct cudaExtent     extent;
};

inline cudaPitchedPtr make_cudaPitchedPtr(void * d, size_t p, size_t xsz, size_t ysz) {
    return cudaPitchedPtr{ d, p, xsz, ysz };
}

inline cudaExtent make_cudaExtent(size_t w, size_t h, size_t d) {
    return cudaExtent{ w, h, d };
}

inline cudaPos make_cudaPos(size_t x, size_t y, size_t z) {
    return cudaPos{ x, y, z };
}

// errors
cudaError_t  cudaGetLastError(void); // returns and clears the calling thread's last error
cudaError_t  cudaPeekAtLastError(void);
const char * cudaGetErrorString(cudaError_t error);
const char * cudaGetErrorName(cudaError_t error);
cudaError_t  cudaDriverGetVersion(int * version);
cudaError_t  cudaRuntimeGetVersion(int * version);

// devices
cudaError_t cudaGetDeviceCount(int * count);
cudaError_t cudaGetDevice(int * device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp * prop, int device);
cudaError_t cudaDeviceGetAttribute(int * value, enum cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char * pci_bus_id, int len, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaDeviceCanAccessPeer(int * can_access, int device, int peer_device);
cudaError_t cudaDeviceEnablePeerAccess(int peer_device, unsigned int flags);
cudaError_t cudaDeviceDisablePeerAccess(int peer_device);

// memory
cudaError_t cudaMalloc(void ** ptr, size_t size);
cudaError_t cudaFree(void * ptr);
cudaError_t cudaMemGetInfo(size_t * free, size_t * total);
cudaError_t cudaMallocHost(void ** ptr, size_t size);
cudaError_t cudaFreeHost(void * ptr);
cudaError_t cudaHostRegister(void * ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void * ptr);

// stream-ordered pools
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t * pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void * value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void * value);
cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc * desc_list, size_t count);
cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags * flags, cudaMemPool_t pool,
                                 struct cudaMemLocation * location);
cudaError_t cudaMallocAsync(void ** ptr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync(void * ptr, cudaStream_t stream);

// copies and fills
cudaError_t cudaMemcpy(void * dst, const void * src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void * dst, const void * src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemcpy2DAsync(void * dst, size_t dpitch, const void * src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemcpyPeer(void * dst, int dst_device, const void * src, int src_device, size_t count);
cudaError_t cudaMemcpyPeerAsync(void * dst, int dst_device, const void * src, int src_device, size_t count,
                                cudaStream_t stream = 0);
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms * p, cudaStream_t stream = 0);
cudaError_t cudaMemset(void * ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void * ptr, int value, size_t count, cudaStream_t stream = 0);

// streams and events
cudaError_t cudaStreamCreate(cudaStream_t * stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t * stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void * user_data);
cudaError_t cudaEventCreate(cudaEvent_t * event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t * event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);

// capture and graphs
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t * graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus * status);
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode * mode);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t * exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo * result_info);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
