"""memlm's ground floor: a model running with its memory.

What every layer shares sits at the top: the text protocol (``protocol``: one definition of the
calls), the training record (``records``), configs (``yaml_config``), the files memlm ships (``shipped``:
configs/ and data/, found from any directory), JSONL reading and summary statistics. Four rooms, each
importing only the top and the rooms before it (tests/test_layers.py):

    memory/      the triplet store and its databases (SQLite, PostgreSQL), fuzzy lookup, migration,
                 the guard against injected calls
    models/      base models, tokenizers and adapters (the embedded GGUF bases), and the machine's
                 device and dtype
    generation/  a model running turns with its memory: the controller, the decoding engines (hf
                 one at a time or batched, vLLM), copy-constrained call fields, the write gate, and
                 ``runtime`` (the `generation` config section, opened once)
    serving/     the model for people: the HTTP API and memory page, the scheduler, the terminal
                 chat, feedback, the serving benchmark

memory and models are side by side, not importing each other.
"""
