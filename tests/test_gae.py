"""GAE with separate termination and truncation, against hand-derived values and a float64 loop."""

import math

import pytest
import torch

from ppo_bootstrap import assemble_next_values, compute_gae, compute_gae_reference

GAMMA, LAM = 0.9, 0.8

REWARDS = torch.tensor([[1.0], [2.0], [3.0]])
VALUES = torch.tensor([[0.5], [1.0], [1.5]])
NEXT_VALUES = torch.tensor([[1.0], [1.5], [2.0]])


def flags(*steps: int, T: int = 3) -> torch.Tensor:
    out = torch.zeros(T, 1, dtype=torch.bool)
    for t in steps:
        out[t] = True
    return out


@pytest.mark.parametrize("gae", [compute_gae, compute_gae_reference])
def test_no_done_matches_hand_computation(gae):
    # delta = (1.4, 2.35, 3.3); A2 = 3.3, A1 = 2.35 + 0.72 * 3.3, A0 = 1.4 + 0.72 * A1
    adv, ret = gae(REWARDS, VALUES, NEXT_VALUES, flags(), flags(), GAMMA, LAM)
    expected = torch.tensor([[4.80272], [4.726], [3.3]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + VALUES)


@pytest.mark.parametrize("gae", [compute_gae, compute_gae_reference])
def test_termination_cuts_bootstrap_and_trace(gae):
    adv, _ = gae(REWARDS, VALUES, NEXT_VALUES, flags(1), flags(), GAMMA, LAM)
    # delta1 = r1 - V1 = 1.0 (no bootstrap); the trace from t=2 stops at t=1.
    torch.testing.assert_close(adv, torch.tensor([[1.4 + 0.72 * 1.0], [1.0], [3.3]]))


@pytest.mark.parametrize("gae", [compute_gae, compute_gae_reference])
def test_truncation_bootstraps_but_cuts_trace(gae):
    adv, _ = gae(REWARDS, VALUES, NEXT_VALUES, flags(), flags(1), GAMMA, LAM)
    # delta1 keeps gamma * next_values[1] = 0.9 * 1.5; only the trace is cut.
    torch.testing.assert_close(adv, torch.tensor([[1.4 + 0.72 * 2.35], [2.35], [3.3]]))


@pytest.mark.parametrize("gae", [compute_gae, compute_gae_reference])
def test_both_flags_means_terminated(gae):
    both, _ = gae(REWARDS, VALUES, NEXT_VALUES, flags(1), flags(1), GAMMA, LAM)
    term, _ = gae(REWARDS, VALUES, NEXT_VALUES, flags(1), flags(), GAMMA, LAM)
    torch.testing.assert_close(both, term)
    assert both[1, 0].item() == pytest.approx(1.0)


@pytest.mark.parametrize("gae", [compute_gae, compute_gae_reference])
def test_nan_next_value_at_termination_does_not_leak(gae):
    next_values = NEXT_VALUES.clone()
    next_values[1] = float("nan")
    next_values[2] = float("inf")
    adv, ret = gae(REWARDS, VALUES, next_values, flags(1, 2), flags(), GAMMA, LAM)
    assert torch.isfinite(adv).all() and torch.isfinite(ret).all()
    torch.testing.assert_close(adv, torch.tensor([[1.4 + 0.72 * 1.0], [1.0], [1.5]]))


def test_sequence_equals_its_halves_split_at_a_done():
    torch.manual_seed(0)
    T, N, split = 10, 5, 4
    r, v, nv = torch.randn(T, N), torch.randn(T, N), torch.randn(T, N)
    term = torch.zeros(T, N, dtype=torch.bool)
    trunc = torch.zeros(T, N, dtype=torch.bool)
    trunc[split - 1, :3] = True
    term[split - 1, 3:] = True
    adv, ret = compute_gae(r, v, nv, term, trunc, 0.97, 0.9)
    a1, r1 = compute_gae(r[:split], v[:split], nv[:split], term[:split], trunc[:split], 0.97, 0.9)
    a2, r2 = compute_gae(r[split:], v[split:], nv[split:], term[split:], trunc[split:], 0.97, 0.9)
    torch.testing.assert_close(adv, torch.cat([a1, a2]))
    torch.testing.assert_close(ret, torch.cat([r1, r2]))


def _random_case(T, N, p_term, p_trunc, seed, trailing=()):
    g = torch.Generator().manual_seed(seed)
    shape = (T, N, *trailing)
    r = torch.randn(shape, generator=g, dtype=torch.float64)
    v = torch.randn(shape, generator=g, dtype=torch.float64)
    nv = torch.randn(shape, generator=g, dtype=torch.float64)
    term = torch.rand(T, N, generator=g) < p_term
    trunc = torch.rand(T, N, generator=g) < p_trunc
    return r, v, nv, term, trunc


@pytest.mark.parametrize(
    "T,N,p_term,p_trunc,trailing",
    [(24, 64, 0.05, 0.05, ()), (7, 3, 1.0, 1.0, ()), (7, 3, 0.0, 1.0, ()), (16, 8, 0.0, 0.0, ()),
     (1, 4, 0.5, 0.5, ()), (12, 6, 0.1, 0.2, (3,))],
)
def test_fast_equals_float64_reference(T, N, p_term, p_trunc, trailing):
    r, v, nv, term, trunc = _random_case(T, N, p_term, p_trunc, seed=T * 100 + N, trailing=trailing)
    ref_a, ref_r = compute_gae_reference(r, v, nv, term, trunc, 0.99, 0.95)
    adv, ret = compute_gae(r.float(), v.float(), nv.float(), term, trunc, 0.99, 0.95)
    torch.testing.assert_close(adv, ref_a.float(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ret, ref_r.float(), rtol=1e-5, atol=1e-4)


def test_closed_form_constant_reward_no_done():
    # r = 1, V = 0, next V = 0, no done: A_t = sum_k (gamma*lam)^k delta, delta = 1.
    T, gl = 20, 0.99 * 0.95
    z = torch.zeros(T, 1)
    adv, _ = compute_gae(torch.ones(T, 1), z, z, z.bool(), z.bool(), 0.99, 0.95)
    expected = torch.tensor([[(1 - gl ** (T - t)) / (1 - gl)] for t in range(T)])
    torch.testing.assert_close(adv, expected)


def test_inputs_are_not_modified():
    r, v, nv, term, trunc = _random_case(6, 4, 0.2, 0.2, seed=3)
    copies = [x.clone() for x in (r, v, nv, term, trunc)]
    compute_gae(r, v, nv, term, trunc, 0.99, 0.95)
    for a, b in zip((r, v, nv, term, trunc), copies):
        assert torch.equal(a, b)


def test_shape_and_dtype_errors_name_the_field():
    r = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="terminated"):
        compute_gae(r, r, r, torch.zeros(4, 2), torch.zeros(4, 2, dtype=torch.bool), 0.99, 0.95)
    with pytest.raises(ValueError, match="truncated"):
        compute_gae(r, r, r, torch.zeros(4, 2, dtype=torch.bool), torch.zeros(3, 2, dtype=torch.bool), 0.99, 0.95)


def test_assemble_next_values_uses_final_not_reset_values():
    values = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])  # V(s_t); env 1 reset after t=0
    last = torch.tensor([4.0, 40.0])
    nv = assemble_next_values(values, last, torch.tensor([-7.0]), torch.tensor([0]), torch.tensor([1]))
    torch.testing.assert_close(nv, torch.tensor([[2.0, -7.0], [3.0, 30.0], [4.0, 40.0]]))
    assert not math.isclose(nv[0, 1].item(), values[1, 1].item())
