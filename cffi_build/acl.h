/* The ACL C ABI subset that aioge binds, with CANN's exact names, signatures
 * and values (see docs/acl-spec.md; ACL 1.10 and 1.17 agree on all
 * of it).  This one file is both:
 *   - the cdef cffi parses (so: no #include, no #if, plain #define integers),
 *   - the public header the embedded host runtime implements (hostrt/hrt.h
 *     includes it after <stdint.h>/<stddef.h>).
 * The same declarations are dlopen()ed in ABI mode against libascendcl.so.
 * aioge-only entry points live in aioge_host.h, never in this file. */

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtContext;
typedef void *aclrtEvent;
typedef uint16_t aclFloat16;

typedef struct aclDataBuffer aclDataBuffer;
typedef struct aclTensorDesc aclTensorDesc;
typedef struct aclopAttr aclopAttr;

typedef void (*aclrtCallback)(void *userData);

/* ---- error codes (acl_base_rt.h, rt_error_codes.h) ---- */
#define ACL_SUCCESS 0
#define ACL_ERROR_NONE 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_INVALID_FILE 100003
#define ACL_ERROR_WRITE_FILE 100004
#define ACL_ERROR_INVALID_FILE_SIZE 100005
#define ACL_ERROR_PARSE_FILE 100006
#define ACL_ERROR_FILE_MISSING_ATTR 100007
#define ACL_ERROR_FILE_ATTR_INVALID 100008
#define ACL_ERROR_INVALID_DUMP_CONFIG 100009
#define ACL_ERROR_INVALID_PROFILING_CONFIG 100010
#define ACL_ERROR_INVALID_MODEL_ID 100011
#define ACL_ERROR_DESERIALIZE_MODEL 100012
#define ACL_ERROR_PARSE_MODEL 100013
#define ACL_ERROR_READ_MODEL_FAILURE 100014
#define ACL_ERROR_MODEL_SIZE_INVALID 100015
#define ACL_ERROR_MODEL_MISSING_ATTR 100016
#define ACL_ERROR_MODEL_INPUT_NOT_MATCH 100017
#define ACL_ERROR_MODEL_OUTPUT_NOT_MATCH 100018
#define ACL_ERROR_MODEL_NOT_DYNAMIC 100019
#define ACL_ERROR_OP_TYPE_NOT_MATCH 100020
#define ACL_ERROR_OP_INPUT_NOT_MATCH 100021
#define ACL_ERROR_OP_OUTPUT_NOT_MATCH 100022
#define ACL_ERROR_OP_ATTR_NOT_MATCH 100023
#define ACL_ERROR_OP_NOT_FOUND 100024
#define ACL_ERROR_OP_LOAD_FAILED 100025
#define ACL_ERROR_UNSUPPORTED_DATA_TYPE 100026
#define ACL_ERROR_FORMAT_NOT_MATCH 100027
#define ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED 100028
#define ACL_ERROR_KERNEL_NOT_FOUND 100029
#define ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED 100030
#define ACL_ERROR_KERNEL_ALREADY_REGISTERED 100031
#define ACL_ERROR_INVALID_QUEUE_ID 100032
#define ACL_ERROR_REPEAT_SUBSCRIBE 100033
#define ACL_ERROR_STREAM_NOT_SUBSCRIBE 100034
#define ACL_ERROR_THREAD_NOT_SUBSCRIBE 100035
#define ACL_ERROR_WAIT_CALLBACK_TIMEOUT 100036
#define ACL_ERROR_REPEAT_FINALIZE 100037
#define ACL_ERROR_OP_UNSUPPORTED_DYNAMIC 148050
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_API_NOT_SUPPORT 200001
#define ACL_ERROR_INVALID_DEVICE 200002
#define ACL_ERROR_MEMORY_ADDRESS_UNALIGNED 200003
#define ACL_ERROR_RESOURCE_NOT_MATCH 200004
#define ACL_ERROR_INVALID_RESOURCE_HANDLE 200005
#define ACL_ERROR_FEATURE_UNSUPPORTED 200006
#define ACL_ERROR_PROF_MODULES_UNSUPPORTED 200007
#define ACL_ERROR_STORAGE_OVER_LIMIT 300000
#define ACL_ERROR_INTERNAL_ERROR 500000
#define ACL_ERROR_FAILURE 500001
#define ACL_ERROR_GE_FAILURE 500002
#define ACL_ERROR_RT_FAILURE 500003
#define ACL_ERROR_DRV_FAILURE 500004
#define ACL_ERROR_PROFILING_FAILURE 500005

#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_STREAM_CONTEXT 107003
#define ACL_ERROR_RT_MODEL_CONTEXT 107004
#define ACL_ERROR_RT_STREAM_MODEL 107005
#define ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID 107006
#define ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL 107007
#define ACL_ERROR_RT_ADDR_UNALIGNED 107008
#define ACL_ERROR_RT_FILE_OPEN 107009
#define ACL_ERROR_RT_FILE_WRITE 107010
#define ACL_ERROR_RT_STREAM_SUBSCRIBE 107011
#define ACL_ERROR_RT_THREAD_SUBSCRIBE 107012
#define ACL_ERROR_RT_GROUP_NOT_SET 107013
#define ACL_ERROR_RT_GROUP_NOT_CREATE 107014
#define ACL_ERROR_RT_STREAM_NO_CB_REG 107015
#define ACL_ERROR_RT_INVALID_MEMORY_TYPE 107016
#define ACL_ERROR_RT_INVALID_HANDLE 107017
#define ACL_ERROR_RT_INVALID_MALLOC_TYPE 107018
#define ACL_ERROR_RT_WAIT_TIMEOUT 107019
#define ACL_ERROR_RT_TASK_TIMEOUT 107020
#define ACL_ERROR_RT_SYSPARAMOPT_NOT_SET 107021
#define ACL_ERROR_RT_DEVICE_TASK_ABORT 107022
#define ACL_ERROR_RT_STREAM_ABORT 107023
#define ACL_ERROR_RT_CAPTURE_DEPENDENCY 107024
#define ACL_ERROR_RT_STREAM_UNJOINED 107025
#define ACL_ERROR_RT_MODEL_CAPTURED 107026
#define ACL_ERROR_RT_STREAM_CAPTURED 107027
#define ACL_ERROR_RT_EVENT_CAPTURED 107028
#define ACL_ERROR_RT_STREAM_NOT_CAPTURED 107029
#define ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT 107030
#define ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT 107031
#define ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED 107036
#define ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD 107038
#define ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC 107041
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001
#define ACL_ERROR_RT_MEMORY_FREE 207002
#define ACL_ERROR_RT_AICORE_OVER_FLOW 207003
#define ACL_ERROR_RT_NO_DEVICE 207004
#define ACL_ERROR_RT_RESOURCE_ALLOC_FAIL 207005
#define ACL_ERROR_RT_NO_PERMISSION 207006
#define ACL_ERROR_RT_NO_EVENT_RESOURCE 207007
#define ACL_ERROR_RT_NO_STREAM_RESOURCE 207008
#define ACL_ERROR_RT_NO_NOTIFY_RESOURCE 207009
#define ACL_ERROR_RT_NO_MODEL_RESOURCE 207010
#define ACL_ERROR_RT_NO_CDQ_RESOURCE 207011
#define ACL_ERROR_RT_OVER_LIMIT 207012
#define ACL_ERROR_RT_QUEUE_EMPTY 207013
#define ACL_ERROR_RT_QUEUE_FULL 207014
#define ACL_ERROR_RT_REPEATED_INIT 207015
#define ACL_ERROR_RT_AIVEC_OVER_FLOW 207016
#define ACL_ERROR_RT_OVER_FLOW 207017
#define ACL_ERROR_RT_DEVICE_OOM 207018
#define ACL_ERROR_RT_INTERNAL_ERROR 507000
#define ACL_ERROR_RT_TS_ERROR 507001
#define ACL_ERROR_RT_STREAM_TASK_FULL 507002
#define ACL_ERROR_RT_STREAM_TASK_EMPTY 507003
#define ACL_ERROR_RT_STREAM_NOT_COMPLETE 507004
#define ACL_ERROR_RT_END_OF_SEQUENCE 507005
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE 507006
#define ACL_ERROR_RT_CONTEXT_RELEASE_ERROR 507007
#define ACL_ERROR_RT_SOC_VERSION 507008
#define ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT 507009
#define ACL_ERROR_RT_LOST_HEARTBEAT 507010
#define ACL_ERROR_RT_MODEL_EXECUTE 507011
#define ACL_ERROR_RT_REPORT_TIMEOUT 507012
#define ACL_ERROR_RT_SYS_DMA 507013
#define ACL_ERROR_RT_AICORE_TIMEOUT 507014
#define ACL_ERROR_RT_AICORE_EXCEPTION 507015
#define ACL_ERROR_RT_AICORE_TRAP_EXCEPTION 507016
#define ACL_ERROR_RT_AICPU_TIMEOUT 507017
#define ACL_ERROR_RT_AICPU_EXCEPTION 507018
#define ACL_ERROR_RT_AICPU_DATADUMP_RSP_ERR 507019
#define ACL_ERROR_RT_AICPU_MODEL_RSP_ERR 507020
#define ACL_ERROR_RT_PROFILING_ERROR 507021
#define ACL_ERROR_RT_IPC_ERROR 507022
#define ACL_ERROR_RT_MODEL_ABORT_NORMAL 507023
#define ACL_ERROR_RT_KERNEL_UNREGISTERING 507024
#define ACL_ERROR_RT_RINGBUFFER_NOT_INIT 507025
#define ACL_ERROR_RT_RINGBUFFER_NO_DATA 507026
#define ACL_ERROR_RT_KERNEL_LOOKUP 507027
#define ACL_ERROR_RT_KERNEL_DUPLICATE 507028
#define ACL_ERROR_RT_DEBUG_REGISTER_FAIL 507029
#define ACL_ERROR_RT_DEBUG_UNREGISTER_FAIL 507030
#define ACL_ERROR_RT_LABEL_CONTEXT 507031
#define ACL_ERROR_RT_PROGRAM_USE_OUT 507032
#define ACL_ERROR_RT_DEV_SETUP_ERROR 507033
#define ACL_ERROR_RT_VECTOR_CORE_TIMEOUT 507034
#define ACL_ERROR_RT_VECTOR_CORE_EXCEPTION 507035
#define ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION 507036
#define ACL_ERROR_RT_CDQ_BATCH_ABNORMAL 507037
#define ACL_ERROR_RT_DIE_MODE_CHANGE_ERROR 507038
#define ACL_ERROR_RT_DIE_SET_ERROR 507039
#define ACL_ERROR_RT_INVALID_DIEID 507040
#define ACL_ERROR_RT_DIE_MODE_NOT_SET 507041
#define ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW 507042
#define ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW 507043
#define ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW 507044
#define ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW 507045
#define ACL_ERROR_RT_STREAM_SYNC_TIMEOUT 507046
#define ACL_ERROR_RT_EVENT_SYNC_TIMEOUT 507047
#define ACL_ERROR_RT_FFTS_PLUS_TIMEOUT 507048
#define ACL_ERROR_RT_FFTS_PLUS_EXCEPTION 507049
#define ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION 507050
#define ACL_ERROR_RT_SEND_MSG 507051
#define ACL_ERROR_RT_COPY_DATA 507052
#define ACL_ERROR_RT_DEVICE_MEM_ERROR 507053
#define ACL_ERROR_RT_DRV_INTERNAL_ERROR 507899
#define ACL_ERROR_RT_AICPU_INTERNAL_ERROR 507900
#define ACL_ERROR_RT_SOCKET_CLOSE 507901
#define ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR 507902
#define ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED 507903

/* ---- constants and flags ---- */
#define ACL_MAX_DIM_CNT 128
#define ACL_MAX_TENSOR_NAME_LEN 128
#define ACL_EVENT_SYNC 0x1
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x2
#define ACL_EVENT_TIME_LINE 0x8
#define ACL_STREAM_FAST_LAUNCH 0x1
#define ACL_STREAM_FAST_SYNC 0x2
#define ACL_CONTINUE_ON_FAILURE 0
#define ACL_STOP_ON_FAILURE 1

/* ---- enums ---- */
typedef enum {
    ACL_DT_UNDEFINED = -1,
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT32 = 3,
    ACL_UINT8 = 4,
    ACL_INT16 = 6,
    ACL_UINT16 = 7,
    ACL_UINT32 = 8,
    ACL_INT64 = 9,
    ACL_UINT64 = 10,
    ACL_DOUBLE = 11,
    ACL_BOOL = 12,
    ACL_STRING = 13,
    ACL_COMPLEX64 = 16,
    ACL_COMPLEX128 = 17,
    ACL_BF16 = 27,
    ACL_INT4 = 29,
    ACL_UINT1 = 30,
    ACL_COMPLEX32 = 33
} aclDataType;

typedef enum {
    ACL_FORMAT_UNDEFINED = -1,
    ACL_FORMAT_NCHW = 0,
    ACL_FORMAT_NHWC = 1,
    ACL_FORMAT_ND = 2,
    ACL_FORMAT_NC1HWC0 = 3,
    ACL_FORMAT_FRACTAL_Z = 4,
    ACL_FORMAT_NC1HWC0_C04 = 12,
    ACL_FORMAT_HWCN = 16,
    ACL_FORMAT_NDHWC = 27,
    ACL_FORMAT_FRACTAL_NZ = 29,
    ACL_FORMAT_NCDHW = 30,
    ACL_FORMAT_NDC1HWC0 = 32,
    ACL_FRACTAL_Z_3D = 33,
    ACL_FORMAT_NC = 35,
    ACL_FORMAT_NCL = 47
} aclFormat;

typedef enum {
    ACL_MEMTYPE_DEVICE = 0,
    ACL_MEMTYPE_HOST = 1,
    ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT = 2
} aclMemType;

typedef enum aclrtRunMode {
    ACL_DEVICE = 0,
    ACL_HOST = 1
} aclrtRunMode;

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST = 0,
    ACL_MEMCPY_HOST_TO_DEVICE = 1,
    ACL_MEMCPY_DEVICE_TO_HOST = 2,
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3,
    ACL_MEMCPY_DEFAULT = 4
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST = 0,
    ACL_MEM_MALLOC_HUGE_ONLY = 1,
    ACL_MEM_MALLOC_NORMAL_ONLY = 2,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000
} aclrtMemMallocPolicy;

typedef enum aclrtMemAttr {
    ACL_DDR_MEM = 0,
    ACL_HBM_MEM = 1,
    ACL_DDR_MEM_HUGE = 2,
    ACL_DDR_MEM_NORMAL = 3,
    ACL_HBM_MEM_HUGE = 4,
    ACL_HBM_MEM_NORMAL = 5,
    ACL_DDR_MEM_P2P_HUGE = 6,
    ACL_DDR_MEM_P2P_NORMAL = 7,
    ACL_HBM_MEM_P2P_HUGE = 8,
    ACL_HBM_MEM_P2P_NORMAL = 9
} aclrtMemAttr;

typedef enum aclrtCallbackBlockType {
    ACL_CALLBACK_NO_BLOCK = 0,
    ACL_CALLBACK_BLOCK = 1
} aclrtCallbackBlockType;

typedef enum aclrtEventStatus {
    ACL_EVENT_STATUS_COMPLETE = 0,
    ACL_EVENT_STATUS_NOT_READY = 1,
    ACL_EVENT_STATUS_RESERVED = 2
} aclrtEventStatus;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

typedef enum aclEngineType {
    ACL_ENGINE_SYS = 0,
    ACL_ENGINE_AICORE = 1,
    ACL_ENGINE_VECTOR = 2
} aclopEngineType;

typedef enum aclCompileType {
    ACL_COMPILE_SYS = 0,
    ACL_COMPILE_UNREGISTERED = 1
} aclopCompileType;

typedef enum aclCompileFlag {
    ACL_OP_COMPILE_DEFAULT = 0,
    ACL_OP_COMPILE_FUZZ = 1
} aclOpCompileFlag;

typedef enum {
    ACL_PRECISION_MODE = 0,
    ACL_AICORE_NUM = 1,
    ACL_AUTO_TUNE_MODE = 2,
    ACL_OP_SELECT_IMPL_MODE = 3,
    ACL_OPTYPELIST_FOR_IMPLMODE = 4,
    ACL_OP_DEBUG_LEVEL = 5,
    ACL_DEBUG_DIR = 6,
    ACL_OP_COMPILER_CACHE_MODE = 7,
    ACL_OP_COMPILER_CACHE_DIR = 8,
    ACL_OP_PERFORMANCE_MODE = 9,
    ACL_OP_JIT_COMPILE = 10,
    ACL_OP_DETERMINISTIC = 11,
    ACL_CUSTOMIZE_DTYPES = 12,
    ACL_OP_PRECISION_MODE = 13,
    ACL_ALLOW_HF32 = 14,
    ACL_PRECISION_MODE_V2 = 15,
    ACL_OP_DEBUG_OPTION = 16
} aclCompileOpt;

/* ---- init, device, context ---- */
aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion);
const char *aclGetRecentErrMsg(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtGetDeviceCount(uint32_t *count);
aclError aclrtGetRunMode(aclrtRunMode *runMode);
aclError aclrtSynchronizeDevice(void);
const char *aclrtGetSocName(void);
aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);
aclError aclrtDestroyContext(aclrtContext context);
aclError aclrtSetCurrentContext(aclrtContext context);
aclError aclrtGetCurrentContext(aclrtContext *context);

/* ---- streams ---- */
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);

/* ---- events ---- */
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status);
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);
aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);
/* When the event's latest record completed, in us since the device started
 * (CANN 8; the host runtime: CLOCK_MONOTONIC, the clock of time.monotonic_ns). */
aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp);

/* ---- memory ---- */
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMallocHost(void **hostPtr, size_t size);
aclError aclrtFreeHost(void *hostPtr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream);
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);
aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);

/* ---- host callbacks ---- */
aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType,
                             aclrtStream stream);
aclError aclrtProcessReport(int32_t timeout);
aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);

/* ---- data buffers and tensor descriptors ---- */
aclDataBuffer *aclCreateDataBuffer(void *data, size_t size);
aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer);
aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size);
void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer);
size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer);
size_t aclDataTypeSize(aclDataType dataType);

aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t *dims, aclFormat format);
void aclDestroyTensorDesc(const aclTensorDesc *desc);
aclDataType aclGetTensorDescType(const aclTensorDesc *desc);
aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc);
size_t aclGetTensorDescSize(const aclTensorDesc *desc);
size_t aclGetTensorDescElementCount(const aclTensorDesc *desc);
size_t aclGetTensorDescNumDims(const aclTensorDesc *desc);
int64_t aclGetTensorDescDim(const aclTensorDesc *desc, size_t index);
aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t *dimSize);
void aclSetTensorDescName(aclTensorDesc *desc, const char *name);
const char *aclGetTensorDescName(aclTensorDesc *desc);
aclError aclSetTensorConst(aclTensorDesc *desc, void *dataBuffer, size_t length);
aclError aclSetTensorPlaceMent(aclTensorDesc *desc, aclMemType memType);

/* ---- single-op attrs, compile and execute ---- */
aclopAttr *aclopCreateAttr(void);
void aclopDestroyAttr(const aclopAttr *attr);
aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName, uint8_t attrValue);
aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName, int64_t attrValue);
aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName, float attrValue);
aclError aclopSetAttrString(aclopAttr *attr, const char *attrName, const char *attrValue);
aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName, aclDataType attrValue);
aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName, int numValues, const uint8_t *values);
aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName, int numValues, const int64_t *values);
aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName, int numValues, const float *values);
aclError aclopSetAttrListString(aclopAttr *attr, const char *attrName, int numValues, const char **values);

aclError aclopCompileAndExecute(const char *opType,
                                int numInputs, const aclTensorDesc *const inputDesc[],
                                const aclDataBuffer *const inputs[],
                                int numOutputs, const aclTensorDesc *const outputDesc[],
                                aclDataBuffer *const outputs[],
                                const aclopAttr *attr, aclopEngineType engineType,
                                aclopCompileType compileFlag, const char *opPath, aclrtStream stream);
aclError aclSetCompileopt(aclCompileOpt opt, const char *value);
size_t aclGetCompileoptSize(aclCompileOpt opt);
aclError aclGetCompileopt(aclCompileOpt opt, char *value, size_t length);
aclError aclopSetCompileFlag(aclOpCompileFlag flag);
aclError aclopSetMaxOpQueueNum(uint64_t maxOpNum);

/* ---- stream capture (acl_rt.h): a stream's launches recorded once, replayed as one task ---- */
typedef void *aclmdlRI;

typedef enum aclmdlRICaptureMode {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2
} aclmdlRICaptureMode;

typedef enum aclmdlRICaptureStatus {
    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE = 1,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED = 2
} aclmdlRICaptureStatus;

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI);
aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI);
aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream);
aclError aclmdlRIDestroy(aclmdlRI modelRI);
