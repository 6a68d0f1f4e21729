"""omni-rl-pipelines: the kit the diffusers model adapters are built from (a library: no components of its own).

SD3, FLUX, Qwen-Image and Wan each depend on it and not on each other. What it holds does not depend on the
architecture:

- :mod:`~omni_rl_pipelines.pipeline_model`: :class:`PipelineModel`, the training state, policy views, full
  fine-tuning's files, offloading and export of a model that wraps one diffusers pipeline;
- :mod:`~omni_rl_pipelines.lora`: the LoRA adapters through peft (trained, extra, reference view) and their files;
- :mod:`~omni_rl_pipelines.options`: the option bases every model config combines (LoRA, memory, the pipeline's
  dtype) and :mod:`~omni_rl_pipelines.speed` (compile, attention kernels, VAE options, CUDA graphs:
  :mod:`~omni_rl_pipelines.cuda_graphs`);
- :mod:`~omni_rl_pipelines.loading`: :class:`PipelineKind`, path checks that end in a ConfigError naming
  ``[model] options.path``;
- :mod:`~omni_rl_pipelines.prompt_cache` (per-prompt embeddings, cached, offloadable encoders) and
  :mod:`~omni_rl_pipelines.packed_latents` (2x2 packing and the sigma schedule of FLUX and Qwen-Image);
- :mod:`~omni_rl_pipelines.tiny`, :mod:`~omni_rl_pipelines.tiny_tokenizers` (CLIP, T5) and
  :mod:`~omni_rl_pipelines.tiny_qwen3` (Qwen3 / Qwen3-VL): writing tiny random pipelines
  offline for tests and examples;
- :mod:`~omni_rl_pipelines.testing`: conformance checks and helpers for the model plugins' tests.

Nothing heavy is imported here; ``options`` and ``speed`` import without torch.
"""
