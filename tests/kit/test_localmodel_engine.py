"""The keyless model's engine on a tiny GGUF that the test writes with ``gguf.GGUFWriter``
(llama.cpp's own writer): the reader, the tokenizer, the chat template and the forward
pass, against a plain re-implementation of Llama. No 98 MB model is needed; the real
one is checked in tests/e2e/test_localmodel.py.

It tests ``gradekit._localmodel``'s modules on purpose: the engine, the GGUF reader and the
server's sampling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy", reason="numpy is missing: `make test` installs the dev extra")
gguf = pytest.importorskip("gguf", reason="gguf is missing: `make test` installs the dev extra")
pytest.importorskip("tokenizers", reason="tokenizers is missing: `make test` installs it")

from gradekit._localmodel._engine import NumpyEngine  # noqa: E402
from gradekit._localmodel._gguf import GgufError, read_gguf  # noqa: E402
from gradekit._localmodel._server import BadRequest, Sampling  # noqa: E402

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "l l", "he ll", "Ġ w", "o r", "Ġw or"]
LAYERS, WIDTH, HEADS, KV_HEADS, FFN, BASE = 2, 64, 4, 2, 96, 10000.0
HEAD = WIDTH // HEADS


def byte_alphabet() -> list[str]:
    """GPT-2's printable stand-in for each byte, in byte order."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    shown, extra = [], 0
    for byte in range(256):
        if byte in printable:
            shown.append(chr(byte))
        else:
            shown.append(chr(256 + extra))
            extra += 1
    return shown


def vocabulary() -> list[str]:
    return [*SPECIALS, *byte_alphabet(), *(m.replace(" ", "") for m in MERGES)]


def weights() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    vocab = len(vocabulary())

    def matrix(rows: int, cols: int) -> Any:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    found = {
        "token_embd.weight": matrix(vocab, WIDTH),
        "output_norm.weight": (1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32),
    }
    for i in range(LAYERS):
        p = f"blk.{i}."
        found |= {
            p + "attn_norm.weight": (1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32),
            p + "ffn_norm.weight": np.ones(WIDTH, np.float32),
            p + "attn_q.weight": matrix(WIDTH, WIDTH),
            p + "attn_k.weight": matrix(KV_HEADS * HEAD, WIDTH),
            p + "attn_v.weight": matrix(KV_HEADS * HEAD, WIDTH),
            p + "attn_output.weight": matrix(WIDTH, WIDTH),
            p + "ffn_gate.weight": matrix(FFN, WIDTH),
            p + "ffn_up.weight": matrix(FFN, WIDTH),
            p + "ffn_down.weight": matrix(WIDTH, FFN),
        }
    return found


# Stored types: quantised ones are stored and read back as the engine will see them.
STORED = {
    "blk.0.attn_q.weight": "Q8_0",
    "blk.0.ffn_up.weight": "Q4_1",
    "blk.1.attn_k.weight": "Q4_0",
    "blk.1.ffn_down.weight": "F16",
    "blk.1.attn_output.weight": "BF16",
}


def stored(name: str, values: Any) -> tuple[Any, Any]:
    """What the writer stores for ``name`` and what a correct reader must get back."""
    kind = STORED.get(name)
    if kind is None:
        return values, values
    quant = gguf.GGMLQuantizationType[kind]
    data = gguf.quants.quantize(values, quant)
    back = gguf.quants.dequantize(data, quant).reshape(values.shape).astype(np.float32)
    return data, back


def write_tiny_gguf(path: Path, *, template: str = CHATML, pre: str = "smollm") -> dict[str, Any]:
    """A two-layer Llama with a byte-level vocabulary; returns the weights it holds."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny test llama")
    writer.add_block_count(LAYERS)
    writer.add_context_length(64)
    writer.add_embedding_length(WIDTH)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(BASE)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    tokens = vocabulary()
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template(template)
    held = {}
    for name, values in weights().items():
        data, held[name] = stored(name, values)
        kind = STORED.get(name)
        if kind in (None, "F16"):
            writer.add_tensor(name, data if kind is None else values.astype(np.float16))
        else:
            writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if "blk.1.ffn_down.weight" in held:
        held["blk.1.ffn_down.weight"] = (
            held["blk.1.ffn_down.weight"].astype(np.float16).astype(np.float32)
        )
    return held


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("model") / "tiny.gguf"
    return path, write_tiny_gguf(path)


# ---- a plain Llama, written the obvious way (llama.cpp's rotation of adjacent pairs) -------


def reference_logits(held: dict[str, Any], tokens: list[int]) -> Any:
    """Logits after each of ``tokens``: no cache, every head repeated, every position."""

    def norm(x: Any, w: Any) -> Any:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w

    def rotate(x: Any) -> Any:  # (T, heads, HEAD), pairs (0, 1), (2, 3) ...
        positions = np.arange(x.shape[0])[:, None, None]
        angle = positions * BASE ** (-np.arange(0, HEAD, 2) / HEAD)[None, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * np.cos(angle) - b * np.sin(angle)
        out[..., 1::2] = a * np.sin(angle) + b * np.cos(angle)
        return out

    count = len(tokens)
    x = held["token_embd.weight"][tokens].astype(np.float64)
    for i in range(LAYERS):
        p = f"blk.{i}."
        h = norm(x, held[p + "attn_norm.weight"])
        q = rotate((h @ held[p + "attn_q.weight"].T).reshape(count, HEADS, HEAD))
        k = rotate((h @ held[p + "attn_k.weight"].T).reshape(count, KV_HEADS, HEAD))
        v = (h @ held[p + "attn_v.weight"].T).reshape(count, KV_HEADS, HEAD)
        k, v = (np.repeat(t, HEADS // KV_HEADS, axis=1) for t in (k, v))
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(HEAD)
        scores[:, np.triu(np.ones((count, count), bool), 1)] = -np.inf
        weights_ = np.exp(scores - scores.max(-1, keepdims=True))
        weights_ /= weights_.sum(-1, keepdims=True)
        mixed = np.einsum("hts,shd->thd", weights_, v).reshape(count, WIDTH)
        x = x + mixed @ held[p + "attn_output.weight"].T
        h = norm(x, held[p + "ffn_norm.weight"])
        gate = h @ held[p + "ffn_gate.weight"].T
        x = (
            x
            + (gate / (1 + np.exp(-gate)) * (h @ held[p + "ffn_up.weight"].T))
            @ held[p + "ffn_down.weight"].T
        )
    return norm(x, held["output_norm.weight"]) @ held["token_embd.weight"].T


# ---- the reader ---------------------------------------------------------------------------


def test_the_reader_gets_back_every_tensor_and_the_metadata(tiny: tuple[Path, Any]) -> None:
    path, held = tiny
    model = read_gguf(path)
    assert model.metadata["general.architecture"] == "llama"
    assert model.metadata["llama.attention.head_count_kv"] == KV_HEADS
    assert model.metadata["tokenizer.ggml.tokens"] == vocabulary()
    assert model.metadata["tokenizer.ggml.merges"] == MERGES
    assert {name: model.tensors[name].kind for name in STORED} == STORED
    for name, values in held.items():
        assert np.array_equal(model.tensors[name].floats(), values), name


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"<html>404</html>" * 4)
    with pytest.raises(GgufError, match="not a GGUF file"):
        read_gguf(path)


# ---- the tokenizer and the template -----------------------------------------------------------


def test_the_tokenizer_applies_the_merges_splits_digits_and_reads_control_tokens(
    tiny: tuple[Path, Any],
) -> None:
    engine = NumpyEngine(tiny[0], context=64)
    ids = vocabulary().index
    encoded = engine.tokenizer.encode("<|im_start|>hello world 42<|im_end|>")
    assert encoded == [
        1,
        ids("hell"),
        ids("o"),
        ids("Ġwor"),
        ids("l"),
        ids("d"),
        ids("Ġ"),
        ids("4"),
        ids("2"),
        2,
    ]


@pytest.mark.parametrize(
    "text",
    [
        "plain ASCII, with punctuation!",
        "digits 2026-12-01",
        "caf\u00e9 \u20ac5 \u65e5\u672c \U0001f600",
        " two  spaces\n",
    ],
)
def test_decoding_the_tokens_gives_back_the_text(tiny: tuple[Path, Any], text: str) -> None:
    engine = NumpyEngine(tiny[0], context=64)
    tokens = engine.tokenizer.encode(text)
    assert b"".join(engine.tokenizer.piece(t) for t in tokens).decode() == text
    assert engine.tokenizer.piece(2) == b""  # a control token says nothing


def test_the_prompt_is_the_files_chat_template(tiny: tuple[Path, Any]) -> None:
    engine = NumpyEngine(tiny[0], context=64)
    prompt = engine.prompt(
        [{"role": "system", "content": "hi"}, {"role": "user", "content": "hello"}]
    )
    rendered = (
        "<|im_start|>system\nhi<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt == engine.tokenizer.encode(rendered)


def test_a_template_that_raises_is_a_bad_request(tmp_path: Path) -> None:
    path = tmp_path / "strict.gguf"
    write_tiny_gguf(path, template="{{ raise_exception('roles must alternate') }}")
    engine = NumpyEngine(path, context=64)
    with pytest.raises(BadRequest, match="roles must alternate"):
        engine.prompt([{"role": "user", "content": "hi"}])


def test_an_unknown_pre_tokenizer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "other.gguf"
    write_tiny_gguf(path, pre="qwen2")
    with pytest.raises(GgufError, match=r"'qwen2'.*serve it with llama\.cpp"):
        NumpyEngine(path, context=64)


# ---- the forward pass and generation ------------------------------------------------------------


def test_the_forward_pass_equals_a_plain_llama(tiny: tuple[Path, Any]) -> None:
    path, held = tiny
    engine = NumpyEngine(path, context=64)
    tokens = engine.tokenizer.encode("<|im_start|>user\nhello world 42")
    expected = reference_logits(held, tokens)
    assert np.allclose(engine.model.forward(tokens, 0), expected[-1], atol=1e-4)
    # One token at a time through the cache gives the same logits as the whole prompt.
    engine.model.forward(tokens[:5], 0)
    for position in range(5, len(tokens)):
        logits = engine.model.forward(tokens[position : position + 1], position)
        assert np.allclose(logits, expected[position], atol=1e-4), position


def test_greedy_generation_follows_the_highest_logit(tiny: tuple[Path, Any]) -> None:
    path, held = tiny
    engine = NumpyEngine(path, context=64)
    prompt = engine.tokenizer.encode("hello")
    pieces = engine.generate(prompt, Sampling(repeat_penalty=1.0))
    tokens = list(prompt)
    for _ in range(6):
        expected = int(np.argmax(reference_logits(held, tokens)[-1]))
        if expected in (0, 2):
            break  # the model ended its turn
        assert next(pieces) == engine.tokenizer.piece(expected)
        tokens.append(expected)
    assert len(tokens) > len(prompt)


def test_the_same_request_gives_the_same_tokens_and_a_sample_follows_its_seed(
    tiny: tuple[Path, Any],
) -> None:
    engine = NumpyEngine(tiny[0], context=64)
    prompt = engine.tokenizer.encode("hello world")

    def answer(sampling: Sampling) -> list[bytes]:
        return list(engine.generate(prompt, sampling))[:12]

    assert answer(Sampling()) == answer(Sampling())
    hot = Sampling(temperature=5.0, top_k=0, top_p=1.0, seed=3)
    assert answer(hot) == answer(hot)
    assert (
        len(
            {tuple(answer(Sampling(temperature=5.0, top_k=0, top_p=1.0, seed=s))) for s in range(4)}
        )
        > 1
    )


def test_generation_stops_when_the_context_is_full(tiny: tuple[Path, Any]) -> None:
    engine = NumpyEngine(tiny[0], context=12)
    prompt = engine.tokenizer.encode("hello")
    assert len(list(engine.generate(prompt, Sampling(repeat_penalty=1.0)))) <= 12 - len(prompt)


def test_the_repeat_penalty_changes_a_repeating_answer(tiny: tuple[Path, Any]) -> None:
    engine = NumpyEngine(tiny[0], context=64)
    prompt = engine.tokenizer.encode("hello")
    plain = list(engine.generate(prompt, Sampling(repeat_penalty=1.0)))[:20]
    penalised = list(engine.generate(prompt, Sampling(repeat_penalty=3.0)))[:20]
    assert plain != penalised
    assert len(set(penalised)) >= len(set(plain))
