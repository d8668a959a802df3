"""A Llama-architecture model in numpy: the GGUF's tokenizer, chat template and forward pass.

Everything the model needs comes from its GGUF file: the weights (dequantised once to
float32, the layout numpy's BLAS multiplies fastest), the byte-level BPE vocabulary and
merges, and the Jinja chat template. The answers are the model's own: greedy decoding
(temperature 0) with llama.cpp's repeat penalty gives the tokens llama.cpp's server
gives for the same request, until the two engines' float rounding first picks apart
two near-equal tokens.

Speed on a laptop CPU: loading takes a few seconds; the prompt runs at a few hundred
tokens a second, the answer at about ten (each token reads all 540 MB of float32
weights once, so memory bandwidth sets the pace).
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias

import jinja2
import jinja2.ext
import jinja2.sandbox
import numpy as np
import numpy.typing as npt
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from gradekit._localmodel._gguf import GgufError, GgufFile, read_gguf
from gradekit._localmodel._server import BadRequest, Sampling

__all__ = ["ChatTemplate", "Llama", "NumpyEngine", "TextTokenizer"]

Floats: TypeAlias = npt.NDArray[np.float32]
CONTROL: Final = 3  # llama.cpp's token types: 3 is a control token (<|im_start|>)
USER_DEFINED: Final = 4
# llama.cpp's pre-tokenizers this engine reproduces: each splits digits one by one or not.
PRE_TOKENIZERS: Final[Mapping[str, bool]] = {"smollm": True, "gpt-2": False, "default": False}


# ---- the tokenizer ------------------------------------------------------------------------


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet back to bytes: each byte is shown as a printable char."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    shown, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            shown[chr(byte)] = byte
        else:
            shown[chr(256 + extra)] = byte
            extra += 1
    return shown


class TextTokenizer:
    """Byte-level BPE from the GGUF's vocabulary and merges (GPT-2 style, as llama.cpp).

    Control tokens in the text (``<|im_start|>``) are read as themselves, as llama.cpp's
    server reads a rendered chat prompt.
    """

    def __init__(self, gguf: GgufFile) -> None:
        if gguf.field("tokenizer.ggml.model") != "gpt2":
            raise GgufError(f"{gguf.path}: only byte-level BPE vocabularies (gpt2) are read")
        pre = gguf.metadata.get("tokenizer.ggml.pre", "default")
        if pre not in PRE_TOKENIZERS:
            raise GgufError(
                f"{gguf.path}: pre-tokenizer {pre!r} is not one this engine "
                f"reproduces ({', '.join(PRE_TOKENIZERS)}): serve it with llama.cpp"
            )
        tokens: list[str] = gguf.field("tokenizer.ggml.tokens")
        kinds: list[int] = gguf.metadata.get("tokenizer.ggml.token_type", [1] * len(tokens))
        merges = [tuple(merge.split(" ", 1)) for merge in gguf.field("tokenizer.ggml.merges")]
        self.tokenizer = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
        splits: list[pre_tokenizers.PreTokenizer] = [
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        ]
        if PRE_TOKENIZERS[pre]:
            splits.insert(0, pre_tokenizers.Digits(individual_digits=True))
        self.tokenizer.pre_tokenizer = pre_tokenizers.Sequence(splits)
        self.tokenizer.decoder = decoders.ByteLevel()
        special = [
            t for t, kind in zip(tokens, kinds, strict=True) if kind in (CONTROL, USER_DEFINED)
        ]
        self.tokenizer.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in special]
        )
        alphabet = _byte_decoder()
        self.pieces = [
            b""
            if kind == CONTROL
            else bytes(alphabet[c] for c in token)
            if all(c in alphabet for c in token)
            else token.encode()
            for token, kind in zip(tokens, kinds, strict=True)
        ]

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``, control tokens included."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def piece(self, token: int) -> bytes:
        """The bytes ``token`` stands for (nothing for a control token)."""
        return self.pieces[token]


# ---- the chat template ---------------------------------------------------------------------


class ChatTemplate:
    """The GGUF's ``tokenizer.chat_template``, rendered as llama-cpp-python renders it."""

    def __init__(self, gguf: GgufFile, tokens: Sequence[str]) -> None:
        source = gguf.field("tokenizer.chat_template")
        environment = jinja2.sandbox.ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols],
        )
        self.template = environment.from_string(source)
        self.bos = tokens[int(gguf.metadata.get("tokenizer.ggml.bos_token_id", 1))]
        self.eos = tokens[int(gguf.metadata.get("tokenizer.ggml.eos_token_id", 2))]

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The prompt text, ending where the assistant's answer starts."""

        def refuse(message: str) -> None:
            raise BadRequest(f"the model's chat template refused the messages: {message}")

        try:
            return str(
                self.template.render(
                    messages=[dict(m) for m in messages],
                    bos_token=self.bos,
                    eos_token=self.eos,
                    add_generation_prompt=True,
                    raise_exception=refuse,
                )
            )
        except jinja2.TemplateError as exc:
            raise BadRequest(
                f"the model's chat template failed on these messages: {exc}; "
                "send role and content strings"
            ) from None


# ---- the network -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """The sizes of a Llama network, from the GGUF's ``llama.*`` metadata."""

    layers: int
    width: int
    heads: int
    kv_heads: int
    head_size: int
    epsilon: float
    rope_base: float

    @classmethod
    def of(cls, gguf: GgufFile) -> Shape:
        arch = gguf.field("general.architecture")
        if arch != "llama":
            raise GgufError(f"{gguf.path}: architecture {arch!r}: this engine runs llama only")
        heads, width = (
            int(gguf.field("llama.attention.head_count")),
            int(gguf.field("llama.embedding_length")),
        )
        return cls(
            layers=int(gguf.field("llama.block_count")),
            width=width,
            heads=heads,
            kv_heads=int(gguf.metadata.get("llama.attention.head_count_kv", heads)),
            head_size=width // heads,
            epsilon=float(gguf.field("llama.attention.layer_norm_rms_epsilon")),
            rope_base=float(gguf.metadata.get("llama.rope.freq_base", 10000.0)),
        )


@dataclass(frozen=True)
class Layer:
    """One block's weights, each matrix (outputs, inputs) and C-contiguous: ``x @ w.T``
    is then one BLAS call on rows read front to back. Q, K and V are one matrix, and so
    are the gate and up projections: fewer, larger multiplications."""

    attn_norm: Floats
    qkv: Floats
    out: Floats
    ffn_norm: Floats
    gate_up: Floats
    down: Floats


def _halves_order(heads: int, size: int) -> npt.NDArray[np.intp]:
    """Row order that turns llama.cpp's rotation of pairs (0,1), (2,3) ... within a head
    into a rotation of halves (0, size/2), (1, size/2+1) ...: contiguous slices, faster.
    Q and K get the same order, so their dot products, the attention, are unchanged."""
    within = np.concatenate([np.arange(0, size, 2), np.arange(1, size, 2)])
    order: npt.NDArray[np.intp] = np.arange(heads)[:, None] * size + within[None, :]
    return order.reshape(-1)


class Llama:
    """The forward pass, with a key/value cache of ``context`` positions."""

    def __init__(self, gguf: GgufFile, *, context: int) -> None:
        self.shape = shape = Shape.of(gguf)
        self.context = context
        weight = {name: tensor.floats() for name, tensor in gguf.tensors.items()}
        q_order = _halves_order(shape.heads, shape.head_size)
        k_order = _halves_order(shape.kv_heads, shape.head_size)
        self.layers = [
            self._layer(weight, f"blk.{i}.", q_order, k_order) for i in range(shape.layers)
        ]
        self.embedding = weight["token_embd.weight"]
        self.head = weight.get("output.weight", self.embedding)  # tied when there is none
        self.final_norm = weight["output_norm.weight"]
        angles = _rope_angles(shape, context)
        self.cos = np.cos(angles).astype(np.float32)
        self.sin = np.sin(angles).astype(np.float32)
        size = (shape.kv_heads, context, shape.head_size)
        self.keys = [np.zeros(size, np.float32) for _ in self.layers]
        self.values = [np.zeros(size, np.float32) for _ in self.layers]

    @staticmethod
    def _layer(
        weight: Mapping[str, Floats],
        prefix: str,
        q_order: npt.NDArray[np.intp],
        k_order: npt.NDArray[np.intp],
    ) -> Layer:
        qkv = np.concatenate(
            [
                weight[prefix + "attn_q.weight"][q_order],
                weight[prefix + "attn_k.weight"][k_order],
                weight[prefix + "attn_v.weight"],
            ]
        )
        gate_up = np.concatenate(
            [weight[prefix + "ffn_gate.weight"], weight[prefix + "ffn_up.weight"]]
        )
        return Layer(
            attn_norm=weight[prefix + "attn_norm.weight"],
            qkv=np.ascontiguousarray(qkv),
            out=np.ascontiguousarray(weight[prefix + "attn_output.weight"]),
            ffn_norm=weight[prefix + "ffn_norm.weight"],
            gate_up=np.ascontiguousarray(gate_up),
            down=np.ascontiguousarray(weight[prefix + "ffn_down.weight"]),
        )

    def _norm(self, x: Floats, weight: Floats) -> Floats:
        mean = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
        scale = (1.0 / np.sqrt(mean + self.shape.epsilon)).astype(np.float32)
        normed: Floats = x * scale * weight
        return normed

    def _rotate(self, x: Floats, start: int) -> Floats:
        """Rotary position embedding of ``x`` (tokens, heads, head_size) from ``start``."""
        count, half = x.shape[0], self.shape.head_size // 2
        cos = self.cos[start : start + count, None, :]
        sin = self.sin[start : start + count, None, :]
        first, second = x[..., :half], x[..., half:]
        return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)

    def forward(self, tokens: Sequence[int], start: int) -> Floats:
        """The logits after ``tokens``, which sit at positions ``start``...; the cache keeps
        their keys and values for the tokens that follow."""
        x = self.embedding[np.asarray(tokens)]
        mask = self._mask(len(tokens), start)
        for number, layer in enumerate(self.layers):
            x = x + self._attention(layer, number, self._norm(x, layer.attn_norm), start, mask)
            h = self._norm(x, layer.ffn_norm)
            gate, up = np.split(h @ layer.gate_up.T, 2, axis=-1)
            x = x + (gate * _sigmoid(gate) * up) @ layer.down.T
        logits: Floats = self.head @ self._norm(x[-1], self.final_norm)
        return logits

    def _mask(self, count: int, start: int) -> Floats | None:
        """-inf where a prompt token would see a later one; None for a single token."""
        if count == 1:
            return None
        seen = np.arange(start + count)[None, :] <= np.arange(start, start + count)[:, None]
        return np.where(seen, np.float32(0.0), np.float32(-np.inf)).astype(np.float32)

    def _attention(
        self, layer: Layer, number: int, h: Floats, start: int, mask: Floats | None
    ) -> Floats:
        s = self.shape
        count, end, group = h.shape[0], start + h.shape[0], s.heads // s.kv_heads
        qkv = h @ layer.qkv.T
        q_end, k_end = s.heads * s.head_size, (s.heads + s.kv_heads) * s.head_size
        q = self._rotate(qkv[:, :q_end].reshape(count, s.heads, s.head_size), start)
        k = self._rotate(qkv[:, q_end:k_end].reshape(count, s.kv_heads, s.head_size), start)
        keys, values = self.keys[number], self.values[number]
        keys[:, start:end] = k.transpose(1, 0, 2)
        values[:, start:end] = (
            qkv[:, k_end:].reshape(count, s.kv_heads, s.head_size).transpose(1, 0, 2)
        )
        # Heads that share a key/value head are stacked: (kv_heads, group * count, size).
        grouped = (
            q.reshape(count, s.kv_heads, group, s.head_size)
            .transpose(1, 2, 0, 3)
            .reshape(s.kv_heads, group * count, s.head_size)
        )
        scores = grouped @ keys[:, :end].transpose(0, 2, 1)
        scores *= np.float32(1.0 / np.sqrt(s.head_size))
        if mask is not None:
            scores = (scores.reshape(s.kv_heads, group, count, end) + mask).reshape(scores.shape)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        mixed = (scores @ values[:, :end]).reshape(s.kv_heads, group, count, s.head_size)
        out: Floats = mixed.transpose(2, 0, 1, 3).reshape(count, s.width) @ layer.out.T
        return out


def _rope_angles(shape: Shape, context: int) -> npt.NDArray[np.float64]:
    """Each position's rotation angles, computed as llama.cpp computes them: in float32,
    each frequency the previous one times ``base ** (-2 / head_size)``."""
    step = np.float32(shape.rope_base) ** np.float32(-2.0 / shape.head_size)
    theta = np.arange(context, dtype=np.float32)
    columns = []
    for _ in range(shape.head_size // 2):
        columns.append(theta)
        theta = theta * step
    return np.stack(columns, axis=1).astype(np.float64)


def _sigmoid(x: Floats) -> Floats:
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for x < -88: sigmoid is 0
        return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


# ---- choosing tokens --------------------------------------------------------------------------


def penalise(logits: Floats, recent: Sequence[int], sampling: Sampling) -> Floats:
    """llama.cpp's penalties on the tokens generated lately (its order and arithmetic)."""
    if not recent:
        return logits
    tokens, counts = np.unique(np.asarray(recent), return_counts=True)
    picked = logits[tokens]
    picked = np.where(
        picked <= 0, picked * sampling.repeat_penalty, picked / sampling.repeat_penalty
    )
    picked -= counts * sampling.frequency_penalty + sampling.presence_penalty
    logits = logits.copy()
    logits[tokens] = picked.astype(np.float32)
    return logits


def choose(logits: Floats, sampling: Sampling, rng: np.random.Generator) -> int:
    """The most likely token at temperature 0; else a draw from the top-k, top-p tokens."""
    if sampling.temperature <= 0:
        return int(np.argmax(logits))
    order = np.argsort(-logits, kind="stable")
    if sampling.top_k > 0:
        order = order[: sampling.top_k]
    scaled = logits[order].astype(np.float64) / sampling.temperature
    odds = np.exp(scaled - scaled.max())
    odds /= odds.sum()
    keep = min(int(np.searchsorted(np.cumsum(odds), sampling.top_p)) + 1, len(odds))
    odds = odds[:keep] / odds[:keep].sum()
    return int(order[rng.choice(keep, p=odds)])


# ---- the engine ---------------------------------------------------------------------------------


class NumpyEngine:
    """A GGUF model served by the numpy forward pass (the server's ``Engine``)."""

    def __init__(self, path: Path, *, context: int = 2048) -> None:
        gguf = read_gguf(path)
        tokens: list[str] = gguf.field("tokenizer.ggml.tokens")
        self.tokenizer = TextTokenizer(gguf)
        self.template = ChatTemplate(gguf, tokens)
        self.model = Llama(gguf, context=context)
        kinds = gguf.metadata.get("tokenizer.ggml.token_type", [])
        self.ends = {int(gguf.field("tokenizer.ggml.eos_token_id"))} | {
            i
            for i, t in enumerate(tokens)
            if kinds
            and kinds[i] == CONTROL
            and t in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>")
        }
        name = gguf.metadata.get("general.name", path.stem)
        self._description = f"{name} ({path.name}) on the numpy engine, float32"
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self._fingerprint = f"fp_numpy_{digest.hexdigest()[:12]}"

    @property
    def description(self) -> str:
        """The model's name and file, and the engine."""
        return self._description

    @property
    def fingerprint(self) -> str:
        """``fp_numpy_`` and the start of the model file's sha256."""
        return self._fingerprint

    @property
    def context_length(self) -> int:
        """The positions the key/value cache holds."""
        return self.model.context

    def prompt(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """The chat rendered by the model's template, then tokenized."""
        return self.tokenizer.encode(self.template.render(messages))

    def generate(self, prompt: Sequence[int], sampling: Sampling) -> Generator[bytes, None, None]:
        """Each next token's bytes until the model ends its turn or the context is full.

        Every call starts from an empty cache, so an answer depends on its request alone,
        never on which request came before.
        """
        rng = np.random.default_rng(sampling.seed)
        logits = self.model.forward(prompt, 0)
        recent: list[int] = []
        for position in range(len(prompt), self.model.context):
            token = choose(
                penalise(logits, recent[-sampling.repeat_last_n :], sampling), sampling, rng
            )
            if token in self.ends:
                return
            recent.append(token)
            yield self.tokenizer.piece(token)
            if position + 1 < self.model.context:
                logits = self.model.forward([token], position)


def describe_settings(engine: NumpyEngine) -> dict[str, Any]:
    """The network's sizes, for the start-up message."""
    shape = engine.model.shape
    return {
        "layers": shape.layers,
        "width": shape.width,
        "heads": shape.heads,
        "kv_heads": shape.kv_heads,
        "context": engine.model.context,
    }
