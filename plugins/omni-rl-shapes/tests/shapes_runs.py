"""What the shapes example tests share (a uniquely named module: tests import it by name, never ``conftest``)."""

#: an example shrunk to 2 steps of 2 prompts x 4 images, one val evaluation at the end, nothing saved
SHRINK = (
    "run.steps=2",
    "run.eval_every=2",
    "run.save_every=0",
    "log.image_every=0",
    'log.backends=["jsonl"]',
    "data.prompts_per_step=2",
    "data.val_images_per_prompt=1",
    "rollout.options.group_size=4",
    "rollout.options.batch_size=8",
    "optim.micro_batch=8",
    "optim.mini_batch=8",
)
