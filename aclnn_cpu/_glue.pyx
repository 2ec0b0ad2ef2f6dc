# cython: language_level=3, boundscheck=False, wraparound=False
# Hand-written glue between Python arrays and the aclnn C API. The generated stubs in _ops.pyx
# call these helpers; every Python call goes through the same C validation path a C user hits.
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_SIMPLE
from cpython.long cimport PyLong_FromSsize_t
from cpython.number cimport PyNumber_Index
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid, PyCapsule_SetName
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t, uintptr_t
from libcpp cimport bool as cbool
cimport numpy as cnp

import numbers
import operator
import sys
import threading

import numpy as np
import ml_dtypes

from aclnn_cpu._errors import ParamInvalidError, ParamNullptrError, Status, error_for
from aclnn_cpu._vocabulary import (DLPACK_DTYPES, DTYPE_CODES, MAX_BOOL_ARRAY, MAX_DIMS,
                                   numpy_dtype)

cnp.import_array()

cdef extern from "aclnn/aclnn_base.h" nogil:
    # The codes this file uses by name (acl/acl_data_type.h, generated from the vocabulary).
    ctypedef enum aclDataType:
        ACL_DT_UNDEFINED
        ACL_FLOAT
        ACL_FLOAT16
        ACL_DOUBLE
        ACL_BF16
        ACL_COMPLEX64
        ACL_COMPLEX128
    ctypedef enum aclFormat:
        ACL_FORMAT_ND
    aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                               const int64_t* stride, int64_t offset, aclFormat format,
                               const int64_t* storageDims, uint64_t storageDimsNum, void* tensorData)
    aclnnStatus aclDestroyTensor(const aclTensor* tensor)
    aclBoolArray* aclCreateBoolArray(const cbool* value, uint64_t size)
    aclnnStatus aclDestroyBoolArray(const aclBoolArray* array)
    aclScalar* aclCreateScalar(void* value, aclDataType dataType)
    aclnnStatus aclDestroyScalar(const aclScalar* scalar)
    aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size)
    aclnnStatus aclDestroyIntArray(const aclIntArray* array)
    aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor* executor)
    aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor)
    aclnnStatus aclnnCpuSetTensorReadOnly(aclTensor* tensor, cbool read_only)
    const char* aclGetRecentErrMsg()

# DLPack (legacy, unversioned) structures: how torch and others hand over CPU memory.
cdef struct DLDevice:
    int32_t device_type
    int32_t device_id

cdef struct DLDataType:
    uint8_t code
    uint8_t bits
    uint16_t lanes

cdef struct DLTensor:
    void* data
    DLDevice device
    int32_t ndim
    DLDataType dtype
    int64_t* shape
    int64_t* strides
    uint64_t byte_offset

ctypedef struct DLManagedTensor:
    DLTensor dl_tensor
    void* manager_ctx
    void (*deleter)(DLManagedTensor*) noexcept

# Dims an array may have on its way to the C validator, which refuses those beyond MAX_DIMS with
# its own message (NumPy's limit; arrays with more, through DLPack, are refused here).
DEF MAX_INPUT_DIMS = 64
cdef int kDLCPU = 1

_BFLOAT16 = numpy_dtype("bfloat16")

# numpy dtype -> aclDataType code
_NUMPY_TO_ACL = {numpy_dtype(name): code for name, code in DTYPE_CODES.items()}

# DLPack (type code, bits) -> aclDataType code
_DLPACK_TO_ACL = {DLPACK_DTYPES[name]: code for name, code in DTYPE_CODES.items()}

# torch dtype names -> numpy dtypes, for dtype_of() on DLPack producers (torch's names are ours;
# NumPy has no bfloat16 of its own to convert a torch.bfloat16 tensor to)
_TORCH_TO_NUMPY = {f"torch.{name}": numpy_dtype(name) for name in DTYPE_CODES}


cdef inline object _invalid(str message):
    return ParamInvalidError(Status.ERR_PARAM_INVALID, message)


cdef class TensorArg:
    """An aclTensor describing a caller's array; keeps the array (and any DLPack capsule) alive."""

    def __dealloc__(self):
        cdef DLManagedTensor* managed
        if self.ptr != NULL:
            aclDestroyTensor(self.ptr)
            self.ptr = NULL
        if self.capsule is not None:
            managed = <DLManagedTensor*>PyCapsule_GetPointer(self.capsule, "used_dltensor")
            if managed != NULL and managed.deleter != NULL:
                managed.deleter(managed)
            self.capsule = None


cdef class BoolArrayArg:
    """An aclBoolArray built from a Python sequence of bools."""

    def __dealloc__(self):
        if self.ptr != NULL:
            aclDestroyBoolArray(self.ptr)
            self.ptr = NULL


cdef class ScalarArg:
    """An aclScalar built from a Python number or a NumPy scalar."""

    def __dealloc__(self):
        if self.ptr != NULL:
            aclDestroyScalar(self.ptr)
            self.ptr = NULL


cdef class IntArrayArg:
    """An aclIntArray built from a Python sequence of integers."""

    def __dealloc__(self):
        if self.ptr != NULL:
            aclDestroyIntArray(self.ptr)
            self.ptr = NULL


cdef int _make_tensor(TensorArg arg, str name, int acl_dtype, int ndim, const int64_t* shape,
                      const int64_t* strides, void* data, bint read_only) except -1:
    if ndim > MAX_INPUT_DIMS:
        raise _invalid(f"{name}: {ndim} dims; at most {MAX_DIMS} are supported")
    arg.ptr = aclCreateTensor(shape, ndim, <aclDataType>acl_dtype, strides, 0, ACL_FORMAT_ND,
                              shape, ndim, data)
    if arg.ptr == NULL:
        raise_for_status(Status.ERR_PARAM_INVALID)
    if read_only:
        aclnnCpuSetTensorReadOnly(arg.ptr, True)
    return 0


cdef object _BFLOAT16_DESCR = _BFLOAT16  # ml_dtypes registers one descriptor, shared by its arrays


cdef inline int _common_acl_dtype(cnp.ndarray arr):
    """The aclDataType of a native-order float32, float16, float64 or bfloat16 array read from
    its descriptor in C, else ACL_DT_UNDEFINED. The dtype attribute, its isnative and the table
    lookup took about a tenth of a tiny GridSampler call (five tensors)."""
    if not cnp.PyArray_ISNOTSWAPPED(arr):
        return ACL_DT_UNDEFINED
    cdef object descr = <object><void*>cnp.PyArray_DESCR(arr)
    if descr is _BFLOAT16_DESCR:
        return ACL_BF16
    cdef int type_num = (<cnp.dtype>descr).type_num
    if type_num == cnp.NPY_FLOAT32:
        return ACL_FLOAT
    if type_num == cnp.NPY_FLOAT16:
        return ACL_FLOAT16
    if type_num == cnp.NPY_FLOAT64:
        return ACL_DOUBLE
    return ACL_DT_UNDEFINED


cdef int _from_numpy(TensorArg arg, cnp.ndarray arr, str name, bint is_output) except -1:
    cdef int ndim = cnp.PyArray_NDIM(arr)
    cdef int64_t shape[MAX_INPUT_DIMS]
    cdef int64_t strides[MAX_INPUT_DIMS]
    cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(arr)
    cdef cnp.npy_intp* byte_strides = cnp.PyArray_STRIDES(arr)
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(arr)
    cdef int i
    cdef int acl_dtype = _common_acl_dtype(arr)
    if acl_dtype == ACL_DT_UNDEFINED:  # not one of the usual three: the dtype object and the table
        dtype = arr.dtype
        if not dtype.isnative:
            raise _invalid(f"{name}: byte order of dtype {dtype.str} is not native; convert with "
                           f"arr.astype(arr.dtype.newbyteorder('='))")
        acl_dtype = _NUMPY_TO_ACL.get(dtype, ACL_DT_UNDEFINED)
    if ndim > MAX_INPUT_DIMS:
        raise _invalid(f"{name}: {ndim} dims; at most {MAX_DIMS} are supported")
    if itemsize > 0 and (<uintptr_t>cnp.PyArray_DATA(arr)) % itemsize != 0:
        raise _invalid(f"{name}: data pointer is not aligned to its {itemsize}-byte elements")
    for i in range(ndim):
        shape[i] = dims[i]
        if itemsize > 0 and byte_strides[i] % itemsize != 0:
            raise _invalid(f"{name}: stride {byte_strides[i]} bytes of dim {i} is not a multiple "
                           f"of the element size {itemsize}")
        strides[i] = byte_strides[i] // itemsize if itemsize > 0 else 0
    read_only = is_output and not cnp.PyArray_ISWRITEABLE(arr)
    arg.obj = arr
    return _make_tensor(arg, name, acl_dtype, ndim, shape, strides, cnp.PyArray_DATA(arr), read_only)


cdef int _from_dlpack(TensorArg arg, object obj, str name) except -1:
    cdef DLManagedTensor* managed
    cdef DLTensor* t
    cdef int64_t strides[MAX_INPUT_DIMS]
    cdef int64_t expect = 1
    cdef int i
    if hasattr(obj, "__dlpack_device__"):
        try:
            device = obj.__dlpack_device__()
        except Exception as exc:  # torch raises ValueError for devices DLPack has no code for (meta)
            raise _invalid(f"{name}: {type(obj).__name__} has no DLPack device: {exc}") from None
        if int(device[0]) != kDLCPU:
            raise _invalid(f"{name}: DLPack device {tuple(device)} is not the CPU")
    try:
        capsule = obj.__dlpack__()
    except (RuntimeError, TypeError, BufferError) as exc:
        raise _invalid(f"{name}: cannot export through DLPack: {exc}") from None
    if not PyCapsule_IsValid(capsule, "dltensor"):
        raise _invalid(f"{name}: __dlpack__ returned no 'dltensor' capsule")
    managed = <DLManagedTensor*>PyCapsule_GetPointer(capsule, "dltensor")
    # From here on we own the tensor: rename the capsule and call the deleter when done.
    PyCapsule_SetName(capsule, "used_dltensor")
    arg.capsule = capsule
    arg.obj = obj
    t = &managed.dl_tensor
    if t.device.device_type != kDLCPU:
        raise _invalid(f"{name}: DLPack device type {t.device.device_type} is not the CPU")
    if t.ndim > MAX_INPUT_DIMS:
        raise _invalid(f"{name}: {t.ndim} dims; at most {MAX_DIMS} are supported")
    acl_dtype = _DLPACK_TO_ACL.get((t.dtype.code, t.dtype.bits), ACL_DT_UNDEFINED)
    if t.dtype.lanes != 1:
        acl_dtype = ACL_DT_UNDEFINED
    if t.strides != NULL:
        for i in range(t.ndim):
            strides[i] = t.strides[i]
    else:
        for i in range(t.ndim - 1, -1, -1):
            strides[i] = expect
            expect *= t.shape[i]
    data = <void*>(<char*>t.data + t.byte_offset)
    if t.dtype.bits >= 8 and (<uintptr_t>data) % (t.dtype.bits // 8) != 0:
        raise _invalid(f"{name}: data pointer is not aligned to its {t.dtype.bits // 8}-byte elements")
    return _make_tensor(arg, name, acl_dtype, t.ndim, t.shape, strides, data, False)


# torch.Tensor and its dtypes' aclDataType codes, looked up once torch has been imported (torch is
# never imported here).
cdef object _torch_tensor_type = None
cdef dict _torch_dtype_codes = None
cdef object _torch_strided = None


cdef bint _is_plain_torch_tensor(object obj):
    global _torch_tensor_type, _torch_dtype_codes, _torch_strided
    if _torch_tensor_type is None:
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "Tensor"):
            return False
        _torch_dtype_codes = {getattr(torch, name): (code, numpy_dtype(name).itemsize)
                              for name, code in DTYPE_CODES.items()
                              if isinstance(getattr(torch, name, None), torch.dtype)}
        _torch_strided = torch.strided
        _torch_tensor_type = torch.Tensor
    return type(obj) is _torch_tensor_type


cdef int _from_torch(TensorArg arg, object obj, str name, bint is_output) except -1:
    """A plain CPU torch tensor read through its own accessors (a few hundred nanoseconds) rather
    than DLPack (__dlpack_device__ and __dlpack__: about 3 us a tensor, 20 us of a GroupNorm call's
    6 tensors). Returns 1 without touching arg for anything DLPack should judge (other devices and
    layouts, dtypes outside the vocabulary, tensors that require grad, empty ones), which then
    takes the DLPack path and its errors.
    A negative view (torch._neg_view: memory holding -x) is an input resolved to x by a copy, and
    refused as an output, which could not be written in place; DLPack (torch 2.13) hands over the
    memory as it is, so both would have read or written the wrong sign."""
    cdef int64_t shape[MAX_INPUT_DIMS]
    cdef int64_t strides[MAX_INPUT_DIMS]
    cdef int i, ndim
    cdef int code
    cdef uintptr_t itemsize
    known = _torch_dtype_codes.get(obj.dtype)
    if known is None or not obj.is_cpu or obj.layout is not _torch_strided or obj.requires_grad:
        return 1
    if obj.is_neg():
        if is_output:
            raise _invalid(f"{name}: a negative view (torch._neg_view) cannot be written in place; "
                           "pass a tensor without the neg bit")
        obj = obj.resolve_neg()
    dims = obj.shape
    ndim = len(dims)
    if ndim > MAX_INPUT_DIMS:
        return 1
    steps = obj.stride()
    for i in range(ndim):
        shape[i] = dims[i]
        if shape[i] == 0:
            return 1
        strides[i] = steps[i]
    code, itemsize = known
    data = <void*><uintptr_t>obj.data_ptr()
    if (<uintptr_t>data) % itemsize != 0:
        raise _invalid(f"{name}: data pointer is not aligned to its {itemsize}-byte elements")
    arg.obj = obj
    _make_tensor(arg, name, code, ndim, shape, strides, data, False)
    return 0


cdef TensorArg tensor_arg(object obj, str name, bint is_output):
    """The aclTensor for ``obj`` (NULL for None). Outputs must be writable views."""
    cdef TensorArg arg = TensorArg.__new__(TensorArg)
    if obj is None:
        return arg
    if cnp.PyArray_Check(obj):  # isinstance(obj, np.ndarray), without looking np.ndarray up
        _from_numpy(arg, <cnp.ndarray>obj, name, is_output)
    elif _is_plain_torch_tensor(obj) and _from_torch(arg, obj, name, is_output) == 0:
        pass
    elif hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__"):
        _from_dlpack(arg, obj, name)
    else:
        try:
            arr = np.asarray(obj)
        except Exception as exc:
            raise _invalid(f"{name}: {type(obj).__name__} is not an array: {exc}") from None
        if is_output and arr.base is None and arr is not obj:
            raise _invalid(f"{name}: {type(obj).__name__} cannot be written in place")
        _from_numpy(arg, arr, name, is_output)
        arg.obj = (obj, arr)
    return arg


cdef object _flag(object value):
    """value as a bool when it is one (Python's or NumPy's) or the integer 0 or 1, else None."""
    if value is True or value is False:  # the common case, without looking np.bool_ up
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    try:
        v = operator.index(value)
    except TypeError:
        return None
    return bool(v) if v in (0, 1) else None


cpdef object int64_value(object value, str name):
    """An integer argument as a Python int in int64's range. Integers only (NumPy's and bools
    too): a float is refused rather than truncated (interpolationMode 1.5 would otherwise run
    as nearest)."""
    cdef long long exact
    if type(value) is int:  # the common case: a range check in C, no Python int arithmetic
        try:
            exact = value
            return value
        except OverflowError:
            raise _invalid(f"{name}: {value} is outside the int64 range") from None
    try:
        v = PyNumber_Index(value)  # operator.index, without looking it up
    except TypeError:
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__} {value!r}") from None
    if not -(1 << 63) <= v < (1 << 63):
        raise _invalid(f"{name}: {v} is outside the int64 range")
    return v


cpdef bint flag_value(object value, str name) except -1:
    """A bool argument: True or False (NumPy's too) or the integers 0 and 1; anything else (None,
    a string) is refused rather than taken for its truth value."""
    flag = _flag(value)
    if flag is None:
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__} {value!r}")
    return flag


cpdef double float_value(object value, str name) except? -1:
    """A double argument: any real number (ints and NumPy's numbers and 0-d arrays too) as a
    float; a bool, a string or None is refused rather than taken for a number."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiu":
        value = value[()]  # the NumPy scalar inside, which is a numbers.Real
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise _invalid(f"{name}: {value} is outside the float64 range") from None


cdef ScalarArg scalar_arg(object value, str name):
    """The aclScalar for a Python number (NULL for None), typed as torch_npu types its scalars:
    a bool as BOOL, an int as INT64, a float (any real number) as DOUBLE; a NumPy scalar or 0-d
    array keeps its dtype (np.float32(0.1) stays the float32 value). A complex value, or an
    array with elements, is 161002; anything else (a string, a torch tensor) TypeError."""
    cdef ScalarArg arg = ScalarArg.__new__(ScalarArg)
    cdef cnp.ndarray holder
    if value is None:
        return arg
    if isinstance(value, (bool, np.bool_)):
        holder = np.asarray(bool(value), dtype=np.bool_)
    elif isinstance(value, (np.generic, np.ndarray)):
        holder = np.array(value)  # a 0-d copy of its own (ascontiguousarray would make it 1-d)
        if holder.ndim != 0:
            raise _invalid(f"{name}: expected a scalar, got an array of shape {np.shape(value)}")
    else:
        try:
            v = operator.index(value)
        except TypeError:
            if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
                raise _invalid(f"{name}: a complex scalar ({value!r}) is not supported") from None
            if not isinstance(value, numbers.Real):
                raise TypeError(f"{name}: expected a number, got {type(value).__name__} {value!r}") from None
            holder = np.asarray(float(value), dtype=np.float64)
        else:
            holder = np.asarray(int64_value(v, name), dtype=np.int64)
    code = _NUMPY_TO_ACL.get(holder.dtype)
    if code is None or code in (ACL_COMPLEX64, ACL_COMPLEX128):
        raise _invalid(f"{name}: a scalar of dtype {holder.dtype} is not supported")
    arg.ptr = aclCreateScalar(cnp.PyArray_DATA(holder), <aclDataType>code)
    if arg.ptr == NULL:
        raise_for_status(Status.ERR_PARAM_INVALID)
    return arg


cdef IntArrayArg int_array_arg(object values, str name):
    """The aclIntArray for a sequence of integers (NULL for None); each entry as int64_value
    takes it (a float entry is refused, not truncated), and a string is not such a sequence."""
    cdef IntArrayArg arg = IntArrayArg.__new__(IntArrayArg)
    cdef cnp.ndarray holder
    if values is None:
        return arg
    # A string is not a list of integers, and an unordered collection gives no order to keep.
    if isinstance(values, (str, bytes, set, frozenset, dict)):
        raise _invalid(f"{name}: expected a sequence of integers, got {type(values).__name__}")
    try:
        raw = list(values)
    except TypeError:
        raise _invalid(f"{name}: expected a sequence of integers, got {type(values).__name__}") from None
    items = []
    for i, v in enumerate(raw):
        try:
            operator.index(v)
        except TypeError:
            raise _invalid(f"{name}: entry {i} is {v!r}, not an integer") from None
        items.append(int64_value(v, f"{name}: entry {i}"))
    holder = np.array(items, dtype=np.int64)
    arg.ptr = aclCreateIntArray(<const int64_t*>cnp.PyArray_DATA(holder), len(items))
    if arg.ptr == NULL:
        raise_for_status(Status.ERR_PARAM_INVALID)
    return arg


cdef BoolArrayArg bool_array_arg(object values, str name):
    """The aclBoolArray for a sequence of bools (NULL for None); each entry as flag_value takes
    it, and a string is not a sequence of bools."""
    cdef BoolArrayArg arg = BoolArrayArg.__new__(BoolArrayArg)
    cdef cnp.ndarray holder
    cdef Py_ssize_t i, n
    if values is None:
        return arg
    if isinstance(values, (str, bytes)):
        raise _invalid(f"{name}: expected a sequence of bools, got {type(values).__name__}")
    try:
        raw = list(values)
    except TypeError:
        raise _invalid(f"{name}: expected a sequence of bools, got {type(values).__name__}") from None
    items = [_flag(v) for v in raw]
    for i in range(len(items)):
        if items[i] is None:
            raise _invalid(f"{name}: entry {i} is {raw[i]!r}, not a bool")
    n = len(items)
    if n > MAX_BOOL_ARRAY:
        raise _invalid(f"{name}: {n} entries is too many")
    holder = np.array(items, dtype=np.bool_)  # one byte per flag, as C++'s bool
    arg.ptr = aclCreateBoolArray(<const cbool*>cnp.PyArray_DATA(holder), n)
    if arg.ptr == NULL:
        raise_for_status(Status.ERR_PARAM_INVALID)
    return arg


cdef int raise_for_status(aclnnStatus status) except -1:
    """Raises the AclnnError subclass of ``status`` with the runtime's last message."""
    cdef const char* msg
    if status == 0:
        return 0
    msg = aclGetRecentErrMsg()
    text = msg.decode("utf-8", "replace") if msg != NULL else ""
    # Unread messages pile up in C, newest first, one a line: this call's failure is the first
    # (any older one, of a call whose failure went unreported, is not this error's).
    text = text.partition("\n")[0]
    raise error_for(status, text or f"aclnn call failed with status {status}")


cdef class Executor:
    """What aclnnXxxGetWorkspaceSize returns: runs once (or many times once set_repeatable())."""

    def __dealloc__(self):
        if self.ptr != NULL:
            aclDestroyAclOpExecutor(self.ptr)
            self.ptr = NULL

    def set_repeatable(self):
        """Keep the executor after a run (aclSetAclOpExecutorRepeatable)."""
        if self.ptr == NULL:
            raise _invalid(f"{self.op_name}: the executor was already run or destroyed")
        raise_for_status(aclSetAclOpExecutorRepeatable(self.ptr))
        self.repeatable = True
        return self

    def destroy(self):
        """Release the executor now (aclDestroyAclOpExecutor); it cannot run afterwards."""
        if self.ptr != NULL:
            aclDestroyAclOpExecutor(self.ptr)
            self.ptr = NULL
        self.consumed = True
        self.keep = ()

    @property
    def is_repeatable(self):
        return bool(self.repeatable)

    @property
    def is_consumed(self):
        return bool(self.consumed)

    def __repr__(self):
        state = "consumed" if self.consumed else ("repeatable" if self.repeatable else "ready")
        return f"<aclnn_cpu.Executor {self.op_name} workspace={self.workspace_size} {state}>"


cdef Executor new_executor(aclOpExecutor* ptr, uint64_t workspace_size, str op_name, RunFn run_fn,
                           tuple keep):
    cdef Executor ex = Executor.__new__(Executor)
    ex.ptr = ptr
    ex.workspace_size = workspace_size
    ex.op_name = op_name
    ex.run_fn = run_fn
    ex.keep = keep
    ex.consumed = False
    ex.repeatable = False
    return ex


cdef object _run(Executor executor, void* workspace, uint64_t workspace_size, void* stream):
    cdef aclnnStatus status
    cdef RunFn fn = executor.run_fn
    cdef aclOpExecutor* ptr = executor.ptr
    with nogil:
        status = fn(workspace, workspace_size, ptr, <aclrtStream>stream)
    if not executor.repeatable:
        # The runtime destroyed the executor once it ran (as CANN does).
        executor.ptr = NULL
        executor.consumed = True
        executor.keep = ()
    raise_for_status(status)
    return None


cdef int _check_runnable(Executor executor, str op_name) except -1:
    if executor.ptr == NULL:
        raise _invalid(f"{op_name}: the executor was already run (it is not repeatable) or destroyed")
    if executor.op_name != op_name:
        raise _invalid(f"{op_name}: the executor was planned by {executor.op_name}")
    return 0


cdef object run_two_phase(object workspace, uint64_t workspace_size, Executor executor,
                          object stream, str op_name):
    """Phase 2 with a caller-provided workspace (any writable buffer, or None when size is 0)."""
    cdef Py_buffer view
    cdef void* stream_ptr = NULL
    if executor is None:
        raise ParamNullptrError(Status.ERR_PARAM_NULLPTR, f"{op_name}: executor is None")
    _check_runnable(executor, op_name)
    if stream is not None:
        stream_ptr = <void*><uintptr_t>int(stream)
    if workspace is None:
        if workspace_size > 0:
            raise ParamNullptrError(Status.ERR_PARAM_NULLPTR,
                                    f"{op_name}: workspace is None but workspaceSize is {workspace_size}")
        if executor.workspace_size > 0:
            raise _invalid(f"{op_name}: workspaceSize 0 is smaller than the {executor.workspace_size} "
                           f"bytes the executor needs")
        return _run(executor, NULL, 0, stream_ptr)
    PyObject_GetBuffer(workspace, &view, PyBUF_WRITABLE)
    try:
        if <uint64_t>view.len < workspace_size:
            raise _invalid(f"{op_name}: workspace holds {view.len} bytes, less than workspaceSize "
                           f"{workspace_size}")
        if workspace_size < executor.workspace_size:
            raise _invalid(f"{op_name}: workspaceSize {workspace_size} is smaller than the "
                           f"{executor.workspace_size} bytes the executor needs")
        if executor.workspace_size > 0 and (<uintptr_t>view.buf) % 16 != 0:
            raise _invalid(f"{op_name}: workspace must be 16-byte aligned")
        return _run(executor, view.buf, workspace_size, stream_ptr)
    finally:
        PyBuffer_Release(&view)


# The functional API's workspaces: each thread keeps its largest one up to this size and reuses
# it. A fresh buffer of more than glibc's mmap threshold (32 MiB at most) came from new pages on
# every call, and the kernel zeroed each page on first touch: PReLU on a transposed [8, 1M]
# (64 MiB of dense copies) spent 18% of its time in clear_page. A thread's own buffer is never
# in two calls at once (the call holds its thread until the kernel returns).
cdef uint64_t _WORKSPACE_KEEP_MAX = 256 << 20
_workspaces = threading.local()


# The last thread's buffer also sits in C globals (read and written with the GIL held), which a
# call from that thread takes without the threading.local lookup (about a tenth of a tiny call).
# A thread that reuses a finished thread's identifier may take that thread's buffer: nobody else
# holds it.
cdef unsigned long _recent_thread = 0
cdef object _recent_buf = None


cdef cnp.ndarray _workspace_buffer(uint64_t nbytes):
    global _recent_thread, _recent_buf
    if nbytes > _WORKSPACE_KEEP_MAX:
        return np.empty(nbytes, dtype=np.uint8)
    cdef unsigned long thread = PyThread_get_thread_ident()
    cdef cnp.ndarray buf
    if thread == _recent_thread and _recent_buf is not None \
            and <uint64_t>cnp.PyArray_SIZE(<cnp.ndarray>_recent_buf) >= nbytes:
        return <cnp.ndarray>_recent_buf
    buf = getattr(_workspaces, "buf", None)
    if buf is None or <uint64_t>cnp.PyArray_SIZE(buf) < nbytes:
        buf = np.empty(nbytes, dtype=np.uint8)
        _workspaces.buf = buf
    _recent_thread, _recent_buf = thread, buf
    return buf


cdef object run_planned(aclOpExecutor* executor, uint64_t size, RunFn run_fn):
    """Phase 2 of a functional call, right after its phase 1, with a workspace from this thread's
    buffer (64-byte aligned). The executor is consumed: run (the runtime destroys it), or
    destroyed here when no workspace can be had."""
    cdef void* ptr = NULL
    cdef cnp.ndarray buf
    cdef aclnnStatus status
    if size > 0:
        try:
            buf = _workspace_buffer(size + 64)
        except BaseException:
            aclDestroyAclOpExecutor(executor)
            raise
        ptr = <void*>(<char*>cnp.PyArray_DATA(buf) + (64 - (<uintptr_t>cnp.PyArray_DATA(buf)) % 64) % 64)
    with nogil:
        status = run_fn(ptr, size, executor, NULL)
    raise_for_status(status)
    return None


# ---- Helpers of the generated functional API ----
# cpdef and cimported by aclnn_cpu/_ops.pyx: called there as C functions, since a call through
# Python cost about as much as the rest of a tiny call's output allocation (GridSampler's
# "functional alloc" overhead was 1.2x torch's). NumPy arrays take the first branch of each.

cpdef object as_input(object x):
    """Arrays, tensors and None pass through; nested lists and scalars become NumPy arrays."""
    if x is None or cnp.PyArray_Check(x) or hasattr(x, "__dlpack__") \
            or hasattr(x, "__array_interface__"):
        return x
    return np.asarray(x)


cpdef tuple shape_of(object x):
    """The shape of any array-like as a tuple of ints."""
    cdef int k, nd
    cdef tuple dims
    if type(x) is cnp.ndarray:
        # Read off the array's C struct: the `shape` attribute is a type lookup and a getter.
        nd = cnp.PyArray_NDIM(x)
        dims = PyTuple_New(nd)
        for k in range(nd):
            extent = PyLong_FromSsize_t(cnp.PyArray_DIMS(x)[k])
            Py_INCREF(extent)  # PyTuple_SET_ITEM steals the reference the local also holds
            PyTuple_SET_ITEM(dims, k, extent)
        return dims
    shape = getattr(x, "shape", None)
    if shape is None:
        shape = np.asarray(x).shape
    return tuple([int(s) for s in shape])


cpdef object dtype_of(object x):
    """The NumPy dtype matching ``x``'s element type (ml_dtypes.bfloat16 for bfloat16)."""
    if cnp.PyArray_Check(x):
        return <object><void*>cnp.PyArray_DESCR(x)  # the `dtype` attribute without the lookup
    dt = getattr(x, "dtype", None)
    if dt is not None:
        mapped = _TORCH_TO_NUMPY.get(str(dt))
        if mapped is not None:
            return mapped
        try:
            return np.dtype(dt)
        except TypeError:
            pass
    return np.asarray(x).dtype


cpdef bint torch_inputs(tuple inputs):
    """Whether the tensor inputs of a functional call (None entries aside) are all torch tensors,
    in which case its allocated outputs are torch tensors too. torch is never imported here: a
    caller holding a torch tensor has imported it already."""
    if len(inputs) and cnp.PyArray_Check(inputs[0]):  # NumPy callers: one C check
        return False
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    tensor_type = torch.Tensor
    seen = False
    for x in inputs:
        if x is None:
            continue
        if not isinstance(x, tensor_type):
            return False
        seen = True
    return seen


cdef object _as_torch(object arr):
    """A torch tensor over ``arr``'s memory (no copy; the tensor keeps the array alive), of the
    same dtype, shape and strides. torch has no NumPy bfloat16, so a bfloat16 array goes over as
    its 16-bit pattern and is reinterpreted, bit for bit."""
    torch = sys.modules["torch"]
    if arr.dtype is _BFLOAT16_DESCR or arr.dtype == _BFLOAT16:
        return torch.from_numpy(arr.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


cpdef object new_output(object shape, object dtype, object like=None, bint as_torch=False):
    """A fresh output array (bfloat16 accepted by name), its data on a 64-byte cache line, in
    the memory order of ``like`` when that is a dense permutation of C order (see
    dense_axis_order), else C-contiguous. With ``as_torch`` the array is handed back as a torch
    tensor over the same memory (outputs follow inputs: see torch_inputs).

    NumPy puts big arrays 16 bytes past a line (glibc's chunk header), and the kernels' streaming
    stores only pay where every run of the output starts on a line (see simd.h,
    stream_runs_fit), so outputs allocated here are line-aligned. Taking the input's order (as
    NumPy's empty_like and torch's preserve_format do) keeps a channels-last or transposed
    call on the kernels' fast paths, which need the inputs and outputs in one layout.
    """
    if not isinstance(dtype, cnp.dtype):
        mapped = _TORCH_TO_NUMPY.get(str(dtype))  # a torch dtype; other names go to empty_aligned
        if mapped is not None:
            dtype = mapped
    order = None
    if like is not None and not (type(like) is cnp.ndarray and cnp.PyArray_IS_C_CONTIGUOUS(like)):
        order = dense_axis_order(like, shape)
    if order is None:
        arr = empty_aligned(shape, dtype)
    else:
        outer_first = empty_aligned(tuple([shape[a] for a in order]), dtype)
        inverse = [0] * len(order)
        for position, axis in enumerate(order):
            inverse[axis] = position
        arr = outer_first.transpose(inverse)
    return _as_torch(arr) if as_torch else arr


cdef object _element_strides(object x):
    """x's strides in elements (torch tensors, NumPy arrays, array-interface objects), or None
    when they cannot be read without a copy."""
    if cnp.PyArray_Check(x):
        arr = <cnp.ndarray>x
    elif callable(getattr(x, "stride", None)):  # torch: strides in elements already
        return tuple([int(s) for s in x.stride()])
    elif hasattr(x, "__array_interface__"):
        arr = np.asarray(x)
    else:
        return None
    cdef Py_ssize_t itemsize = arr.itemsize
    strides = arr.strides
    for s in strides:
        if s % itemsize:
            return None
    return tuple([s // itemsize for s in strides])


cpdef object dense_axis_order(object like, object shape):
    """The axes of ``like`` from outermost to innermost in memory when ``like`` has ``shape`` and
    its elements fill a dense block in an order other than C order (channels-last, a transpose;
    negative strides count by magnitude); None otherwise. Axes of one element go outermost in
    their own order (where they go does not change the memory)."""
    is_contiguous = getattr(like, "is_contiguous", None)  # torch: a quick way out
    if callable(is_contiguous) and is_contiguous():
        return None
    shape = tuple(shape)
    if len(shape) < 2 or shape_of(like) != shape:
        return None
    strides = _element_strides(like)
    if strides is None:
        return None
    ones = [a for a in range(len(shape)) if shape[a] == 1]
    # Outermost (largest |stride|) first; equal strides keep their order and fail the check.
    rest = [a for _, a in sorted([(-abs(strides[a]), a) for a in range(len(shape)) if shape[a] != 1])]
    expect = 1
    for a in reversed(rest):
        if abs(strides[a]) != expect:
            return None  # gaps, overlaps or broadcasting: no dense order to copy
        expect *= shape[a]
    if rest == sorted(rest):
        return None  # C order already
    return ones + rest


cpdef object empty_aligned(object shape, object dtype):
    """``np.empty(shape, dtype)`` whose data starts on a 64-byte line (for ``out=`` arrays)."""
    if not isinstance(dtype, cnp.dtype):
        dtype = _BFLOAT16 if isinstance(dtype, str) and dtype in ("bfloat16", "bf16") else np.dtype(dtype)
    if type(shape) is not tuple:
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    cdef Py_ssize_t nbytes = (<cnp.dtype>dtype).itemsize
    cdef cnp.npy_intp dims[64]
    cdef int nd = len(shape)
    cdef bint plain = nd <= 64  # NumPy's dimension limit (NumPy 2; 32 before, where it raises)
    cdef Py_ssize_t k
    for k in range(nd):
        extent = shape[k]
        nbytes *= extent
        if plain:
            dims[k] = extent
            plain = dims[k] >= 0
    if not plain:
        return np.empty(shape, dtype=dtype)  # raises for a negative extent or too many dims
    if nbytes < 4096:  # small: the alignment cannot matter; np.empty without the Python call
        return cnp.PyArray_EMPTY(nd, dims, (<cnp.dtype>dtype).type_num, 0)
    if nbytes >= _pages_min_bytes and ACLNN_HAVE_MEM_HANDLER:
        return _empty_on_pages(shape, dtype)
    return aclnn_aligned_heap_array(nd, dims, dtype, nbytes)


# ---- Big outputs ----
# A big buffer from malloc is a fresh mmap: each first store to a 4 KiB page of it faults and the
# kernel zeroes the page, and dropping the array unmaps it all again. Outputs of at least
# _pages_min_bytes therefore come from runtime/output_pages.cpp: 2 MiB-aligned mappings advised
# for transparent huge pages, and a small cache of released ones (docs/architecture.md, "Output
# allocation", has the figures).
#
# The arrays own that memory through NumPy's PyDataMem_Handler API (NumPy >= 1.22): the handler
# is made current only around the np.empty that creates the array, and NumPy records it in the
# array, so the array has OWNDATA and frees through the handler whenever its last reference
# goes, from any thread, through any chain of views, torch tensors (from_numpy, DLPack) or
# pickled copies (a copy has memory of its own). A base object that unmaps in its dealloc would
# serve too, but every array handed out would then be a view (OWNDATA False, resize refused),
# unlike NumPy's own arrays. NumPy calls the handler with the GIL held or not; the runtime side
# keeps its own lock and its fork handlers (runtime/fork_guard.h).
cdef extern from *:
    """
    #include <cstdlib>
    #include <cstring>
    #include "aclnn_cpu/output_pages.h"
    #if NPY_FEATURE_VERSION >= NPY_1_22_API_VERSION
    #define ACLNN_HAVE_MEM_HANDLER 1
    static void* aclnn_pages_malloc(void*, size_t size) {
        void* p = aclnn_cpu::output_pages_allocate(size);
        if (p == nullptr && posix_memalign(&p, 64, size ? size : 1) != 0) p = nullptr;
        return p;  // no pages to be had: an aligned heap block (freed by free() below)
    }
    static void* aclnn_pages_calloc(void*, size_t nelem, size_t elsize) {
        return std::calloc(nelem, elsize);  // NumPy asks this for dtypes that need zeroing only
    }
    static void aclnn_pages_free(void*, void* ptr, size_t) {
        if (!aclnn_cpu::output_pages_release(ptr)) std::free(ptr);
    }
    static void* aclnn_pages_realloc(void*, void* ptr, size_t new_size) {
        size_t old = aclnn_cpu::output_pages_length(ptr);
        if (old == 0) return std::realloc(ptr, new_size);  // a heap block of the fallbacks
        void* moved = std::malloc(new_size ? new_size : 1);  // ndarray.resize: rare, plain heap
        if (moved == nullptr) return nullptr;
        std::memcpy(moved, ptr, old < new_size ? old : new_size);
        aclnn_cpu::output_pages_release(ptr);
        return moved;
    }
    static PyDataMem_Handler aclnn_pages_handler = {
        "aclnn_cpu_output_pages", 1,
        {nullptr, aclnn_pages_malloc, aclnn_pages_calloc, aclnn_pages_realloc, aclnn_pages_free}};
    static PyObject* aclnn_pages_handler_capsule(void) {
        return PyCapsule_New(&aclnn_pages_handler, "mem_handler", nullptr);
    }
    #endif
    // Outputs below the pages' threshold: a block of glibc's heap on a 64-byte line, owned by a
    // capsule that is the array's base (making a handler current for NumPy to allocate through
    // costs two context-variable sets, 0.25 us an array).
    static void aclnn_aligned_block_free(PyObject* capsule) {
        std::free(PyCapsule_GetPointer(capsule, "aclnn_cpu_aligned_block"));
    }
    static PyObject* aclnn_aligned_heap_array(int nd, npy_intp* dims, PyArray_Descr* descr, size_t nbytes) {
        void* block = nullptr;
        if (posix_memalign(&block, 64, nbytes ? nbytes : 1) != 0) return PyErr_NoMemory();
        PyObject* owner = PyCapsule_New(block, "aclnn_cpu_aligned_block", aclnn_aligned_block_free);
        if (owner == nullptr) {
            std::free(block);
            return nullptr;
        }
        Py_INCREF(descr);  // PyArray_NewFromDescr steals it
        PyObject* arr = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, nullptr, block, NPY_ARRAY_CARRAY, nullptr);
        if (arr == nullptr) {
            Py_DECREF(owner);
            return nullptr;
        }
        if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), owner) < 0) {  // steals owner
            Py_DECREF(arr);
            return nullptr;
        }
        return arr;
    }
    #if NPY_FEATURE_VERSION >= NPY_1_22_API_VERSION
    static PyObject* aclnn_pages_set_handler(PyObject* handler) {
        return PyDataMem_SetHandler(handler);
    }
    #else
    #define ACLNN_HAVE_MEM_HANDLER 0
    static PyObject* aclnn_pages_handler_capsule(void) { Py_RETURN_NONE; }
    static PyObject* aclnn_pages_set_handler(PyObject*) { Py_RETURN_NONE; }
    #endif
    """
    const bint ACLNN_HAVE_MEM_HANDLER
    object aclnn_pages_handler_capsule()
    object aclnn_aligned_heap_array(int nd, cnp.npy_intp* dims, cnp.dtype descr, size_t nbytes)
    object aclnn_pages_set_handler(object handler)

cdef extern from "aclnn_cpu/output_pages.h" namespace "aclnn_cpu" nogil:
    cdef struct OutputPagesStats:
        uint64_t live_bytes
        uint64_t cached_bytes
        uint64_t cached_buffers
    void output_pages_configure(cbool huge_pages, uint64_t cache_bytes)
    cbool output_pages_huge_pages()
    uint64_t output_pages_cache_limit()
    OutputPagesStats output_pages_stats()
    size_t output_pages_length(const void* ptr)

# Smaller outputs stay on the path above: glibc serves them from its heap, whose freed chunks
# it reuses, and a 2 MiB mapping would round them up.
cdef Py_ssize_t _pages_min_bytes = 4 << 20
cdef object _pages_handler = aclnn_pages_handler_capsule()


cdef object _empty_on_pages(tuple shape, object dtype):
    previous = aclnn_pages_set_handler(_pages_handler)
    try:
        return np.empty(shape, dtype=dtype)
    finally:
        aclnn_pages_set_handler(previous)


def output_pages(object huge_pages=None, object cache_bytes=None, object min_bytes=None):
    """The big-output allocator's settings, changed where an argument is given; returns the
    settings and counters as a dict (for tests and benchmarks). huge_pages: advise new mappings
    for transparent huge pages (ACLNN_CPU_HUGE_PAGES=0 starts with it off). cache_bytes: bytes of
    released buffers kept for reuse (ACLNN_CPU_OUTPUT_CACHE_BYTES; 0 keeps none). min_bytes:
    the smallest output served by it; larger than any output turns it off (plain NumPy memory,
    64-byte aligned)."""
    global _pages_min_bytes
    if huge_pages is not None or cache_bytes is not None:
        output_pages_configure(
            output_pages_huge_pages() if huge_pages is None else bool(huge_pages),
            output_pages_cache_limit() if cache_bytes is None else int(cache_bytes))
    if min_bytes is not None:
        _pages_min_bytes = max(1, int(min_bytes))
    cdef OutputPagesStats st = output_pages_stats()
    return {"available": bool(ACLNN_HAVE_MEM_HANDLER), "huge_pages": output_pages_huge_pages(),
            "cache_bytes": output_pages_cache_limit(), "min_bytes": _pages_min_bytes,
            "live_bytes": st.live_bytes, "cached_bytes": st.cached_bytes,
            "cached_buffers": st.cached_buffers}


def output_pages_owner(object arr):
    """The mapped length of the big-output buffer ``arr``'s data starts, 0 when it is not one."""
    return output_pages_length(<void*><uintptr_t>np.asarray(arr).ctypes.data)


cpdef tuple unpack_out(object out, Py_ssize_t n, str name):
    """``out=`` of an n-output op: None, or a tuple/list of n arrays-or-None."""
    if out is None:
        return (None,) * n
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise _invalid(f"{name}: expected a tuple of {n} arrays (None where not wanted)")
    return tuple(out)
