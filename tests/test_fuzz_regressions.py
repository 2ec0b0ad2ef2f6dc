"""Regression tests for the findings of the fuzzers in fuzz/ (see fuzz/README.md).

Each test replays the smallest call that triggered a finding. The normal build checks the
results; the ASan+UBSan run of docs/reliability.md checks the memory and UB side."""
import numpy as np

import aclnn_cpu as ac


def test_prelu_without_elements_and_a_one_element_weight_needs_no_workspace():
    # fuzz_c_api: self [0, 0] with a [1, 1] weight plans a 0-byte workspace; the kernel offset
    # the null workspace pointer (UBSan: "applying non-zero offset to null pointer").
    empty = np.zeros((0, 0), np.float32)
    weight = np.ones((1, 1), np.float32)
    size, executor = ac.aclnnPreluBackwardGetWorkspaceSize(
        empty, empty, weight, np.zeros((0, 0), np.float32), grad_weight := np.full((1, 1), 7, np.float32))
    assert size == 0
    ac.aclnnPreluBackward(None, 0, executor)
    assert grad_weight.tolist() == [[0.0]]


def test_group_norm_with_no_batch_and_huge_c_hxw_returns_at_once():
    # fuzz_c_api: N = 0 makes any C and HxW valid (N * C * HxW == 0 == numel(input)); the kernel
    # multiplied them (signed overflow) and, with only gradInput requested, walked all C channels.
    empty = np.zeros((0,), np.float32)
    grad_input = np.zeros((0,), np.float32)
    size, executor = ac.aclnnGroupNormBackwardGetWorkspaceSize(
        empty, empty, empty, empty, None, 0, 2**50, 2**40, 2**10, [True, False, False],
        grad_input, None, None)
    assert size == 0
    ac.aclnnGroupNormBackward(None, 0, executor)
