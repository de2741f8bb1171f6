/* aclDataBuffer, aclTensorDesc and aclopAttr: host-side descriptor objects.
 * They need no aclInit; aclopCompileAndExecute copies what it needs from
 * them, so callers may destroy them as soon as the call returns. */
#include "hrt_op.h"
#include "hrt_mem.h"

#include <stdio.h>
#include <stdlib.h>

size_t hrt_dtype_size(aclDataType dt) {
    switch (dt) {
    case ACL_BOOL: case ACL_INT8: case ACL_UINT8: return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: case ACL_COMPLEX32: return 4;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64: return 8;
    case ACL_COMPLEX128: return 16;
    case ACL_INT4: case ACL_UINT1: return 1;
    default: return 0;
    }
}

/* aclDataTypeSize follows ACL's table, including 8 for unknown values. */
size_t aclDataTypeSize(aclDataType dt) {
    if (dt == ACL_STRING || dt == ACL_DT_UNDEFINED) return 0;
    size_t n = hrt_dtype_size(dt);
    return n ? n : 8;
}

const char *hrt_dtype_name(aclDataType dt) {
    switch (dt) {
    case ACL_DT_UNDEFINED: return "UNDEFINED";
    case ACL_FLOAT: return "float32";
    case ACL_FLOAT16: return "float16";
    case ACL_INT8: return "int8";
    case ACL_INT32: return "int32";
    case ACL_UINT8: return "uint8";
    case ACL_INT16: return "int16";
    case ACL_UINT16: return "uint16";
    case ACL_UINT32: return "uint32";
    case ACL_INT64: return "int64";
    case ACL_UINT64: return "uint64";
    case ACL_DOUBLE: return "float64";
    case ACL_BOOL: return "bool";
    case ACL_STRING: return "string";
    case ACL_COMPLEX64: return "complex64";
    case ACL_COMPLEX128: return "complex128";
    case ACL_BF16: return "bfloat16";
    case ACL_INT4: return "int4";
    case ACL_UINT1: return "uint1";
    case ACL_COMPLEX32: return "complex32";
    }
    return "unknown";
}

const char *hrt_format_name(aclFormat f) {
    switch (f) {
    case ACL_FORMAT_UNDEFINED: return "UNDEFINED";
    case ACL_FORMAT_NCHW: return "NCHW";
    case ACL_FORMAT_NHWC: return "NHWC";
    case ACL_FORMAT_ND: return "ND";
    case ACL_FORMAT_NC1HWC0: return "NC1HWC0";
    case ACL_FORMAT_FRACTAL_Z: return "FRACTAL_Z";
    case ACL_FORMAT_NC1HWC0_C04: return "NC1HWC0_C04";
    case ACL_FORMAT_HWCN: return "HWCN";
    case ACL_FORMAT_NDHWC: return "NDHWC";
    case ACL_FORMAT_FRACTAL_NZ: return "FRACTAL_NZ";
    case ACL_FORMAT_NCDHW: return "NCDHW";
    case ACL_FORMAT_NDC1HWC0: return "NDC1HWC0";
    case ACL_FRACTAL_Z_3D: return "FRACTAL_Z_3D";
    case ACL_FORMAT_NC: return "NC";
    case ACL_FORMAT_NCL: return "NCL";
    }
    return "unknown";
}

static bool dtype_known(aclDataType dt) { return dt == ACL_DT_UNDEFINED || dt == ACL_STRING || hrt_dtype_size(dt) != 0; }
static bool format_known(aclFormat f) { return strcmp(hrt_format_name(f), "unknown") != 0; }

/* --------------------------------------------------------- data buffers */
aclDataBuffer *aclCreateDataBuffer(void *data, size_t size) {
    if (!data && size) {
        hrt_error(ACL_ERROR_INVALID_PARAM, "aclCreateDataBuffer", "data is NULL but size is %zu", size);
        return NULL;
    }
    aclDataBuffer *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->data = data;
    b->size = size;
    hrt_handle_add(b, HRT_H_BUFFER);
    return b;
}

aclError aclDestroyDataBuffer(const aclDataBuffer *b) {
    if (!b) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclDestroyDataBuffer", "dataBuffer is NULL");
    if (!hrt_handle_remove(b, HRT_H_BUFFER))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclDestroyDataBuffer", "%p is not a live data buffer", (const void *)b);
    free((void *)b);
    return ACL_SUCCESS;
}

aclError aclUpdateDataBuffer(aclDataBuffer *b, void *data, size_t size) {
    if (!b) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclUpdateDataBuffer", "dataBuffer is NULL");
    if (!data && size) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclUpdateDataBuffer", "data is NULL but size is %zu", size);
    if (!hrt_handle_valid(b, HRT_H_BUFFER))
        return hrt_error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "aclUpdateDataBuffer", "%p is not a live data buffer", (void *)b);
    b->data = data;
    b->size = size;
    return ACL_SUCCESS;
}

void *aclGetDataBufferAddr(const aclDataBuffer *b) {
    return b && hrt_handle_valid(b, HRT_H_BUFFER) ? b->data : NULL;
}

size_t aclGetDataBufferSizeV2(const aclDataBuffer *b) {
    return b && hrt_handle_valid(b, HRT_H_BUFFER) ? b->size : 0;
}

/* ------------------------------------------------------- tensor descs */
bool hrt_desc_args_ok(aclDataType dataType, int numDims, const int64_t *dims, aclFormat format) {
    const char *api = "aclCreateTensorDesc";
    if (numDims < 0 || numDims > ACL_MAX_DIM_CNT) {
        hrt_error(ACL_ERROR_INVALID_PARAM, api, "numDims %d is not in [0, %d]", numDims, ACL_MAX_DIM_CNT);
        return false;
    }
    if (numDims > 0 && !dims) {
        hrt_error(ACL_ERROR_INVALID_PARAM, api, "dims is NULL with numDims %d", numDims);
        return false;
    }
    if (!dtype_known(dataType)) {
        hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown data type %d", (int)dataType);
        return false;
    }
    if (!format_known(format)) {
        hrt_error(ACL_ERROR_INVALID_PARAM, api, "unknown format %d", (int)format);
        return false;
    }
    for (int i = 0; i < numDims; i++) {
        if (dims[i] < -2) {
            hrt_error(ACL_ERROR_INVALID_PARAM, api, "dims[%d] = %lld is invalid", i, (long long)dims[i]);
            return false;
        }
    }
    return true;
}

aclError hrt_desc_const_ok(const void *dataBuffer, size_t length) {
    const char *api = "aclSetTensorConst";
    if (!dataBuffer) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "desc or dataBuffer is NULL");
    if (length == 0) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "length must be > 0");
    if (hrt_is_device_ptr(dataBuffer))
        return hrt_error(ACL_ERROR_INVALID_PARAM, api, "const data must be host memory, %p is device memory", dataBuffer);
    return ACL_SUCCESS;
}

aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t *dims, aclFormat format) {
    if (!hrt_desc_args_ok(dataType, numDims, dims, format)) return NULL;
    aclTensorDesc *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    if (numDims) {
        d->dims = malloc(sizeof(int64_t) * (size_t)numDims);
        if (!d->dims) {
            free(d);
            return NULL;
        }
        memcpy(d->dims, dims, sizeof(int64_t) * (size_t)numDims);
    }
    d->dtype = dataType;
    d->format = format;
    d->ndims = numDims;
    d->memtype = ACL_MEMTYPE_DEVICE;
    hrt_handle_add(d, HRT_H_DESC);
    return d;
}

void aclDestroyTensorDesc(const aclTensorDesc *desc) {
    if (!desc || !hrt_handle_remove(desc, HRT_H_DESC)) return;
    aclTensorDesc *d = (aclTensorDesc *)desc;
    free(d->dims);
    free(d->name);
    free(d->const_data);
    free(d);
}

static const aclTensorDesc *live_desc(const aclTensorDesc *d) { return d && hrt_handle_valid(d, HRT_H_DESC) ? d : NULL; }

aclDataType aclGetTensorDescType(const aclTensorDesc *desc) {
    desc = live_desc(desc);
    return desc ? desc->dtype : ACL_DT_UNDEFINED;
}

aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc) {
    desc = live_desc(desc);
    return desc ? desc->format : ACL_FORMAT_UNDEFINED;
}

static size_t element_count(const aclTensorDesc *d) {
    size_t n = 1;
    for (int i = 0; i < d->ndims; i++) {
        if (d->dims[i] < 0) return 0;
        if (d->dims[i] && n > SIZE_MAX / (size_t)d->dims[i]) return 0;
        n *= (size_t)d->dims[i];
    }
    return n;
}

size_t aclGetTensorDescElementCount(const aclTensorDesc *desc) {
    desc = live_desc(desc);
    return desc ? element_count(desc) : 0;
}

size_t aclGetTensorDescSize(const aclTensorDesc *desc) {
    desc = live_desc(desc);
    if (!desc) return 0;
    size_t n = element_count(desc), es = aclDataTypeSize(desc->dtype);
    if (es && n > SIZE_MAX / es) return 0;
    return n * es;
}

size_t aclGetTensorDescNumDims(const aclTensorDesc *desc) {
    desc = live_desc(desc);
    if (!desc) return 0;
    if (desc->ndims > 0 && desc->dims[0] == -2) return (size_t)0xFFFFFFFFFFFFFFFEull;
    return (size_t)desc->ndims;
}

int64_t aclGetTensorDescDim(const aclTensorDesc *desc, size_t index) {
    desc = live_desc(desc);
    if (!desc || index >= (size_t)desc->ndims) return -1;
    return desc->dims[index];
}

aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t *dimSize) {
    if (!desc || !dimSize) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclGetTensorDescDimV2", "desc or dimSize is NULL");
    if (!live_desc(desc)) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclGetTensorDescDimV2", "desc is not live");
    if (index >= (size_t)desc->ndims)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclGetTensorDescDimV2", "index %zu >= numDims %d", index, desc->ndims);
    *dimSize = desc->dims[index];
    return ACL_SUCCESS;
}

void aclSetTensorDescName(aclTensorDesc *desc, const char *name) {
    if (!live_desc(desc)) return;
    free(desc->name);
    desc->name = name ? strdup(name) : NULL;
}

const char *aclGetTensorDescName(aclTensorDesc *desc) { return live_desc(desc) && desc->name ? desc->name : ""; }

aclError aclSetTensorConst(aclTensorDesc *desc, void *dataBuffer, size_t length) {
    const char *api = "aclSetTensorConst";
    if (!desc || !dataBuffer) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "desc or dataBuffer is NULL");
    if (!live_desc(desc)) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "desc is not live");
    aclError rc = hrt_desc_const_ok(dataBuffer, length);
    if (rc) return rc;
    void *copy = malloc(length);
    if (!copy) return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    memcpy(copy, dataBuffer, length);
    free(desc->const_data);
    desc->const_data = copy;
    desc->const_len = length;
    return ACL_SUCCESS;
}

aclError aclSetTensorPlaceMent(aclTensorDesc *desc, aclMemType memType) {
    if (!desc) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclSetTensorPlaceMent", "desc is NULL");
    if (!live_desc(desc)) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclSetTensorPlaceMent", "desc is not live");
    if ((unsigned)memType > ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT)
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclSetTensorPlaceMent", "unknown memType %d", (int)memType);
    desc->memtype = memType;
    return ACL_SUCCESS;
}

/* ----------------------------------------------------------------- attrs */
aclopAttr *aclopCreateAttr(void) {
    aclopAttr *a = calloc(1, sizeof *a);
    if (a) hrt_handle_add(a, HRT_H_ATTR);
    return a;
}

static void value_free(hrt_attr_value *v) {
    free(v->name);
    if (v->type == HRT_ATTR_STRING) free(v->v.s);
    else if (v->type == HRT_ATTR_LIST_INT || v->type == HRT_ATTR_LIST_BOOL) free(v->v.li);
    else if (v->type == HRT_ATTR_LIST_FLOAT) free(v->v.lf);
    else if (v->type == HRT_ATTR_LIST_STRING) {
        for (int i = 0; i < v->n; i++) free(v->v.ls[i]);
        free(v->v.ls);
    }
}

void hrt_attr_free(aclopAttr *a) {
    for (int i = 0; i < a->n; i++) value_free(&a->items[i]);
    free(a->items);
    free(a);
}

void aclopDestroyAttr(const aclopAttr *attr) {
    if (!attr || !hrt_handle_remove(attr, HRT_H_ATTR)) return;
    hrt_attr_free((aclopAttr *)attr);
}

const hrt_attr_value *hrt_attr_find(const aclopAttr *a, const char *name) {
    if (!a) return NULL;
    int lo = 0, hi = a->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(a->items[mid].name, name);
        if (c == 0) return &a->items[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* Insert or replace `v` (takes ownership of its allocations). */
static aclError attr_put(aclopAttr *a, hrt_attr_value *v) {
    int lo = 0, hi = a->n - 1, pos = a->n;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(a->items[mid].name, v->name);
        if (c == 0) {
            value_free(&a->items[mid]);
            a->items[mid] = *v;
            return ACL_SUCCESS;
        }
        if (c < 0) lo = mid + 1;
        else {
            hi = mid - 1;
            pos = mid;
        }
    }
    pos = lo;
    if (a->n == a->cap) {
        int nc = a->cap ? a->cap * 2 : 8;
        hrt_attr_value *ni = realloc(a->items, sizeof *ni * (size_t)nc);
        if (!ni) {
            value_free(v);
            return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopSetAttr", "out of host memory");
        }
        a->items = ni;
        a->cap = nc;
    }
    memmove(a->items + pos + 1, a->items + pos, sizeof *a->items * (size_t)(a->n - pos));
    a->items[pos] = *v;
    a->n++;
    return ACL_SUCCESS;
}

static aclError attr_begin(aclopAttr *attr, const char *name, const char *api, hrt_attr_value *v, int type) {
    if (!attr || !name) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "attr or attrName is NULL");
    if (!*name) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "attrName is empty");
    if (!hrt_handle_valid(attr, HRT_H_ATTR)) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "attr %p is not live", (void *)attr);
    memset(v, 0, sizeof *v);
    v->type = type;
    v->name = strdup(name);
    if (!v->name) return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    return ACL_SUCCESS;
}

aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName, uint8_t attrValue) {
    hrt_attr_value v;
    aclError rc = attr_begin(attr, attrName, "aclopSetAttrBool", &v, HRT_ATTR_BOOL);
    if (rc) return rc;
    v.v.i = attrValue != 0;
    return attr_put(attr, &v);
}

aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName, int64_t attrValue) {
    hrt_attr_value v;
    aclError rc = attr_begin(attr, attrName, "aclopSetAttrInt", &v, HRT_ATTR_INT);
    if (rc) return rc;
    v.v.i = attrValue;
    return attr_put(attr, &v);
}

aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName, float attrValue) {
    hrt_attr_value v;
    aclError rc = attr_begin(attr, attrName, "aclopSetAttrFloat", &v, HRT_ATTR_FLOAT);
    if (rc) return rc;
    v.v.f = attrValue;
    return attr_put(attr, &v);
}

aclError aclopSetAttrString(aclopAttr *attr, const char *attrName, const char *attrValue) {
    if (!attrValue) return hrt_error(ACL_ERROR_INVALID_PARAM, "aclopSetAttrString", "attrValue is NULL");
    hrt_attr_value v;
    aclError rc = attr_begin(attr, attrName, "aclopSetAttrString", &v, HRT_ATTR_STRING);
    if (rc) return rc;
    v.v.s = strdup(attrValue);
    if (!v.v.s) {
        free(v.name);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopSetAttrString", "out of host memory");
    }
    return attr_put(attr, &v);
}

aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName, aclDataType attrValue) {
    if (!dtype_known(attrValue))
        return hrt_error(ACL_ERROR_INVALID_PARAM, "aclopSetAttrDataType", "unknown data type %d", (int)attrValue);
    hrt_attr_value v;
    aclError rc = attr_begin(attr, attrName, "aclopSetAttrDataType", &v, HRT_ATTR_DTYPE);
    if (rc) return rc;
    v.v.i = attrValue;
    return attr_put(attr, &v);
}

static aclError list_begin(aclopAttr *attr, const char *name, int n, const void *values, const char *api,
                           hrt_attr_value *v, int type) {
    if (n < 0) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "numValues %d < 0", n);
    if (n > 0 && !values) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "values is NULL with numValues %d", n);
    aclError rc = attr_begin(attr, name, api, v, type);
    if (rc) return rc;
    v->n = n;
    return ACL_SUCCESS;
}

aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName, int numValues, const uint8_t *values) {
    hrt_attr_value v;
    aclError rc = list_begin(attr, attrName, numValues, values, "aclopSetAttrListBool", &v, HRT_ATTR_LIST_BOOL);
    if (rc) return rc;
    v.v.li = malloc(sizeof(int64_t) * (size_t)(numValues ? numValues : 1));
    if (!v.v.li) {
        free(v.name);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopSetAttrListBool", "out of host memory");
    }
    for (int i = 0; i < numValues; i++) v.v.li[i] = values[i] != 0;
    return attr_put(attr, &v);
}

aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName, int numValues, const int64_t *values) {
    hrt_attr_value v;
    aclError rc = list_begin(attr, attrName, numValues, values, "aclopSetAttrListInt", &v, HRT_ATTR_LIST_INT);
    if (rc) return rc;
    v.v.li = malloc(sizeof(int64_t) * (size_t)(numValues ? numValues : 1));
    if (!v.v.li) {
        free(v.name);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopSetAttrListInt", "out of host memory");
    }
    if (numValues) memcpy(v.v.li, values, sizeof(int64_t) * (size_t)numValues);
    return attr_put(attr, &v);
}

aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName, int numValues, const float *values) {
    hrt_attr_value v;
    aclError rc = list_begin(attr, attrName, numValues, values, "aclopSetAttrListFloat", &v, HRT_ATTR_LIST_FLOAT);
    if (rc) return rc;
    v.v.lf = malloc(sizeof(float) * (size_t)(numValues ? numValues : 1));
    if (!v.v.lf) {
        free(v.name);
        return hrt_error(ACL_ERROR_BAD_ALLOC, "aclopSetAttrListFloat", "out of host memory");
    }
    if (numValues) memcpy(v.v.lf, values, sizeof(float) * (size_t)numValues);
    return attr_put(attr, &v);
}

aclError aclopSetAttrListString(aclopAttr *attr, const char *attrName, int numValues, const char **values) {
    const char *api = "aclopSetAttrListString";
    for (int i = 0; i < numValues && values; i++)
        if (!values[i]) return hrt_error(ACL_ERROR_INVALID_PARAM, api, "values[%d] is NULL", i);
    hrt_attr_value v;
    aclError rc = list_begin(attr, attrName, numValues, values, api, &v, HRT_ATTR_LIST_STRING);
    if (rc) return rc;
    v.v.ls = calloc((size_t)(numValues ? numValues : 1), sizeof(char *));
    bool ok = v.v.ls != NULL;
    for (int i = 0; ok && i < numValues; i++) ok = (v.v.ls[i] = strdup(values[i])) != NULL;
    if (!ok) {
        value_free(&v);
        return hrt_error(ACL_ERROR_BAD_ALLOC, api, "out of host memory");
    }
    return attr_put(attr, &v);
}

/* Canonical encoding (items are kept sorted by name). */
void hrt_attr_encode(const aclopAttr *a, hrt_buf *b) {
    int32_t n = a ? a->n : 0;
    hrt_buf_put(b, &n, sizeof n);
    for (int i = 0; i < n; i++) {
        const hrt_attr_value *v = &a->items[i];
        hrt_buf_put(b, v->name, strlen(v->name) + 1);
        hrt_buf_put(b, &v->type, sizeof v->type);
        switch (v->type) {
        case HRT_ATTR_BOOL: case HRT_ATTR_INT: case HRT_ATTR_DTYPE: hrt_buf_put(b, &v->v.i, 8); break;
        case HRT_ATTR_FLOAT: hrt_buf_put(b, &v->v.f, 8); break;
        case HRT_ATTR_STRING: hrt_buf_put(b, v->v.s, strlen(v->v.s) + 1); break;
        case HRT_ATTR_LIST_BOOL:
        case HRT_ATTR_LIST_INT:
            hrt_buf_put(b, &v->n, sizeof v->n);
            hrt_buf_put(b, v->v.li, sizeof(int64_t) * (size_t)v->n);
            break;
        case HRT_ATTR_LIST_FLOAT:
            hrt_buf_put(b, &v->n, sizeof v->n);
            hrt_buf_put(b, v->v.lf, sizeof(float) * (size_t)v->n);
            break;
        case HRT_ATTR_LIST_STRING:
            hrt_buf_put(b, &v->n, sizeof v->n);
            for (int j = 0; j < v->n; j++) hrt_buf_put(b, v->v.ls[j], strlen(v->v.ls[j]) + 1);
            break;
        }
    }
}
