"""Limits: sizes that overflow int64, allocations that cannot be satisfied, arrays the library
cannot address (misaligned, byte-swapped, too many dims). Each is refused with a status or a
MemoryError; nothing crashes and nothing is written to an output."""
from __future__ import annotations

import ctypes
import sys
from ctypes import POINTER, CFUNCTYPE, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p
from pathlib import Path

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import aclnn_cpu as ac

INVALID = 161002


# ---- a DLPack producer of any shape/strides: NumPy refuses arrays whose byte size overflows,
# but a C caller (or a DLPack exporter) can describe one; the library must refuse it itself.
class _DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", _DLDevice), ("ndim", c_int32), ("dtype", _DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class _DLManagedTensor(Structure):
    pass


_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p),
                             ("deleter", CFUNCTYPE(None, POINTER(_DLManagedTensor)))]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]


class FakeTensor:
    """A float tensor over a tiny buffer with whatever dims/strides (in elements) we claim.
    No deleter: this object owns the memory and outlives the call."""

    def __init__(self, shape, strides=None, bits=32, device_type=1):
        self.buffer = np.zeros(8, np.float64)
        n = len(shape)
        strides = (0,) * n if strides is None else strides
        self._shape = (c_int64 * max(n, 1))(*shape)
        self._strides = (c_int64 * max(n, 1))(*strides)
        self._managed = _DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self.buffer.ctypes.data
        t.device = _DLDevice(device_type, 0)
        t.ndim = n
        t.dtype = _DLDataType(2, bits, 1)  # kDLFloat
        t.shape = ctypes.cast(self._shape, POINTER(c_int64))
        t.strides = ctypes.cast(self._strides, POINTER(c_int64))
        self.device_type = device_type

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)


def _status_of(call):
    with pytest.raises(ac.AclnnError) as info:
        call()
    return info.value.status


# Two-phase planning of each op with every tensor slot filled by `make(role)`.
def _plan_softmax(t):
    return ac.aclnnSoftmaxBackwardGetWorkspaceSize(t("a"), t("a"), 0, t("a"))


def _plan_prelu(t):
    return ac.aclnnPreluBackwardGetWorkspaceSize(t("a"), t("a"), np.ones(1, np.float32), t("a"),
                                                 np.zeros(1, np.float32))


def _plan_group_norm(t):
    return ac.aclnnGroupNormBackwardGetWorkspaceSize(
        t("a"), t("a"), np.zeros(2, np.float32), np.ones(2, np.float32), None, 2, 2, 1, 1,
        (True, False, False), t("a"), None, None)


def _plan_grid_sampler(t):
    return ac.aclnnGridSampler2DBackwardGetWorkspaceSize(
        t("a"), t("a"), np.zeros((1, 1, 1, 2), np.float32), 0, 0, False, (True, False), t("a"), None)


PLANNERS = [_plan_softmax, _plan_prelu, _plan_group_norm, _plan_grid_sampler]


@pytest.mark.parametrize("plan", PLANNERS, ids=lambda f: f.__name__[6:])
@pytest.mark.parametrize("shape", [(2**31, 2**31, 4), (2**62, 4), (3, 2**62, 5, 1)])
def test_element_count_overflowing_int64_is_invalid(plan, shape):
    big = FakeTensor(shape)
    assert _status_of(lambda: plan(lambda role: big)) == INVALID


@pytest.mark.parametrize("plan", PLANNERS, ids=lambda f: f.__name__[6:])
@pytest.mark.parametrize("shape,bits", [((2**31, 2**31), 32), ((2**61, 2), 16), ((2**30, 2**30, 4), 64)])
def test_byte_size_overflowing_int64_is_invalid(plan, shape, bits):
    big = FakeTensor(shape, bits=bits)
    assert _status_of(lambda: plan(lambda role: big)) == INVALID


@pytest.mark.parametrize("strides", [(1, 2**62), (1, -(2**62)), (2**61, 1), (-(2**63) + 1, 1)])
def test_strides_addressing_beyond_int64_are_invalid(strides):
    x = np.zeros((2, 2), np.float32)
    far = FakeTensor((2, 2), strides)
    assert _status_of(lambda: ac.aclnnSoftmaxBackwardGetWorkspaceSize(far, x, 0, np.zeros_like(x))) == INVALID
    out = np.full((2, 2), 7.0, np.float32)
    assert _status_of(lambda: ac.aclnnSoftmaxBackwardGetWorkspaceSize(x, x, 0, far)) == INVALID
    assert (out == 7.0).all()


def test_negative_dims_are_invalid():
    neg = FakeTensor((2, -3), (1, 1))
    assert _status_of(lambda: _plan_softmax(lambda role: neg)) == INVALID


def test_non_cpu_dlpack_device_is_invalid():
    gpu = FakeTensor((2, 2), (2, 1), device_type=2)
    assert _status_of(lambda: _plan_softmax(lambda role: gpu)) == INVALID


def test_huge_zero_stride_inputs_give_memory_error_not_a_crash_for_the_two_phase_api():
    # 2**60 float32 elements = 4 EiB as a view of one element: the shape is legal, the output
    # cannot exist. A zero-stride output overlaps itself and is refused.
    big = as_strided(np.zeros(1, np.float32), shape=(2**60,), strides=(0,))
    out = as_strided(np.zeros(1, np.float32), shape=(2**60,), strides=(0,))
    assert _status_of(lambda: ac.aclnnSoftmaxBackwardGetWorkspaceSize(big, big, 0, out)) == INVALID


def test_functional_output_that_cannot_be_allocated_raises_memory_error():
    big = as_strided(np.zeros(1, np.float32), shape=(2**60,), strides=(0,))
    with pytest.raises(MemoryError):
        ac.softmax_backward(big, big, 0)


def test_functional_output_that_cannot_be_allocated_never_crashes():
    big = as_strided(np.zeros(1, np.float32), shape=(2**40, 2**20), strides=(0, 0))
    for call in (lambda: ac.softmax_backward(big, big, 1),
                 lambda: ac.prelu_backward(big, big, np.ones(1, np.float32))):
        with pytest.raises((MemoryError, ac.AclnnError)):
            call()


def _core_library():
    return ctypes.CDLL(str(Path(ac.get_library_dir()) / "libaclnn_cpu.so"))


def test_c_runtime_allocation_that_cannot_be_satisfied_returns_the_runtime_code():
    lib = _core_library()
    lib.aclrtMalloc.argtypes = [POINTER(c_void_p), ctypes.c_size_t, ctypes.c_int]
    lib.aclrtMalloc.restype = ctypes.c_int
    for size in (2**64 - 1, 2**63, 2**62):
        ptr = c_void_p(None)
        assert lib.aclrtMalloc(ctypes.byref(ptr), size, 0) == 207001  # ACL_ERROR_RT_MEMORY_ALLOCATION
        assert ptr.value is None


def test_c_create_tensor_with_overflowing_dims_returns_null():
    lib = _core_library()
    lib.aclCreateTensor.restype = c_void_p
    lib.aclCreateTensor.argtypes = [POINTER(c_int64), c_uint64, ctypes.c_int, POINTER(c_int64), c_int64,
                                    ctypes.c_int, POINTER(c_int64), c_uint64, c_void_p]
    dims = (c_int64 * 3)(2**31, 2**31, 4)
    strides = (c_int64 * 3)(0, 0, 0)
    buf = np.zeros(1, np.float32)
    assert lib.aclCreateTensor(dims, 3, 0, strides, 0, 2, dims, 3, buf.ctypes.data) is None


# ---- arrays the kernels cannot address -------------------------------------------------------
def _misaligned(shape, dtype):
    raw = np.zeros(int(np.prod(shape)) * np.dtype(dtype).itemsize + 1, np.uint8)
    return np.frombuffer(raw.data, dtype=dtype, count=int(np.prod(shape)), offset=1).reshape(shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_misaligned_arrays_are_refused(dtype):
    good = np.ones((3, 4), dtype)
    bad = _misaligned((3, 4), dtype)
    assert bad.ctypes.data % np.dtype(dtype).itemsize != 0
    for args in ((bad, good), (good, bad)):
        with pytest.raises(ac.AclnnError) as info:
            ac.softmax_backward(*args, 1)
        assert info.value.status == INVALID and "aligned" in str(info.value)
    out = _misaligned((3, 4), dtype)
    before = out.tobytes()
    with pytest.raises(ac.AclnnError) as info:
        ac.softmax_backward(good, good, 1, out=out)
    assert info.value.status == INVALID
    assert out.tobytes() == before


def test_strides_that_are_not_a_multiple_of_the_item_size_are_refused():
    raw = np.zeros(64, np.uint8)
    odd = as_strided(raw[:4].view(np.float32), shape=(3, 2), strides=(12, 6))
    assert _status_of(lambda: ac.softmax_backward(odd, odd, 1)) == INVALID


def test_non_native_byte_order_is_refused():
    order = ">" if sys.byteorder == "little" else "<"
    native = np.ones((2, 3), np.float32)
    swapped = native.astype(native.dtype.newbyteorder(order))
    assert not swapped.dtype.isnative
    with pytest.raises(ac.AclnnError) as info:
        ac.softmax_backward(swapped, native, 1)
    assert info.value.status == INVALID and "byte order" in str(info.value)
    out = np.full((2, 3), 5.0, np.float32).astype(np.dtype(np.float32).newbyteorder(order))
    with pytest.raises(ac.AclnnError):
        ac.softmax_backward(native, native, 1, out=out)
    assert (out == 5.0).all()


@pytest.mark.parametrize("ndim", [9, 16, 32, 64])
def test_more_than_eight_dims_are_invalid(ndim):
    x = np.ones((1,) * ndim, np.float32)
    assert _status_of(lambda: ac.softmax_backward(x, x, 0)) == INVALID
    assert _status_of(lambda: ac.prelu_backward(x, x, np.ones(1, np.float32))) == INVALID


def test_unsupported_dtypes_are_invalid():
    for dtype in (np.float64, np.int32, np.int8, np.bool_, np.complex64, np.uint16):
        x = np.ones((2, 3), dtype)
        assert _status_of(lambda: ac.softmax_backward(x, x, 1)) == INVALID
