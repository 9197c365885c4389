"""A failed check says where the output is off and, when a simple mistake explains it, which one.

Every wrong output here is built by hand, the way a kernel making that mistake would compute it
(its own precision path, P rounded to bf16, output in bf16), on some sequences only: the reason
must name the mistake and exactly those sequences."""

import math

import pytest
import torch

import reference as R
from harness.task.quant import dequantize_mxfp4
from harness.task.verdict import index_ranges

CPU = torch.device("cpu")
RAGGED = 2        # task.yml's cpu tests: 5 sequences of KV lengths 1, 37, 130, 64, 7
TWO_ROWS = 1      # 2 sequences of 96 KV rows, 2 query rows each
WRONG = [1, 4]    # the sequences the mistakes are made on (37 and 7 KV rows)


@pytest.fixture(scope="module")
def cases(problem):
    """{index: (data, expected, check)} for the two cpu test cases used here, generated once."""
    policy = problem.check_policy
    params = problem.spec.check.policies[policy]
    out = {}
    for index in (TWO_ROWS, RAGGED):
        case = problem.spec.cases("test", small=True)[index]
        data = problem.generate(case.args, case.seed, CPU)
        expected = problem.expected(data)
        out[index] = (data, expected, lambda o, e=expected: R.check_output(o, e, policy, params))
    return out


def kernel(data, seqs, fmt="bf16", qp="bf16", keys=None, scale=None, drop=slice(None), dims=576,
           values=slice(0, 512), normalise=True, kv_of=lambda b: b, heads=slice(None)):
    """An honest kernel on path (fmt, qp), except on sequences `seqs` (and heads `heads`), where it
    reads KV rows `drop` (or drop(length)) of sequence kv_of(b) (as `keys` if given), scores with `dims` dims times
    `scale`, takes V from dims `values` and divides by the sum only if `normalise`."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    keys = (R.dequantized_kv(kv_data, fmt) if keys is None else keys).reshape(-1, 576)
    qf = R.quantized_q(q, qp, kv_data["fp8"][0].dtype)
    scale = config["sm_scale"] if scale is None else scale
    out = R.simulated_kernel(data, fmt, qp)
    for b in seqs:
        c = kv_of(b)
        ks = keys[kvp[c]:kvp[c + 1]]
        ks = ks[drop(len(ks)) if callable(drop) else drop]
        if not len(ks):
            out[qo[b]:qo[b + 1], heads] = 0
            continue
        s = torch.einsum("qhd,kd->qhk", qf[qo[b]:qo[b + 1], :, :dims], ks[:, :dims]) * scale
        p = torch.exp(s - s.amax(-1, keepdim=True))
        o = torch.einsum("qhk,kd->qhd", p.bfloat16().float(), ks[:, values])
        o = o / p.sum(-1, keepdim=True) if normalise else o
        out[qo[b]:qo[b + 1], heads] = o[:, heads].bfloat16()
    return out


def fp8_codes(data):
    return data[1]["fp8"][0].float()


def mxfp4_unscaled(data):
    packed, scales = data[1]["mxfp4"]
    return dequantize_mxfp4(packed, torch.full_like(scales.view(torch.uint8), 127).view(scales.dtype))


def mxfp4_swapped(data):
    packed, scales = data[1]["mxfp4"]
    return dequantize_mxfp4((packed >> 4) | (packed << 4), scales)


def mxfp4_stride_18(data):
    packed, scales = data[1]["mxfp4"]
    rows = packed.shape[0]
    dense = scales.view(torch.uint8).reshape(-1)[:rows * 18].reshape(rows, 18)
    return dequantize_mxfp4(packed, dense.view(scales.dtype))


def fp8_misdecoded(data):
    codes, scale = data[1]["fp8"]
    return codes.view(torch.float8_e4m3fnuz).float().nan_to_num(0.0) * scale


SM = 1 / math.sqrt(576)
MISTAKES = [  # (what the reason must say, how the kernel goes wrong)
    ("the last KV token of each sequence skipped", dict(drop=slice(None, -1))),
    ("the last KV token of each sequence skipped", dict(drop=slice(None, -1), fmt="mxfp4", qp="fp8")),
    ("the first KV token of each sequence skipped", dict(drop=slice(1, None), fmt="fp8")),
    ("each sequence's partial last KV block skipped (blocks of 16 or 32)", dict(drop=lambda n: slice(0, n - n % 32))),
    ("softmax without sm_scale", dict(scale=1.0)),
    ("softmax without sm_scale", dict(scale=1.0, fmt="mxfp4")),
    ("sm_scale applied twice", dict(scale=SM * SM, fmt="fp8", qp="fp8")),
    ("scores without the 64 RoPE dims", dict(dims=512)),
    ("V from dims 64-575 instead of 0-511", dict(values=slice(64, 576))),
    ("softmax not normalised", dict(normalise=False, fmt="fp8")),
    ("the mean of V", dict(scale=0.0)),
    ("each sequence attending to the next sequence's KV rows", dict(kv_of=lambda b: b + 1 if b < 4 else 0)),
    ("each sequence attending to the previous sequence's KV rows", dict(kv_of=lambda b: b - 1)),
    ("fp8 KV without its per-tensor scale", dict(fmt="fp8", keys=fp8_codes)),
    ("fp8 KV bytes decoded as float8_e4m3fnuz", dict(fmt="fp8", keys=fp8_misdecoded)),
    ("mxfp4 KV without its e8m0 block scales", dict(fmt="mxfp4", keys=mxfp4_unscaled)),
    ("mxfp4 nibbles swapped", dict(fmt="mxfp4", keys=mxfp4_swapped)),
    ("mxfp4 scales read with a row stride of 18", dict(fmt="mxfp4", keys=mxfp4_stride_18)),
]


@pytest.mark.parametrize("named, how", MISTAKES, ids=[f"{n[:24]}-{h.get('fmt', 'bf16')}" for n, h in MISTAKES])
def test_a_mistake_on_some_sequences_is_named_with_those_sequences(cases, named, how):
    data, _, check = cases[RAGGED]
    how = dict(how)
    if callable(how.get("keys")):
        how["keys"] = how["keys"](data)
    ok, reason = check(kernel(data, WRONG, **how))
    assert not ok and reason.startswith("output differs from the reference; ")
    assert f"looks like {named}" in reason and "off in sequences 1, 4 (of 5), " in reason, reason
    assert "closest is kv=" in reason and len(reason) <= 300, reason


@pytest.mark.parametrize("where", [RAGGED, TWO_ROWS])
def test_zeros_and_another_sequences_rows_are_named(cases, where):
    data, expected, check = cases[where]
    honest = R.simulated_kernel(data, "bf16", "bf16")
    qo = data[2].tolist()
    ok, reason = check(torch.zeros_like(honest))
    assert not ok and "looks like all zeros" in reason and "off in all" in reason, reason
    shifted = honest.clone()
    shifted[qo[0]:qo[1]] = honest[qo[1]:qo[2]]      # sequence 0's rows hold sequence 1's answer
    ok, reason = check(shifted)
    assert "looks like rows holding another sequence's answer (sequence 0 has 1's)" in reason, reason
    assert "off in sequence 0 (of " in reason, reason


def test_a_causal_mask_is_named_with_the_query_rows_it_changes(cases):
    data, _, check = cases[TWO_ROWS]
    out = kernel(data, [0, 1], drop=slice(None, -1))
    qo = data[2].tolist()
    honest = R.simulated_kernel(data, "bf16", "bf16")
    for b in range(2):  # the last query row of each sequence sees every KV row: it stays right
        out[qo[b + 1] - 1] = honest[qo[b + 1] - 1]
    ok, reason = check(out)
    assert "looks like a causal mask over the query rows" in reason, reason
    assert "off in all 2 sequences, " in reason and ", query row 0 of each sequence's 2;" in reason, reason


def test_a_mistake_in_some_heads_names_those_heads(cases):
    data, _, check = cases[RAGGED]
    ok, reason = check(kernel(data, [3], scale=1.0, heads=slice(0, 4)))
    assert "looks like softmax without sm_scale; off in sequence 3 (of 5), heads 0-3 (of 16);" in reason, reason


def test_one_corrupted_sequence_names_that_sequence_and_no_mistake(cases):
    data, _, check = cases[RAGGED]
    out = R.simulated_kernel(data, "mxfp4", "fp8")
    qo = data[2].tolist()
    gen = torch.Generator().manual_seed(0)
    out[qo[3]:qo[4]] += (0.3 * torch.randn(out[qo[3]:qo[4]].shape, generator=gen)).bfloat16()
    ok, reason = check(out)
    assert not ok and "off in sequence 3 (of 5), all 16 heads; closest is" in reason, reason
    assert "looks like" not in reason


@pytest.mark.parametrize("where", [RAGGED, TWO_ROWS])
def test_random_noise_names_no_mistake(cases, where):
    data, _, check = cases[where]
    honest = R.simulated_kernel(data, "bf16", "bf16")
    gen = torch.Generator().manual_seed(1)
    ok, reason = check((honest.float() + 0.2 * torch.randn(honest.shape, generator=gen)).bfloat16())
    assert not ok and "looks like" not in reason and "off in all" in reason, reason
    ok, reason = check(torch.randn(honest.shape, generator=gen).bfloat16())
    assert not ok and "looks like" not in reason, reason


def test_a_passing_output_keeps_its_reason_and_is_not_diagnosed(cases, problem, monkeypatch):
    def no_diagnosis(*args, **kwargs):
        raise AssertionError("the passing path must not diagnose")

    monkeypatch.setattr(R, "diagnosis", no_diagnosis)
    params = problem.spec.check.policies["strict"]
    for data, expected, check in cases.values():
        for fmt in data[1]:
            honest = R.simulated_kernel(data, fmt, "fp8")
            ok, reason = check(honest)
            assert ok and reason == f"matches {R.check_ratio(honest, expected, 'strict', params)[1]}"


def test_an_error_spread_thin_says_so(cases):
    data, expected, check = cases[RAGGED]
    ref = expected["kv=bf16,q=bf16"]
    ok, reason = check((ref * 1.008).bfloat16())   # 0.8% everywhere: over 0.5% overall, under 1.25% per row
    assert not ok and "no single (row, head) is over its bound" in reason, reason


def test_without_the_inputs_the_reason_still_says_which_rows(cases):
    data, expected, _ = cases[RAGGED]
    plain = dict(expected)
    out = kernel(data, [2], scale=1.0)
    ok, reason = R.check_output(out, plain, "strict", {"rel_l2": 0.02, "row_rel_l2": 0.05})
    assert not ok and "off in row 2 (of 5), all 16 heads; closest is" in reason and "looks like" not in reason, reason


def test_the_competition_policy_is_diagnosed_too(cases, problem):
    data, expected, _ = cases[RAGGED]
    params = problem.spec.check.policies["competition"]
    ok, reason = R.check_output(kernel(data, [1, 2], fmt="fp8", qp="fp8", scale=1.0), expected, "competition", params)
    assert not ok and "looks like softmax without sm_scale; off in sequences 1-2 (of 5)" in reason, reason


def test_the_diagnosis_samples_a_bounded_number_of_sequences(monkeypatch):
    data = R.generate_input(20, 1, 16, 3, device="cpu")
    expected = R.reference_outputs(data)
    tried = []
    real = R._mistaken_outputs
    monkeypatch.setattr(R, "_mistaken_outputs", lambda d, sample: tried.append(sample) or real(d, sample))
    ok, reason = R.check_output(torch.zeros(20, 16, 512, dtype=torch.bfloat16), expected,
                                "strict", {"rel_l2": 0.02, "row_rel_l2": 0.05})
    assert not ok and "looks like all zeros; off in all 20 sequences" in reason, reason
    assert len(tried[0]) == R.DIAGNOSIS_SEQUENCES and tried[0][0] == 0 and tried[0][-1] == 19


def test_index_ranges():
    assert index_ranges([7, 0, 1, 2, 3, 9, 10]) == "0-3, 7, 9-10"
    assert index_ranges(range(0, 40, 2), limit=3) == "0, 2, 4 and 17 more"
    assert index_ranges([]) == ""


def test_the_reason_stays_one_bounded_line():
    data = R.generate_input(64, 1, 16, 5, device="cpu")
    expected = R.reference_outputs(data)
    out = expected["kv=bf16,q=bf16"].clone()
    out[::2, ::2] *= -1                      # every other sequence, every other head
    ok, reason = R.check_output(out.bfloat16(), expected, "strict", {"rel_l2": 0.02, "row_rel_l2": 0.05})
    assert not ok and len(reason) <= R.MAX_REASON and "\n" not in reason, reason
    assert ("off in sequences 0, 2, 4, 6, 8, 10 and 26 more (of 64), "
            "heads 0, 2, 4, 6, 8, 10 and 2 more (of 16)") in reason


def test_a_long_or_broken_diagnosis_never_breaks_the_verdict(cases, monkeypatch):
    data, expected, check = cases[RAGGED]
    wrong = kernel(data, WRONG, scale=1.0)
    monkeypatch.setattr(R, "where_off", lambda *a: "x" * 400)
    ok, reason = check(wrong)
    assert not ok and len(reason) <= R.MAX_REASON and "…; closest is kv=" in reason, reason
    monkeypatch.setattr(R, "where_off", lambda *a: 1 / 0)
    ok, reason = check(wrong)
    assert not ok and "no diagnosis (ZeroDivisionError" in reason and "closest is kv=" in reason, reason
    monkeypatch.undo()
    ok, reason = check(torch.full_like(wrong, float("nan")))    # check_implementation can get NaN
    assert not ok and "looks like" not in reason and "off in all 5 sequences" in reason, reason
