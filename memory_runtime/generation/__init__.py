"""A model running turns with its memory. ``runtime`` is the entry: the `generation` config section
and ``open_runtime``, which opens a model on its engine. Below it: ``engine`` (the turn's request and
result, and ``TurnEngine``, the interface every engine implements), the ``controller`` (the memory
controller: a turn's calls executed, the loop of a turn), the engines (``batching``: many turns at once
over ``batch_cache``, or one at a time over a streaming backend; ``vllm_backend``: vLLM), the backends
(``backend``: the interface; ``hf_backend``: transformers token by token; ``scripted_model``: a stand-in
without weights that writes and reads as a trained model does), call fields copied from the
conversation (``field_copy``) and writes a user can trust (``write_gate``)."""
