"""CUDA graphs for the no-grad transformer calls (``[model] options.cuda_graphs = true``).

A denoising loop calls the transformer with the same shapes at every step, and at the sizes users train (SD3.5,
FLUX, Qwen-Image, Wan) a forward launches thousands of small kernels (norms, modulation, LoRA's two thin matmuls
per projection); a CUDA graph records those launches once and replays them with one call, so the GPU no longer
waits on Python between kernels. Only calls made without gradients are graphed (the rollout's sampling, validation,
the reference policy's no-grad forward): a graph's buffers are fixed, autograd's saved tensors are not.

How a call is served (:class:`GraphedCalls`):

- the key is the module, its LoRA view (active adapters, adapters on or off; a captured graph runs exactly the
  adapters it was captured with) and every argument's shape, dtype and device, with the non-tensor arguments by
  value. A new key captures a graph: two eager warm-up calls on a side stream, then the capture, all on static
  copies of the inputs;
- a known key copies the inputs into the static ones, replays, and returns a clone of the static output (the next
  replay overwrites it);
- at most :data:`MAX_GRAPHS` graphs are kept (say the rollout's chunk, its last smaller chunk, the validation
  batch and the reference's micro-batch); a new key beyond that drops the least recently used one.

Weights are read where they live, so updates made in place (the optimizer's step, a weights version copied in,
DiffusionNFT's blend) are seen by the next replay; a weight *replaced* by another tensor is not, which is why this
module refuses FSDP2 (it gathers parameters into new storage every forward; omni_rl's config check) and why
nothing in omni-rl reassigns a transformer's parameters after the model is built.

The replayed kernels are the eager ones, but the old log-probs are recomputed through the trained (grad) forward
all the same (``old_log_probs_with_grad``), so the first step's on-policy ratio is 1 by construction and does not
rest on a capture choosing the same cuBLAS algorithms as eager.

Where the capture itself fails (an operation that synchronises with the host, such as ``.item()``, inside the
model's forward) the run stops with the reason and the option to turn off; it never falls back silently.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import torch

from omni_rl.errors import RuntimeFailure

_log = logging.getLogger(__name__)

#: graphs kept per model; each holds its inputs, output and the activations of one forward
MAX_GRAPHS = 4
#: eager calls before a capture (lazy initialisation, cuBLAS workspaces and autotuning happen outside the graph)
WARMUP_CALLS = 2


class GraphBackend(Protocol):
    """Records ``run`` once and returns (replay, static output): after ``replay()`` the static output holds what
    ``run`` computes from the current contents of the tensors it reads."""

    def capture(self, run: Callable[[], Any]) -> tuple[Callable[[], None], Any]: ...


class CudaGraphBackend:
    """``torch.cuda.CUDAGraph`` capture after eager warm-up on a side stream (the recipe of torch's CUDA graph
    documentation); each graph gets its own memory pool, so replaying one never overwrites another's output."""

    def capture(self, run: Callable[[], Any]) -> tuple[Callable[[], None], Any]:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(WARMUP_CALLS):
                run()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            output = run()
        return graph.replay, output


class _Graph:
    """One captured call: static inputs, the replay and the static output."""

    def __init__(self, inputs: list[torch.Tensor], replay: Callable[[], None], output: Any) -> None:
        self.inputs = inputs
        self.replay = replay
        self.output = output


class GraphedCalls:
    """Serves no-grad calls of transformer modules from captured graphs (see the module docstring)."""

    def __init__(self, backend: GraphBackend, *, max_graphs: int = MAX_GRAPHS) -> None:
        self.backend = backend
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[Hashable, _Graph] = OrderedDict()
        #: graphs captured so far (tests and logs read it: a steady loop captures once per shape)
        self.captures = 0
        #: calls served by a replay
        self.replays = 0
        self._lora_layers: dict[int, tuple[torch.nn.Module, Any]] = {}
        self._paused = 0
        self._warned_eviction = False

    def __len__(self) -> int:
        return len(self._graphs)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Calls in the block run eagerly and capture nothing (the "auto" batch probes: a try measures the
        forward's own memory and leaves no graph of a probe size behind)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def __call__(self, module: torch.nn.Module, **kwargs: Any) -> Any:
        """``module(**kwargs)``: eager under gradients, else a replay of the graph for this call's key."""
        if torch.is_grad_enabled() or self._paused:
            return module(**kwargs)
        tensors: list[torch.Tensor] = []
        signature = _signature(kwargs, tensors)
        # inference-mode tensors cannot be written outside inference mode: a graph captured in one serves only it
        key = (id(module), self._lora_view(module), torch.is_inference_mode_enabled(), signature)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._capture(module, kwargs, tensors)
            self._graphs[key] = graph
            while len(self._graphs) > self.max_graphs:
                self._graphs.popitem(last=False)
                if not self._warned_eviction:
                    self._warned_eviction = True
                    _log.warning(
                        "cuda_graphs: more than %d distinct transformer call shapes; the least recently used graph "
                        "was dropped and is captured again when its shape returns (three forwards each time). "
                        "Fewer shapes (a batch_size dividing the rollout, one eval batch size) avoid it",
                        self.max_graphs,
                    )
        else:
            self._graphs.move_to_end(key)
            for static, value in zip(graph.inputs, tensors, strict=True):
                static.copy_(value)
        graph.replay()
        self.replays += 1
        return _clone(graph.output)

    def _lora_view(self, module: torch.nn.Module) -> Hashable:
        """:func:`lora_view`, with the module's first LoRA layer found once (not at every call)."""
        cached = self._lora_layers.get(id(module))
        if cached is not None and cached[0] is module:  # the module itself (kept), not a later one with its id
            return _view_of(cached[1])
        layer = first_lora_layer(module)
        if layer is not None:  # none yet: look again next time (adapters may be added later)
            self._lora_layers[id(module)] = (module, layer)
        return _view_of(layer)

    def _capture(self, module: torch.nn.Module, kwargs: dict[str, Any], tensors: list[torch.Tensor]) -> _Graph:
        inputs = [t.clone() for t in tensors]
        static_kwargs = _substitute(kwargs, iter(inputs))
        try:
            replay, output = self.backend.capture(lambda: module(**static_kwargs))
        except torch.cuda.OutOfMemoryError:
            raise  # an OOM stays an OOM: the "auto" batch probes back off on it
        except RuntimeError as error:
            raise RuntimeFailure(
                f"cuda_graphs: capturing the {type(module).__name__} forward failed: {error}",
                hint="the model's forward does something a CUDA graph cannot hold (a host sync such as .item(), a "
                "CPU tensor); set [model] options.cuda_graphs = false",
            ) from error
        self.captures += 1
        _log.info("cuda_graphs: captured %s with %s", type(module).__name__, [tuple(t.shape) for t in inputs])
        return _Graph(inputs, replay, output)


def lora_view(module: torch.nn.Module) -> Hashable:
    """Which LoRA adapters a forward of ``module`` runs: (active adapter names, adapters disabled, every adapter's
    name), read from its first peft LoRA layer (every layer switches together); None for a module without LoRA."""
    return _view_of(first_lora_layer(module))


def first_lora_layer(module: torch.nn.Module) -> Any:
    """The first peft LoRA layer inside ``module``, or None."""
    return next((m for m in module.modules() if hasattr(m, "lora_A") and hasattr(m, "active_adapters")), None)


def _view_of(layer: Any) -> Hashable:
    if layer is None:
        return None
    return (tuple(layer.active_adapters), bool(layer.disable_adapters), tuple(layer.lora_A))


def _signature(value: Any, tensors: list[torch.Tensor]) -> Hashable:
    """A hashable description of ``value`` (tensors by shape, dtype and device; other values by value),
    appending its tensors to ``tensors`` in a fixed order."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return ("tensor", tuple(value.shape), value.dtype, value.device)
    if isinstance(value, dict):
        return ("dict", tuple((k, _signature(value[k], tensors)) for k in sorted(value)))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_signature(v, tensors) for v in value))
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise RuntimeFailure(
        f"cuda_graphs: cannot key a transformer call on an argument of type {type(value).__name__}",
        hint="set [model] options.cuda_graphs = false for this model",
    )


def _substitute(value: Any, static: Any) -> Any:
    """``value`` with its tensors replaced, in :func:`_signature`'s order, by the next ones of ``static``."""
    if isinstance(value, torch.Tensor):
        return next(static)
    if isinstance(value, dict):
        return {k: _substitute(value[k], static) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return type(value)(_substitute(v, static) for v in value)
    return value


def _clone(output: Any) -> Any:
    """A copy of a static output (tensors, tuples and lists of them, or a diffusers output dict)."""
    if isinstance(output, torch.Tensor):
        return output.clone()
    if isinstance(output, list | tuple):
        return type(output)(_clone(v) for v in output)
    if isinstance(output, dict):
        return type(output)(**{k: _clone(v) for k, v in output.items()})
    return output
