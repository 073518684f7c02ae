#pragma once

// The NCCL subset the CUDA backend calls (NCCL 2's names, numeric codes and signatures), for the
// host target: one process, a communicator per device from ncclCommInitAll, every operation a
// command on the caller's stream that meets its partners' commands there. Mismatched or
// unmatched calls are reported (ncclInvalidUsage, or a failed command after a timeout), never a
// hang: Note [host NCCL] in nccl.cpp.

#include <cstddef>

typedef struct CUstream_st * cudaStream_t; // as runtime.h: repeating a typedef is allowed

typedef struct ncclComm * ncclComm_t;

typedef enum {
    ncclSuccess            = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError        = 2,
    ncclInternalError      = 3,
    ncclInvalidArgument    = 4,
    ncclInvalidUsage       = 5,
    ncclRemoteError        = 6,
    ncclInProgress         = 7,
    ncclNumResults         = 8,
} ncclResult_t;

typedef enum {
    ncclInt8     = 0,
    ncclChar     = 0,
    ncclUint8    = 1,
    ncclInt32    = 2,
    ncclInt      = 2,
    ncclUint32   = 3,
    ncclInt64    = 4,
    ncclUint64   = 5,
    ncclFloat16  = 6,
    ncclHalf     = 6,
    ncclFloat32  = 7,
    ncclFloat    = 7,
    ncclFloat64  = 8,
    ncclDouble   = 8,
    ncclBfloat16 = 9,
    ncclNumTypes = 10, // the FP8 types of later NCCL versions are not here
} ncclDataType_t;

typedef enum {
    ncclSum    = 0,
    ncclProd   = 1,
    ncclMax    = 2,
    ncclMin    = 3,
    ncclAvg    = 4,
    ncclNumOps = 5,
} ncclRedOp_t;

// communicators: comm[i] is rank i, on devlist[i] (device i when devlist is null)
ncclResult_t ncclCommInitAll(ncclComm_t * comm, int ndev, const int * devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int * count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int * device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int * rank);

const char * ncclGetErrorString(ncclResult_t result);
// the last error logged for comm (or by the calling thread when comm is null)
const char * ncclGetLastError(ncclComm_t comm);

// calls between them are issued together at the outermost ncclGroupEnd
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

ncclResult_t ncclSend(const void * sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void * recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

ncclResult_t ncclAllGather(const void * sendbuff, void * recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void * sendbuff, void * recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void * sendbuff, void * recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void * sendbuff, void * recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
