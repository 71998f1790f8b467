"""A model running turns with its memory. ``runtime`` is the entry: the `generation` config section and
``open_runtime``, which opens a model on its engine (hf, onnx or vllm: ``engine_choice`` measures which
serves more where `auto` may take either). The words, one per role (docs/architecture.md):

    turn          ``turn``: a turn's request (messages, memory, limits, sampling) and its result
    decoder       ``decoder``: ``Decoder``, the interface that decodes many turns with their calls executed;
                  ``queued_decoder``: the base of those whose turns wait in this process. The decoders:
                  ``batching`` (``BatchDecoder``: many turns at once over ``batch_cache`` / ``packed_cache``;
                  ``OneAtATime``: one at a time over a backend) and ``vllm_decoder`` (``VLLMDecoder``)
    turn state    ``turn_state``: one turn's tokens and exact text and the choice of each next token,
                  whichever decoder runs the model
    backend       ``backend``: the interface of a model's forward pass, one turn streaming; ``hf_backend``
                  (transformers), ``onnx_backend`` (ONNX Runtime GenAI), ``scripted_model`` (a stand-in
                  without weights that writes and reads as a trained model does)

Beside them: the memory ``controller`` (a turn's calls executed, what the decoding does next), call fields
copied from the conversation (``field_copy``) and writes a user can trust (``write_gate``)."""
