"""What a run trains, one module per objective, each on the run skeleton of training/run.py:

    sft.py                records' trained tokens (TRL's SFTTrainer)
    dpo.py, kto.py        preference pairs, labelled turns (their shared code: preference.py)
    preference_config.py  the `preference` section (dpo, kto)
    grpo_config.py        the `grpo` section; GRPO's trainer is learning_loop/grpo.py (its reward reads eval)

The table objective -> run function is learning_loop/train.py, the lowest layer that sees all four."""
