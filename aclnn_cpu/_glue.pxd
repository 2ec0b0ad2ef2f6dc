# Hand-written Cython glue shared by the generated per-op stubs (aclnn_cpu/_ops.pyx): turns Python
# arrays into aclTensor handles, wraps executors, maps status codes to exceptions.
from libc.stdint cimport int32_t, int64_t, uint64_t

cdef extern from "aclnn/aclnn_base.h" nogil:
    ctypedef int32_t aclnnStatus
    ctypedef struct aclTensor
    ctypedef struct aclScalar
    ctypedef struct aclIntArray
    ctypedef struct aclBoolArray
    ctypedef struct aclOpExecutor
    ctypedef void* aclrtStream

ctypedef aclnnStatus (*RunFn)(void*, uint64_t, aclOpExecutor*, aclrtStream) noexcept nogil

cdef class TensorArg:
    cdef aclTensor* ptr
    cdef object obj
    cdef object capsule

cdef class BoolArrayArg:
    cdef aclBoolArray* ptr

cdef class ScalarArg:
    cdef aclScalar* ptr

cdef class IntArrayArg:
    cdef aclIntArray* ptr

cdef class Executor:
    cdef aclOpExecutor* ptr
    cdef readonly uint64_t workspace_size
    cdef readonly str op_name
    cdef RunFn run_fn
    cdef tuple keep
    cdef bint consumed, repeatable

cdef TensorArg tensor_arg(object obj, str name, bint is_output)
cdef BoolArrayArg bool_array_arg(object values, str name)
cdef ScalarArg scalar_arg(object value, str name)
cdef IntArrayArg int_array_arg(object values, str name)
cdef int raise_for_status(aclnnStatus status) except -1
cdef Executor new_executor(aclOpExecutor* ptr, uint64_t workspace_size, str op_name, RunFn run_fn, tuple keep)
cdef object run_two_phase(object workspace, uint64_t workspace_size, Executor executor, object stream, str op_name)
cdef object run_planned(aclOpExecutor* executor, uint64_t size, RunFn run_fn)

# Helpers of the generated functional API (also importable from Python).
cpdef object as_input(object x)
cpdef tuple shape_of(object x)
cpdef object dtype_of(object x)
cpdef bint torch_inputs(tuple inputs)
cpdef object new_output(object shape, object dtype, object like=*, bint as_torch=*)
cpdef object dense_axis_order(object like, object shape)
cpdef object empty_aligned(object shape, object dtype)
cpdef tuple unpack_out(object out, Py_ssize_t n, str name)
cpdef object int64_value(object value, str name)
cpdef bint flag_value(object value, str name) except -1
cpdef double float_value(object value, str name) except? -1
