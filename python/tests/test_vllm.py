"""attn.vllm_backend against vLLM's own classes (no GPU): skipped, visibly,
when vLLM is not installed. scripts/check-vllm.sh installs the pinned vLLM
into its own venv and runs this file there.

What is checked, for the dense and the MLA backend: every public attribute
of vLLM's base classes (AttentionBackend, AttentionMetadataBuilder,
AttentionImpl and the MLA ones) exists on attn's class, and every
parameter vLLM declares is one attn's method takes by the same name;
``register_backend(AttentionBackendEnum.CUSTOM, path)`` resolves to attn's
class; ``validate_configuration`` accepts Hopper configurations and refuses
what attn does not run; the metadata builder, made from vLLM's
``FullAttentionSpec`` / ``MLAAttentionSpec`` and ``VllmConfig``, builds from
vLLM's ``CommonAttentionMetadata`` on CPU tensors.
"""
import inspect

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (scripts/check-vllm.sh)")
torch = pytest.importorskip("torch")

import attn.vllm_backend as vb  # noqa: E402

from vllm.v1.attention.backends.registry import (  # noqa: E402
    AttentionBackendEnum, register_backend)

try:  # where vLLM keeps the interface moved between releases
    from vllm.v1.attention.backend import (  # noqa: E402
        AttentionBackend, AttentionImpl, AttentionMetadataBuilder, CommonAttentionMetadata)
except ImportError:  # pragma: no cover
    from vllm.attention.backends.abstract import AttentionBackend, AttentionImpl  # noqa: E402
    from vllm.v1.attention.backends.utils import (  # noqa: E402
        AttentionMetadataBuilder, CommonAttentionMetadata)
from vllm.platforms.interface import DeviceCapability  # noqa: E402


def _public(cls):
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None


def _interface_problems(theirs, ours, skip=()):
    """What vLLM's `theirs` has that attn's `ours` lacks or takes otherwise."""
    problems = []
    for name in _public(theirs):
        if name in skip:
            continue
        if not hasattr(ours, name):
            problems.append("missing %s" % name)
            continue
        want, have = getattr(theirs, name), getattr(ours, name)
        if not callable(want) or isinstance(want, type):
            continue
        wp, hp = _params(want), _params(have)
        if wp is None or hp is None:
            continue
        takes_any = any(p.kind == p.VAR_KEYWORD for p in hp.values())
        for pname, p in wp.items():
            if pname in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if pname not in hp and not takes_any:
                problems.append("%s: no parameter %s" % (name, pname))
        for pname, p in hp.items():
            if (p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                    and pname not in ("self", "cls") and pname not in wp):
                problems.append("%s: requires %s, which vLLM does not pass" % (name, pname))
    return problems


def test_vllm_version_is_one_the_docs_name():
    # docs/python.md names the checked release; a different one is a new
    # check, not a silent pass.
    assert vllm.__version__ == vb.CHECKED_VLLM_VERSION, (
        "installed vLLM %s, checked %s" % (vllm.__version__, vb.CHECKED_VLLM_VERSION))


@pytest.mark.parametrize("ours", [vb.AttnBackend, vb.AttnMLABackend],
                         ids=["dense", "mla"])
def test_backend_has_vllms_interface(ours):
    assert _interface_problems(AttentionBackend, ours) == []


def test_builders_and_impls_have_vllms_interface():
    assert _interface_problems(AttentionMetadataBuilder, vb.AttnMetadataBuilder) == []
    assert _interface_problems(AttentionMetadataBuilder, vb.AttnMLAMetadataBuilder) == []
    assert _interface_problems(AttentionImpl, vb.AttnImpl) == []
    from vllm.v1.attention.backend import MLAAttentionImpl
    assert _interface_problems(MLAAttentionImpl, vb.AttnMLAImpl) == []


@pytest.mark.parametrize("path,cls", [("attn.vllm_backend.AttnBackend", vb.AttnBackend),
                                      ("attn.vllm_backend.AttnMLABackend", vb.AttnMLABackend)],
                         ids=["dense", "mla"])
def test_register_backend_resolves(path, cls):
    register_backend(AttentionBackendEnum.CUSTOM, path)
    assert AttentionBackendEnum.CUSTOM.get_class() is cls
    assert AttentionBackendEnum.CUSTOM.get_path() == path


def _validate(cls, **overrides):
    args = dict(head_size=128, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16,
                use_mla=False, has_sink=False, use_sparse=False, use_mm_prefix=False,
                use_per_head_quant_scales=False, device_capability=DeviceCapability(9, 0),
                attn_type="decoder")
    args.update(overrides)
    accepted = set(inspect.signature(AttentionBackend.validate_configuration).parameters)
    return cls.validate_configuration(**{k: v for k, v in args.items() if k in accepted})


def test_validate_configuration_on_hopper():
    for kv in ("auto", "fp8", "fp8_e4m3", "fp8_e5m2"):
        for head_size in (64, 128, 256):
            assert _validate(vb.AttnBackend, kv_cache_dtype=kv, head_size=head_size) == []
    assert _validate(vb.AttnBackend, has_sink=True) == []
    assert _validate(vb.AttnBackend, use_mla=True) != []
    assert _validate(vb.AttnBackend, head_size=100) != []
    assert _validate(vb.AttnBackend, device_capability=DeviceCapability(7, 5)) != []
    assert _validate(vb.AttnBackend, attn_type="encoder_decoder") != []
    mla = dict(use_mla=True, head_size=576)
    assert _validate(vb.AttnMLABackend, **mla) == []
    assert _validate(vb.AttnMLABackend, **mla, kv_cache_dtype="fp8") == []
    assert _validate(vb.AttnMLABackend) != []  # not MLA


def test_batch_invariant_mode_follows_vllms_flag(monkeypatch):
    # vLLM's own flag (vllm.envs.VLLM_BATCH_INVARIANT) turns attn's knob
    # on; both backends pass vLLM's batch-invariance check.
    import vllm.envs as envs
    if "use_batch_invariant" in inspect.signature(
            AttentionBackend.validate_configuration).parameters:
        assert _validate(vb.AttnBackend, use_batch_invariant=True) == []
        assert _validate(vb.AttnMLABackend, use_mla=True, head_size=576,
                         use_batch_invariant=True) == []
    for value in ("1", "0"):
        monkeypatch.setenv("VLLM_BATCH_INVARIANT", value)
        if hasattr(envs, "cache_clear"):  # vLLM may cache its env reads
            envs.cache_clear()
        assert vb._batch_invariant() == bool(envs.VLLM_BATCH_INVARIANT) == (value == "1")
        impl = vb.AttnImpl(8, 128, 0.1, 2)
        assert impl._variant("bfloat16", 16, "NHD").knobs.batch_invariant == (value == "1")


def _common_metadata(query_lens, seq_lens, block_size, pages_per_request):
    """vLLM's CommonAttentionMetadata of a step, on CPU tensors."""
    qsl = [0]
    for q in query_lens:
        qsl.append(qsl[-1] + q)
    n = len(query_lens)
    tables = torch.arange(n * pages_per_request, dtype=torch.int32).reshape(n, -1)
    slots = []
    for r, (q, s) in enumerate(zip(query_lens, seq_lens)):
        for pos in range(s - q, s):
            slots.append(int(tables[r, pos // block_size]) * block_size + pos % block_size)
    fields = dict(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32),
        query_start_loc_cpu=torch.tensor(qsl, dtype=torch.int32),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
        num_reqs=n, num_actual_tokens=qsl[-1], max_query_len=max(query_lens),
        max_seq_len=max(seq_lens), block_table_tensor=tables,
        slot_mapping=torch.tensor(slots, dtype=torch.int64), causal=True)
    accepted = {p for p in inspect.signature(CommonAttentionMetadata).parameters}
    missing = [p.name for p in inspect.signature(CommonAttentionMetadata).parameters.values()
               if p.default is p.empty and p.name not in fields]
    assert not missing, "CommonAttentionMetadata needs %s" % missing
    return CommonAttentionMetadata(**{k: v for k, v in fields.items() if k in accepted})


def _vllm_config():
    from vllm.config import CompilationConfig, DeviceConfig, SchedulerConfig, VllmConfig
    sched = SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=4096, max_model_len=8192,
                            is_encoder_decoder=False)
    return VllmConfig(scheduler_config=sched, compilation_config=CompilationConfig(),
                      device_config=DeviceConfig(device="cpu"))


def test_builder_builds_from_vllms_common_metadata():
    from vllm.v1.kv_cache_interface import FullAttentionSpec
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128,
                             dtype=torch.bfloat16)
    builder = vb.AttnMetadataBuilder(spec, ["layers.0.attn"], _vllm_config(),
                                     torch.device("cuda:0"))
    assert builder.block_size == 16
    assert builder.max_num_seqs == 64 and builder.max_num_batched_tokens == 4096
    # Two prefills (one over a cached prefix), then three one-token decodes.
    cm = _common_metadata([7, 20, 1, 1, 1], [7, 52, 30, 17, 100], 16, 8)
    md = builder.build(0, cm)
    assert (md.num_prefills, md.num_decodes) == (2, 3)
    assert (md.num_prefill_tokens, md.num_decode_tokens) == (27, 3)
    assert md.query_start_loc_cpu == [0, 7, 27, 28, 29, 30]
    assert md.seq_lens_cpu == [7, 52, 30, 17, 100]
    assert md.max_query_len == 20 and md.max_seq_len == 100
    assert md.block_table is cm.block_table_tensor and md.slot_mapping is cm.slot_mapping


def test_mla_builder_builds_from_vllms_common_metadata():
    from vllm.v1.kv_cache_interface import MLAAttentionSpec
    spec = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576,
                            dtype=torch.bfloat16)
    builder = vb.AttnMLAMetadataBuilder(spec, ["layers.0.attn"], _vllm_config(),
                                        torch.device("cuda:0"))
    # vLLM reorders decodes first: two one-token decodes, then a prefill.
    cm = _common_metadata([1, 1, 40], [90, 64, 200], 64, 4)
    md = builder.build(0, cm)
    assert (md.num_decodes, md.num_prefills) == (2, 1)
    assert md.num_decode_tokens == 2 and md.num_prefill_tokens == 40


def test_kv_cache_shape_is_what_attn_documents():
    # vLLM allocates get_kv_cache_shape() permuted by get_kv_cache_stride_order().
    shape = vb.AttnBackend.get_kv_cache_shape(100, 16, 8, 128, "auto")
    assert shape == (2, 100, 16, 8, 128)
    assert vb.AttnBackend.get_kv_cache_stride_order() == tuple(range(5))
    assert vb.AttnMLABackend.get_kv_cache_shape(100, 64, 1, 576, "auto") == (100, 64, 576)
    assert vb.AttnMLABackend.get_kv_cache_stride_order() == tuple(range(3))
