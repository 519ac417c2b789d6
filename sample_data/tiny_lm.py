"""A tiny byte-level decoder-only transformer, its training text, and an inference engine for it.

Used by ``model_dumps.py`` to make rcdiag dumps whose mismatch comes from real arithmetic. The model
is pre-LN with rotary position embeddings and a head tied to the byte embedding:

.. math::
    h_0 = E[x], \\quad h' = h + \\mathrm{Attn}(\\mathrm{LN}(h)), \\quad
    h_{l+1} = h' + \\mathrm{MLP}(\\mathrm{LN}(h')), \\quad
    \\mathrm{logits} = \\mathrm{LN}(h_L)\\,E^\\top

The engine (:func:`generate`) decodes incrementally with a key/value cache, in the dtype of its
own copy of the weights (bf16, or fp8 serving after :func:`quantize_fp8_`), and samples with
``torch.multinomial``; it returns the log-probability of each sampled token under the
distribution it sampled from (:class:`Sampler`), as inference servers report it.
"""

from __future__ import annotations

import math
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 256
"""Bytes are the tokens."""
EOS = b"\n\n"
"""A response ends with its first blank line (inclusive) or at the length limit."""


@dataclass(frozen=True)
class LMConfig:
    """Shape of the model: ``n_layers`` pre-LN blocks of width ``d_model``, ``max_len`` positions."""

    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    max_len: int = 256


def load_corpus() -> torch.Tensor:
    """The bytes of the standard library's top-level ``.py`` files, sorted by name (uint8 [N]).

    Every Python installation has them, so nothing is downloaded. Files named ``_sysconfigdata*``
    describe the build machine and are skipped.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if not p.name.startswith("_sysconfigdata"))
    data = b"".join(p.read_bytes() for p in files)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding: pairs (x₁, x₂) of the two halves of each head turn by angle pos·θᵢ."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class KVCache:
    """Keys and values of the positions decoded so far, per layer: [B, heads, max_len, head_dim],
    stored in ``dtype`` (read back in the computation's dtype)."""

    def __init__(self, config: LMConfig, batch: int, dtype: torch.dtype) -> None:
        shape = (
            config.n_layers,
            2,
            batch,
            config.n_heads,
            config.max_len,
            config.d_model // config.n_heads,
        )
        self.buffers = torch.zeros(shape, dtype=dtype)
        self.length = 0


class Block(nn.Module):
    """One pre-LN transformer block: causal self-attention then a GELU MLP, each residual."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        d = config.d_model
        self.heads = config.n_heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: torch.Tensor | None,
        start: int,
    ) -> torch.Tensor:
        batch, length, d = x.shape
        q, k, v = (
            self.qkv(self.ln1(x)).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        )
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if cache is not None:  # cache[0] holds keys, cache[1] values, of positions < start
            cache[0, :, :, start : start + length] = k
            cache[1, :, :, start : start + length] = v
            k = cache[0, :, :, : start + length].to(q.dtype)
            v = cache[1, :, :, : start + length].to(q.dtype)
        # a prefill (start 0) is causal; one new token may see every cached position
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=start == 0 and length > 1)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, length, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyLM(nn.Module):
    """Byte-level decoder-only transformer (module docstring: the architecture)."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(VOCAB, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        head_dim = config.d_model // config.n_heads
        inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(config.max_len).float(), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.kv_dtype: torch.dtype | None = None
        """What an inference key/value cache stores keys and values in; None: the weights' dtype."""

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Logits [B, T, 256] of the next byte after each position of ``tokens`` [B, T].

        With ``cache``, ``tokens`` continue the cached positions (a prefill when it is empty)
        and the cache is extended.
        """
        start = 0 if cache is None else cache.length
        length = tokens.shape[1]
        x = self.embed(tokens)
        cos = self.cos[start : start + length].to(x.dtype)
        sin = self.sin[start : start + length].to(x.dtype)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, None if cache is None else cache.buffers[i], start)
        if cache is not None:
            cache.length += length
        return self.ln_f(x) @ self.embed.weight.T


def lm_loss(model: TinyLM, tokens: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross-entropy (nats) of ``tokens`` [B, T]."""
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


def random_windows(
    corpus: torch.Tensor, count: int, length: int, generator: torch.Generator
) -> torch.Tensor:
    """``count`` windows of ``length`` bytes at seeded random offsets, as int64 [count, length]."""
    starts = torch.randint(0, corpus.numel() - length, (count,), generator=generator)
    return corpus[starts[:, None] + torch.arange(length)].long()


def pretrain(
    model: TinyLM,
    corpus: torch.Tensor,
    steps: int,
    generator: torch.Generator,
    batch: int = 32,
    length: int = 128,
    lr: float = 3e-3,
) -> list[float]:
    """Language-model training with AdamW, linear warm-up then cosine decay; per-step losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / steps)),
    )
    losses = []
    for _ in range(steps):
        loss = lm_loss(model, random_windows(corpus, batch, length + 1, generator))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


@dataclass(frozen=True)
class Sampler:
    """How the engine samples and which log-probs it reports.

    ``temperature`` divides the logits and ``top_p`` keeps the smallest set of most likely bytes
    whose probability reaches it; the reported log-prob is that of the distribution actually
    sampled from (vLLM's ``processed_logprobs``), which is the model's own distribution only
    when ``temperature`` is 1 and ``top_p`` is 1 (``raw_logprobs``).
    """

    temperature: float = 1.0
    top_p: float = 1.0

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """log p of the sampling distribution, float32 [B, 256], from logits [B, 256].

        .. math:: \\log p_i = z_i/T - \\log\\textstyle\\sum_{j \\in N} e^{z_j/T} \\ (i \\in N),
            \\quad -\\infty \\ (i \\notin N)

        where N is the top-p nucleus (every byte when ``top_p`` is 1).
        """
        logp = torch.log_softmax(logits.float() / self.temperature, dim=-1)
        if self.top_p >= 1.0:
            return logp
        sorted_logp, order = logp.sort(dim=-1, descending=True)
        mass_before = sorted_logp.exp().cumsum(dim=-1) - sorted_logp.exp()
        outside = torch.zeros_like(logp, dtype=torch.bool)
        outside.scatter_(-1, order, mass_before >= self.top_p)
        return torch.log_softmax(logp.masked_fill(outside, -math.inf), dim=-1)


def blank_lines(responses: torch.Tensor) -> torch.Tensor:
    """[B, L] bool: True where a byte and the one before it are both newlines (an EOS ends)."""
    newline = responses == EOS[0]
    ends = torch.zeros_like(newline)
    ends[:, 1:] = newline[:, 1:] & newline[:, :-1]
    return ends


def response_mask(responses: torch.Tensor) -> torch.Tensor:
    """Valid positions of responses [B, L]: up to and including the first blank line (EOS)."""
    ends = blank_lines(responses)
    return (ends.cumsum(dim=1) - ends.long()) == 0


@torch.no_grad()
def generate(
    engine: TinyLM,
    prompts: torch.Tensor,
    max_new: int,
    sampler: Sampler,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample responses to ``prompts`` [B, P] with a key/value cache (in ``engine.kv_dtype`` if
    set, else the engine's dtype).

    Returns the sampled bytes [B, L] and the engine's log-prob of each, float32 [B, L]
    (``Sampler.log_probs`` of the engine's logits). Decoding stops once every response holds a
    blank line, so L ≤ ``max_new``; bytes after a response's end are sampled but not used.
    """
    dtype = next(engine.parameters()).dtype
    cache = KVCache(engine.config, prompts.shape[0], engine.kv_dtype or dtype)
    logits = engine(prompts, cache)[:, -1]
    tokens = torch.empty(prompts.shape[0], 0, dtype=torch.long)
    log_probs = []
    for _ in range(max_new):
        logp = sampler.log_probs(logits)
        token = torch.multinomial(logp.exp(), 1, generator=generator)
        tokens = torch.cat([tokens, token], dim=1)
        log_probs.append(logp.gather(1, token))
        if blank_lines(tokens).any(dim=1).all():
            break
        logits = engine(token, cache)[:, -1]
    return tokens, torch.cat(log_probs, dim=1)


FP8_MAX = 448.0
"""Largest finite float8_e4m3fn value."""


def round_fp8(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``x`` rounded through float8_e4m3fn with one scale per slice along ``dim``:
    s = max|x| / 448 over the slice, x ← s · fp8(x / s), returned in ``x``'s dtype."""
    scale = x.float().abs().amax(dim=dim, keepdim=True).clamp(min=1e-12) / FP8_MAX
    return ((x.float() / scale).to(torch.float8_e4m3fn).float() * scale).to(x.dtype)


def quantize_fp8_(model: TinyLM) -> TinyLM:
    """Make ``model`` compute as fp8 serving does (W8A8 linear layers, fp8 key/value cache), in
    place.

    Weights are rounded through fp8 with one scale per output channel; each linear layer's input
    is rounded through fp8 with one scale per token, dynamically, before the matmul (which runs
    in the model's dtype on the dequantised values). The key/value cache stores fp8 with scale 1
    (the default when no scales are calibrated). Embedding, head and LayerNorms keep their
    precision.
    """
    model.kv_dtype = torch.float8_e4m3fn
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(round_fp8(module.weight, dim=1))
                module.register_forward_pre_hook(lambda _, args: (round_fp8(args[0], dim=-1),))
    return model
