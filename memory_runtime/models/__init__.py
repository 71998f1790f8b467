"""The models a memory runs with: base models, tokenizers and PEFT adapters (``loading``: any
Hugging Face id or directory, and the embedded GGUF bases), and what this machine computes in
(``hardware``: device, dtype)."""
