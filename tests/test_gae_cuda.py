"""The fused CUDA kernel against the float64 reference (skipped without a GPU)."""

import pytest
import torch

from ppo_bootstrap import compute_gae, compute_gae_reference
from ppo_bootstrap import gae_triton

pytestmark = pytest.mark.skipif(not gae_triton.available(), reason="needs CUDA and Triton")


@pytest.mark.parametrize("T,N,p", [(24, 4096, 0.02), (64, 65536, 0.01), (5, 7, 1.0), (9, 130, 0.0), (1, 1, 0.5), (100, 33, 0.05)])
def test_kernel_equals_float64_reference(T, N, p):
    g = torch.Generator().manual_seed(T + N)
    r, v, nv = (torch.randn(T, N, generator=g, dtype=torch.float64) for _ in range(3))
    term = torch.rand(T, N, generator=g) < p
    trunc = torch.rand(T, N, generator=g) < p
    ref_a, ref_r = compute_gae_reference(r, v, nv, term, trunc, 0.99, 0.95)
    nv[term] = float("nan")  # must not leak
    cuda = [x.float().cuda() for x in (r, v, nv)] + [term.cuda(), trunc.cuda()]
    adv, ret = gae_triton.compute_gae_triton(*cuda, 0.99, 0.95)
    torch.testing.assert_close(adv.cpu().double(), ref_a, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ret.cpu().double(), ref_r, rtol=1e-4, atol=1e-4)


def test_compute_gae_dispatches_to_a_kernel_on_cuda():
    T, N = 24, 64
    r = torch.randn(T, N, device="cuda")
    flags = torch.rand(T, N, device="cuda") < 0.1
    adv, _ = compute_gae(r, r, r, flags, ~flags, 0.99, 0.95)
    ref, _ = compute_gae_reference(r.double().cpu(), r.double().cpu(), r.double().cpu(), flags.cpu(), (~flags).cpu(), 0.99, 0.95)
    torch.testing.assert_close(adv.cpu().double(), ref, rtol=1e-4, atol=1e-4)
