"""learning_loop: the model improves itself, above data_gen, training and eval.

    self_instruct.py          `memlm self-instruct`: model-phrased tasks, executed, rewarded, kept, trained on
    self_instruct_tasks.py    its tasks: drafted from a synthetic world, phrased by the model, filtered
    self_instruct_execute.py  its tasks run with the memory, scored, the exact runs kept; its probes
    reward.py                 the reward of an executed turn (graded; exact for self-instruct's filter)
    review.py                 `memlm feedback list | accept | reject | export`: feedback reviewed before it trains
    sampling.py               `memlm sample`: the model's own runs, executed and scored, as DPO pairs and KTO turns
    grpo.py                   objective grpo: GRPO on runs executed with the memory, rewarded
    train.py                  `memlm train`: train(config), the table of the four objectives (training/objectives/)

Feedback from chat and serve (memory_runtime.serving.feedback) is kept per user in pending/ until it is
accepted: good runs and corrections into accepted.jsonl (SFT, through data.extra_jsonl), every reviewed
rating into accepted_labelled.jsonl, which `memlm feedback export` turns into KTO turns or DPO pairs.
"""
