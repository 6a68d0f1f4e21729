"""Pretraining step 2: the rectified-flow objective SD3 was trained with, on cached latents and prompt embeddings.

x_t = (1 - sigma) x0 + sigma eps, the transformer predicts v = eps - x0 at timestep sigma * 1000, loss = MSE.
sigma is drawn as SD3 (and diffusers' SD3 training script) draws it: t = sigmoid(u), u ~ N(mean, std)
(logit-normal), then the scheduler's shift, sigma = shift t / (1 + (shift - 1) t), so training concentrates on
the noise levels the shifted sampling schedule visits. A fraction of samples gets the empty prompt's embeddings,
which teaches the unconditional velocity classifier-free guidance needs (the pipeline's negative prompt is "").

The text encoders and the VAE are frozen, so their outputs are computed once: each step is only the transformer.
How the transformer is called (SD3's pooled projections, Qwen-Image's packed tokens and text mask) is the
architecture's business (:mod:`.arch`): the trainer gets a ``velocity(x_t, sigma, prompt_ids)`` function,
so the objective, the sigma draw, the optimizer and the EMA are one piece of code for every architecture.
As in diffusion training generally (SD3 included), the weights evaluated and shipped are an exponential moving
average of the trained ones: a short, high-learning-rate run's raw weights jitter from step to step, and its
samples with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class FlowTraining:
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.99)
    warmup_steps: int = 100
    #: 0: constant learning rate after warmup; N: cosine decay to 0 at step N (an annealing stage: a model whose
    #: val reward plateaus at a constant rate gains from settling into the minimum)
    cosine_decay_steps: int = 0
    grad_clip: float = 1.0
    #: fraction of samples trained with the empty prompt (for classifier-free guidance)
    cfg_dropout: float = 0.1
    logit_mean: float = 0.0
    logit_std: float = 1.0
    #: decay of the exponential moving average of the weights that is evaluated and shipped (0: no EMA);
    #: ramped up as min(decay, (1 + t) / (10 + t)) so early averages do not cling to the random init
    ema_decay: float = 0.995


def sample_sigmas(n: int, settings: FlowTraining, shift: float, generator: Any) -> Any:
    """n noise levels from SD3's shifted logit-normal distribution, float32 in (0, 1).

    ``shift`` is SD3's constant shift (3), or for a scheduler with dynamic shifting (Qwen-Image) exp(mu) with mu
    its resolution-dependent shift: the exponential time shift exp(mu) / (exp(mu) + 1 / t - 1) is this same map."""
    import torch

    u = torch.randn(n, generator=generator) * settings.logit_std + settings.logit_mean
    t = torch.sigmoid(u)
    return shift * t / (1 + (shift - 1) * t)


def lr_factor(step: int, settings: FlowTraining) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based): linear warmup, then constant
    or a cosine decay that reaches 0 at ``cosine_decay_steps``."""
    warmup = min(1.0, (step + 1) / max(1, settings.warmup_steps))
    if settings.cosine_decay_steps <= 0:
        return warmup
    progress = min(1.0, step / settings.cosine_decay_steps)
    return warmup * 0.5 * (1.0 + math.cos(math.pi * progress))


class FlowMatchingTrainer:
    """Full-weight training of a flow-matching transformer on (latent, prompt index) pairs.

    ``latents`` (N, C, h, w) (video: (N, C, F', h, w)) are model-space latents and ``prompt_ids`` (N,) index the
    rows of the prompt conditioning that ``velocity(x_t, sigma, ids)`` looks up (the transformer's prediction for
    latents ``x_t`` at noise levels ``sigma`` (B,), shaped like ``x_t``); ``empty_id`` is the row of the
    unconditional prompt, or a function from the dropped samples' rows to their unconditional rows (an editing
    model's unconditional input keeps each sample's source image: the negative prompt with that image).
    ``shift`` is the time shift of the sigma draw (:func:`sample_sigmas`).
    """

    def __init__(
        self,
        transformer: Any,
        latents: Any,
        prompt_ids: Any,
        velocity: Callable[[Any, Any, Any], Any],
        empty_id: int | Callable[[Any], Any],
        *,
        shift: float,
        settings: FlowTraining,
        seed: int,
    ) -> None:
        import torch

        self.transformer = transformer
        self.latents, self.prompt_ids = latents, prompt_ids
        self.velocity, self.empty_id = velocity, empty_id
        self.shift = shift
        self.settings = settings
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer = torch.optim.AdamW(
            transformer.parameters(), lr=settings.lr, weight_decay=settings.weight_decay, betas=settings.betas
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: lr_factor(step, settings))
        self.steps_done = 0
        self._ema = [p.detach().clone() for p in transformer.parameters()]

    def step(self) -> float:
        """One optimizer step on a random batch; returns the loss."""
        import torch

        s, g = self.settings, self.generator
        idx = torch.randint(len(self.latents), (s.batch_size,), generator=g)
        x0 = self.latents[idx]
        ids = self.prompt_ids[idx].clone()
        dropped = torch.rand(s.batch_size, generator=g) < s.cfg_dropout
        ids[dropped] = self.empty_id(ids[dropped]) if callable(self.empty_id) else self.empty_id
        sigma = sample_sigmas(s.batch_size, s, self.shift, g)
        noise = torch.randn(x0.shape, generator=g)
        s_ = sigma.view(-1, *[1] * (x0.ndim - 1))  # (B, C, h, w) images or (B, C, F', h, w) video latents
        x_t = (1 - s_) * x0 + s_ * noise
        self.transformer.train()
        prediction = self.velocity(x_t, sigma, ids)
        loss = (prediction.float() - (noise - x0)).pow(2).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.transformer.parameters(), s.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.transformer.eval()
        self.steps_done += 1
        self._update_ema()
        return loss.item()

    def _update_ema(self) -> None:
        import torch

        t = self.steps_done
        decay = min(self.settings.ema_decay, (1 + t) / (10 + t))
        with torch.no_grad():
            for average, p in zip(self._ema, self.transformer.parameters(), strict=True):
                average.lerp_(p.detach(), 1 - decay)

    @contextmanager
    def averaged_weights(self) -> Iterator[None]:
        """Inside, the transformer holds the EMA weights (the trained weights are restored on exit)."""
        import torch

        if self.settings.ema_decay <= 0:
            yield
            return
        params = list(self.transformer.parameters())
        trained = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p, average in zip(params, self._ema, strict=True):
                p.copy_(average)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, saved in zip(params, trained, strict=True):
                    p.copy_(saved)
