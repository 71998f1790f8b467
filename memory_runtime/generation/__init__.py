"""A model running turns with its memory. ``runtime`` is the entry: the `generation` config section
and ``open_runtime``, which opens a model on its engine. Below it: the ``controller`` (one turn, its
calls executed), the backends (``backend``: the interface; ``hf_backend``: transformers token by
token), batched decoding (``batching`` over ``batch_cache``), vLLM (``vllm_backend``), call fields
copied from the conversation (``field_copy``) and writes a user can trust (``write_gate``)."""
